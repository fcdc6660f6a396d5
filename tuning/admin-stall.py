#!/usr/bin/env python3
"""How long admin words stall request serving (issue 11, section 5).

Starts the server binary given on a free loopback port (one shard, so the
word and the reads share an executor), loads NODES znodes (pipelined
creates, 100 B values), sets data watches on WATCHED of them and makes some
ephemerals; then, for each of dump, wchp, wchc, cons, loops the word on one
connection for SECONDS while another session sends getData one at a time,
and prints the getData latency (median, p99, max) next to a baseline with
no word running, and how long each word took.

usage: tuning/admin-stall.py [BINARY] [NODES] [WATCHED] [SECONDS]
"""
import os, socket, statistics, struct, sys, threading, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/ringkeeper"
NODES = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
WATCHED = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
PER_PARENT = 1000
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rkproc  # noqa: E402
from rkproc import frame, pbuf  # noqa: E402


pstr = pbuf
OPEN_ACL = rkproc.OPEN_ACL


class Session:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.s.sendall(frame(struct.pack(">iqiqi16s?", 0, 0, 30000, 0, 16, b"\0" * 16, False)))
        self.read_frame()
        self.xid = 0

    def read_frame(self):
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">i", self.buf[:4])[0]:
            got = self.s.recv(1 << 20)
            if not got:
                raise EOFError("server closed")
            self.buf += got
        n = struct.unpack(">i", self.buf[:4])[0]
        body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
        return body

    def send(self, op, body):
        self.xid += 1
        self.s.sendall(frame(struct.pack(">ii", self.xid, op) + body))

    def reply(self):
        while True:
            b = self.read_frame()
            xid, _zxid, err = struct.unpack(">iqi", b[:16])
            if xid != -1:  # skip notifications
                return err

    def pipelined(self, reqs, window=500):
        sent = done = 0
        while done < len(reqs):
            while sent < len(reqs) and sent - done < window:
                self.send(*reqs[sent])
                sent += 1
            err = self.reply()
            assert err in (0, -110), f"error {err}"
            done += 1


def create_req(path, eph=False):
    return (1, pstr(path) + struct.pack(">i", 100) + b"x" * 100 + OPEN_ACL + struct.pack(">i", 1 if eph else 0))


def word(port, w):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(w.encode())
    out = b""
    while True:
        got = s.recv(1 << 20)
        if not got:
            break
        out += got
    s.close()
    return out


def main():
    with rkproc.server(BIN, "rk-stall-", "ringkeeper.shards=1") as (server, port, tmp):
        loader = Session(port)
        parents = max(1, NODES // PER_PARENT)
        t0 = time.time()
        loader.pipelined([create_req(f"/p{i}") for i in range(parents)])
        loader.pipelined([create_req(f"/p{i // PER_PARENT}/n{i % PER_PARENT}") for i in range(NODES)])
        print(f"loaded {NODES} znodes in {time.time() - t0:.1f} s")
        owners = [Session(port) for _ in range(10)]
        for k, o in enumerate(owners):
            o.pipelined([create_req(f"/e{k}-{j}", eph=True) for j in range(100)])
        watcher = Session(port)
        watcher.pipelined([(4, pstr(f"/p{i // PER_PARENT}/n{i % PER_PARENT}") + b"\1")
                           for i in range(min(WATCHED, NODES))])
        reader = Session(port)

        def read_loop(stop, lat):
            while not stop.is_set():
                t = time.perf_counter()
                reader.send(4, pstr("/p0/n1") + b"\0")
                reader.reply()
                lat.append((time.perf_counter() - t) * 1000)

        def run(w):
            stop, lat, took = threading.Event(), [], []
            th = threading.Thread(target=read_loop, args=(stop, lat))
            th.start()
            end = time.time() + SECONDS
            size = 0
            while time.time() < end:
                if w is None:
                    time.sleep(0.05)
                    continue
                t = time.perf_counter()
                size = len(word(port, w))
                took.append((time.perf_counter() - t) * 1000)
            stop.set()
            th.join()
            lat.sort()
            p99 = lat[int(len(lat) * 0.99)]
            word_ms = f"{statistics.median(took):8.1f}" if took else "       -"
            print(f"{w or 'none':5} getData n={len(lat):6} median {statistics.median(lat):6.2f} ms "
                  f"p99 {p99:7.2f} ms max {lat[-1]:8.2f} ms | word median {word_ms} ms, {size} bytes")

        print(f"binary {BIN}, {NODES} znodes, {WATCHED} data watches, 1000 ephemerals")
        for w in [None, "dump", "wchp", "wchc", "cons", "mntr"]:
            run(w)


if __name__ == "__main__":
    main()
