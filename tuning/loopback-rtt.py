# The loopback TCP round trip between two processes on this machine, with
# nothing else in it: a blocking echo server in a forked child and 5,000
# 40-byte ping-pongs (TCP_NODELAY). On a VM the cost is mostly waking the
# sleeping peer (a halted vCPU to wake), which every hop between two
# servers of an ensemble pays too.
#   python3 tuning/loopback-rtt.py
import socket, os, time, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); port = s.getsockname()[1]
if os.fork() == 0:
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(64)
        if not d: os._exit(0)
        c.sendall(d)
c = socket.create_connection(("127.0.0.1", port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
ts = []
for i in range(5000):
    t = time.perf_counter(); c.sendall(b"x" * 40); c.recv(64); ts.append(time.perf_counter() - t)
ts.sort(); print("loopback TCP ping-pong between two processes: p50 %.1f us p90 %.1f us" % (ts[2500]*1e6, ts[4500]*1e6))
c.close(); os.wait()
