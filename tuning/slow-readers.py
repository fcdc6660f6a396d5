#!/usr/bin/env python3
"""Server memory while clients never read their replies (issue 11, section 5).

Starts the server binary given on a free loopback port, creates a 1 MB
znode, then SESSIONS sessions each send REQUESTS getData for it and never
read. Samples the server's VmRSS every 100 ms for SECONDS and prints the
baseline, the peak and the last sample, and whether a well-behaved session
still gets the node. EXTRA is appended to zoo.cfg (e.g.
"ringkeeper.replyBytesMax=67108864").

usage: tuning/slow-readers.py [BINARY] [SESSIONS] [REQUESTS] [SECONDS] [EXTRA]
"""
import os, socket, struct, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/ringkeeper"
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 40
REQUESTS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 20
EXTRA = sys.argv[5].replace("\\n", "\n") if len(sys.argv) > 5 else ""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def frame(b):
    return struct.pack(">i", len(b)) + b


def pbuf(b):
    return struct.pack(">i", len(b)) + b


ACL = struct.pack(">i", 1) + struct.pack(">i", 31) + pbuf(b"world") + pbuf(b"anyone")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def session(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(frame(struct.pack(">iqiqi16s?", 0, 0, 30000, 0, 16, b"\0" * 16, False)))
    return s


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            g = s.recv(n - len(b))
            if not g:
                raise EOFError
            b += g
        return b
    return exact(struct.unpack(">i", exact(4))[0])


def main():
    tmp = tempfile.mkdtemp(prefix="rk-slow-")
    port = free_port()
    cfg = os.path.join(tmp, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(f"tickTime=2000\ndataDir={tmp}/data\nclientPort={port}\n"
                f"clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nforceSync=no\n{EXTRA}\n")
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
        c = session(port)
        read_frame(c)
        c.sendall(frame(struct.pack(">ii", 1, 1) + pbuf(b"/big") + pbuf(b"v" * 1_000_000) + ACL + struct.pack(">i", 0)))
        read_frame(c)
        time.sleep(0.5)
        base = rss_kib(server.pid)
        req = b"".join(frame(struct.pack(">ii", i + 1, 4) + pbuf(b"/big") + b"\0") for i in range(REQUESTS))
        abusers = []
        for _ in range(SESSIONS):
            s = session(port)
            s.setblocking(False)
            try:
                s.send(req)  # what fits; the rest is never sent
            except OSError:
                pass
            abusers.append(s)
        peak = last = base
        end = time.time() + SECONDS
        while time.time() < end:
            time.sleep(0.1)
            last = rss_kib(server.pid)
            peak = max(peak, last)
        # A well-behaved session.
        t = time.perf_counter()
        g = session(port)
        read_frame(g)
        g.sendall(frame(struct.pack(">ii", 1, 4) + pbuf(b"/big") + b"\0"))
        r = read_frame(g)
        ok = struct.unpack(">i", r[12:16])[0] == 0 and len(r) > 1_000_000
        served_ms = (time.perf_counter() - t) * 1000
        closed = sum(1 for l in open(f"{tmp}/server.log") if "closing" in l)
        fds = len(os.listdir(f"/proc/{server.pid}/fd"))
        print(f"binary {BIN} {EXTRA.strip()}")
        print(f"{SESSIONS} sessions x {REQUESTS} getData of 1 MB, never read, {SECONDS:.0f} s")
        print(f"server VmRSS: base {base // 1024} MiB, peak {peak // 1024} MiB, last {last // 1024} MiB")
        print(f"well-behaved getData: {'ok' if ok else 'FAILED'} in {served_ms:.0f} ms; "
              f"server log lines about closing slow readers: {closed}; server fds {fds}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
