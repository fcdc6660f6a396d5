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
import os, resource, socket, struct, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
BIN = sys.argv[2] if len(sys.argv) > 2 else "target/release/ringkeeper"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rkproc  # noqa: E402
from rkproc import read_exact  # noqa: E402

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = min(hard, 4 * N + 1024)
resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
if want < 2 * N + 100:
    sys.exit(f"descriptor limit {want} too low for {N} connections")


def main():
    with rkproc.server(BIN, "rk-idle-", "") as (server, port, tmp):
        time.sleep(0.5)
        fds0, rss0 = rkproc.proc_status(server.pid)
        conns = []
        started = time.time()
        for i in range(N):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(rkproc.connect_request(40000))
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
        fds1, rss1 = rkproc.proc_status(server.pid)
        print(f"binary: {BIN}")
        print(f"sessions: {N} (opened in {opened_s:.1f} s)")
        print(f"server fds: before {fds0}, after {fds1}, per connection {(fds1 - fds0) / N:.2f}")
        print(f"server VmRSS: before {rss0} KiB, after {rss1} KiB, "
              f"per connection {(rss1 - rss0) / N:.1f} KiB")
        for c in conns:
            c.close()


if __name__ == "__main__":
    main()
