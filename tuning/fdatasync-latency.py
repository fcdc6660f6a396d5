# One fdatasync on this disk, two ways, 1000 times each:
#   overwrite: 4 KiB written over a preallocated 1 MiB file (mostly blocks
#              already written once), then fdatasync;
#   append:    1 KiB appended to a fresh preallocated file, then fdatasync
#              (what a log does).
# Prints the overwrite p50 first (the smaller, used as the baseline), e.g.
#   fdatasync p50 81.0 us p99 2038.9 us; append p50 95.2 us p99 1990.1 us
# The files go in $FDATASYNC_DIR (default /tmp): put it on the log's disk.
import os, time

def measure(path, size, step):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        buf = b"x" * size
        ts = []
        for i in range(1000):
            os.pwrite(fd, buf, (i * step) % (1 << 20))
            t = time.perf_counter()
            os.fdatasync(fd)
            ts.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    ts.sort()
    return ts[500] * 1e6, ts[990] * 1e6

d = os.environ.get("FDATASYNC_DIR", "/tmp")
o50, o99 = measure(os.path.join(d, "rk-fdatasync-overwrite.test"), 4096, 4096)
a50, a99 = measure(os.path.join(d, "rk-fdatasync-append.test"), 1024, 1024)
print("fdatasync p50 %.1f us p99 %.1f us; append p50 %.1f us p99 %.1f us" % (o50, o99, a50, a99))
