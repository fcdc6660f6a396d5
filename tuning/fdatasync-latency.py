import os, time
fd = os.open("/tmp/rk-fdatasync.test", os.O_CREAT|os.O_RDWR)
os.posix_fallocate(fd, 0, 1<<20)
buf = b"x"*4096
ts=[]
for i in range(1000):
    os.pwrite(fd, buf, (i*4096) % (1<<20))
    t=time.perf_counter(); os.fdatasync(fd); ts.append(time.perf_counter()-t)
ts.sort(); print("fdatasync p50 %.1f us p99 %.1f us" % (ts[500]*1e6, ts[990]*1e6))
