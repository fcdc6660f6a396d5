#!/usr/bin/env python3
"""Server descriptors and RSS for N idle sessions (issue 11, section 5).

Starts the server binary given (default target/release/ringkeeper) on a free
loopback port with a temporary dataDir, opens N sessions with raw
ConnectRequests (40 s timeout: they stay idle, unexpired, while measured),
and prints the server's open descriptors (/proc/PID/fd) and VmRSS before
and after, and the difference per connection. Raises its own and the
server's descriptor limit (RLIMIT_NOFILE) first.

usage: tuning/idle-conns.py [N] [BINARY]
"""
import os, resource, socket, struct, subprocess, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
BIN = sys.argv[2] if len(sys.argv) > 2 else "target/release/ringkeeper"

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = min(hard, 4 * N + 1024)
resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
if want < 2 * N + 100:
    sys.exit(f"descriptor limit {want} too low for {N} connections")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def status(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return fds, rss


def connect_body():
    # protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
    return struct.pack(">iqiqi16s?", 0, 0, 40000, 0, 16, b"\0" * 16, False)


def frame(b):
    return struct.pack(">i", len(b)) + b


def read_exact(s, n):
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise EOFError("server closed")
        out += got
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="rk-idle-")
    port = free_port()
    cfg = os.path.join(tmp, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(f"tickTime=2000\ndataDir={tmp}/data\nclientPort={port}\n"
                "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
                "4lw.commands.whitelist=*\nforceSync=no\n")
    os.makedirs(f"{tmp}/data")
    server = subprocess.Popen([BIN, "--config", cfg], stdout=subprocess.DEVNULL,
                              stderr=open(f"{tmp}/server.log", "w"),
                              env=dict(os.environ, RUST_LOG="warn"))
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)
        fds0, rss0 = status(server.pid)
        conns = []
        started = time.time()
        for i in range(N):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(frame(connect_body()))
            conns.append(s)
            # Read answers in windows of 100 to keep the pace without a
            # thread per socket.
            if len(conns) % 100 == 0 or i == N - 1:
                for c in conns[-100:] if len(conns) % 100 == 0 else conns[(len(conns) // 100) * 100:]:
                    n = struct.unpack(">i", read_exact(c, 4))[0]
                    body = read_exact(c, n)
                    sid = struct.unpack(">q", body[8:16])[0]
                    assert sid != 0, "session refused"
        opened_s = time.time() - started
        time.sleep(1.0)
        fds1, rss1 = status(server.pid)
        print(f"binary: {BIN}")
        print(f"sessions: {N} (opened in {opened_s:.1f} s)")
        print(f"server fds: before {fds0}, after {fds1}, per connection {(fds1 - fds0) / N:.2f}")
        print(f"server VmRSS: before {rss0} KiB, after {rss1} KiB, "
              f"per connection {(rss1 - rss0) / N:.1f} KiB")
        for c in conns:
            c.close()
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
