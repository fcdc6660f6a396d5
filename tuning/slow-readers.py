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
import os, socket, struct, sys, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/ringkeeper"
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 40
REQUESTS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 20
EXTRA = sys.argv[5].replace("\\n", "\n") if len(sys.argv) > 5 else ""
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rkproc  # noqa: E402
from rkproc import frame, pbuf, read_frame  # noqa: E402


ACL = rkproc.OPEN_ACL


def rss_kib(pid):
    return rkproc.proc_status(pid)[1]


def session(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(rkproc.connect_request(30000))
    return s


def main():
    with rkproc.server(BIN, "rk-slow-", EXTRA) as (server, port, tmp):
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


if __name__ == "__main__":
    main()
