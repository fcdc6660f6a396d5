import subprocess,sys
# usage: bucket.py perf.data ops_per_s
data, ops = sys.argv[1], float(sys.argv[2])
out = subprocess.run(["perf","report","-i",data,"--children","--sort","sym","-g","none","--stdio"],capture_output=True,text=True).stdout
total=None
for l in out.splitlines():
    if l.startswith("# Samples:"):
        n=l.split()[2]; total=float(n[:-1])*1000 if n.endswith("K") else float(n)
pct={}
for l in out.splitlines():
    p=l.split()
    if len(p)>=4 and p[0].endswith('%'):
        pct[" ".join(p[3:])]=float(p[0][:-1])
per_op_us = total/4999/(ops*4)*1e6
print(f"samples {total:.0f}, cpu/op {per_op_us:.2f} us")
for k in ["__do_sys_io_uring_enter","io_send","sock_def_readable","io_recv","io_write","__libc_pwrite","schedule","io_cqring_wait","__io_run_local_work","asm_common_interrupt","memmove"]:
    for name,v in pct.items():
        if k in name:
            print(f"  {name:50s} {v:6.2f}%  {v/100*per_op_us:.3f} us/op"); break
