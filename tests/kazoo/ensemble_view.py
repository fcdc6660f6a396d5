"""The clients' view of a 3-server ensemble, with kazoo: every client is
pinned to one server, and the checks need two or three of them.

    /usr/bin/python3 tests/kazoo/ensemble_view.py HOST:PORT HOST:PORT HOST:PORT

Checks: watches fired across servers; sync then read; a session that moves
to another server keeps its ephemeral and its watch; an expired session's
ephemerals are deleted once, seen from another server; Lock, Election,
Queue and DoubleBarrier with contenders on different servers. Prints
"PASS <name>: <detail>" or "FAIL <name>: <reason>" per check, then
"DONE passed=<n> failed=<n>"; exits 0 only when all passed. Every wait is
bounded; the process ends with os._exit.
"""

import os
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType

WAIT = 20.0
SERVERS = []
_clients = []


class Fail(Exception):
    pass


def check(ok, msg):
    if not ok:
        raise Fail(msg)


def on(i, **kw):
    """A started client pinned to server i."""
    c = KazooClient(hosts=SERVERS[i], timeout=kw.pop("timeout", 10.0), **kw)
    _clients.append(c)
    c.start(timeout=WAIT)
    return c


def stop(*cs):
    for c in cs:
        try:
            c.stop()
            c.close()
        except Exception:
            pass


def wait_until(pred, what, timeout=WAIT):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.02)
    raise Fail("timed out waiting for " + what)


def watches_across_servers():
    a, b = on(0), on(1)
    a.ensure_path("/view/w")
    events = []
    a.get("/view/w", watch=lambda e: events.append(("data", e.type)))
    a.get_children("/view/w", watch=lambda e: events.append(("child", e.type)))
    b.set("/view/w", b"changed")
    b.create("/view/w/kid")
    wait_until(lambda: len(events) >= 2, "both watches")
    time.sleep(0.3)
    check(sorted(events) == [("child", EventType.CHILD), ("data", EventType.CHANGED)],
          "events %r" % events)
    stop(a, b)
    return "a data and a child watch on server 1 fired once each for writes on server 2"


def sync_then_read():
    # ringkeeper: every read after a sync sees the write acknowledged before
    # it. Apache ZooKeeper 3.8.0 does not always (seen in CI against it: a
    # read after sync returned the value before the acknowledged write), so
    # there the reads are only checked never to go back.
    strict = os.environ.get("RK_TEST_TARGET", "ringkeeper") != "zookeeper"
    a, c = on(0), on(2)
    a.ensure_path("/view/s")
    last = 0
    for k in range(20):
        value = b"v%d" % k
        a.set("/view/s", value)
        c.sync("/view/s")
        got, stat = c.get("/view/s")
        if strict:
            check(got == value, "after sync server 3 read %r, not %r" % (got, value))
        else:
            check(last <= stat.version <= k + 1,
                  "after sync server 3 read version %d after %d" % (stat.version, last))
        last = stat.version
    stop(a, c)
    return "20 writes on server 1, each read back on server 3 after a sync"


MOVER = """
import os, sys
from kazoo.client import KazooClient
c = KazooClient(hosts=sys.argv[1], timeout=10.0)
c.start(timeout=20)
c.create("/view/m/eph", b"x", ephemeral=True)
sid, pwd = c.client_id
print("%x %s" % (sid, pwd.hex()), flush=True)
os._exit(0)  # no closeSession: the session lives on, to be taken elsewhere
"""


def session_move():
    import subprocess
    watcher = on(2)
    watcher.ensure_path("/view/m")
    out = subprocess.run([sys.executable, "-c", MOVER, SERVERS[0]], capture_output=True,
                         timeout=WAIT, text=True)
    check(out.returncode == 0, "the first client failed: %s" % out.stderr[-500:])
    sid_hex, pwd_hex = out.stdout.split()
    sid, pwd = int(sid_hex, 16), bytes.fromhex(pwd_hex)
    # The same session, now on server 2.
    b = on(1, client_id=(sid, pwd))
    check(b.client_id[0] == sid, "a new session %x, not %x" % (b.client_id[0], sid))
    _, stat = b.get("/view/m/eph")
    check(stat.ephemeralOwner == sid, "owner %x" % stat.ephemeralOwner)
    b.create("/view/m/after-move", b"")
    gone = []
    watcher.exists("/view/m/eph", watch=lambda e: gone.append(e.type))
    # Closing the moved session deletes its ephemeral, seen from server 3.
    b.stop()
    wait_until(lambda: gone == [EventType.DELETED], "the ephemeral's deletion")
    stop(b, watcher)
    return "session %x moved from server 1 to 2 with its ephemeral, closed there" % sid


OWNER = """
import os, sys
from kazoo.client import KazooClient
c = KazooClient(hosts=sys.argv[1], timeout=2.0)
c.start(timeout=20)
for k in range(3):
    c.create("/view/e/n%d" % k, b"", ephemeral=True)
print("%x" % c.client_id[0], flush=True)
os._exit(0)  # no closeSession: the session has to expire
"""


def ephemerals_expire_once():
    import subprocess
    watcher = on(2)
    watcher.ensure_path("/view/e")
    deleted = []
    out = subprocess.run([sys.executable, "-c", OWNER, SERVERS[0]], capture_output=True,
                         timeout=WAIT, text=True)
    check(out.returncode == 0, "the owner failed: %s" % out.stderr[-500:])
    for k in range(3):
        stat = watcher.exists("/view/e/n%d" % k,
                              watch=lambda e: deleted.append((e.path, e.type)))
        check(stat is not None, "n%d missing on server 3" % k)
    wait_until(lambda: len(deleted) >= 3, "3 deletions", timeout=30.0)
    time.sleep(0.5)
    check(len(deleted) == 3 and all(t == EventType.DELETED for _, t in deleted),
          "events %r" % deleted)
    for i in range(3):
        c = on(i)
        c.sync("/view/e")
        left = c.get_children("/view/e")
        stop(c)
        check(left == [], "server %d still has %r" % (i + 1, left))
    stop(watcher)
    return "session %s's 3 ephemerals deleted once each when it expired, on every server" % (
        out.stdout.strip())


def lock_across_servers():
    cs = [on(i) for i in range(3)]
    inside = [0]
    most = [0]
    guard = threading.Lock()
    errors = []

    def contend(c, n):
        try:
            lock = c.Lock("/view/lock", "c%d" % n)
            for _ in range(5):
                with lock:
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.01)
                    with guard:
                        inside[0] -= 1
        except Exception as e:
            errors.append(repr(e))

    ts = [threading.Thread(target=contend, args=(c, n)) for n, c in enumerate(cs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(2 * WAIT)
    check(not errors, "errors %r" % errors)
    check(most[0] == 1, "%d holders at once" % most[0])
    stop(*cs)
    return "3 clients on 3 servers took the lock 15 times, one at a time"


def election_across_servers():
    cs = [on(i) for i in range(3)]
    leaders = []
    done = threading.Event()

    def lead(n):
        leaders.append(n)
        done.wait(WAIT)

    elections = [c.Election("/view/election", "c%d" % n) for n, c in enumerate(cs)]
    ts = [threading.Thread(target=e.run, args=(lead, n), daemon=True)
          for n, e in enumerate(elections)]
    for t in ts:
        t.start()
    wait_until(lambda: len(leaders) >= 1, "a leader")
    time.sleep(0.5)
    check(len(leaders) == 1, "leaders %r" % leaders)
    first = leaders[0]
    contenders = elections[(first + 1) % 3].contenders()
    check(len(contenders) == 3, "contenders %r" % contenders)
    # The leader's session ends: another takes over.
    stop(cs[first])
    wait_until(lambda: len(leaders) >= 2, "a second leader")
    done.set()
    stop(*[c for n, c in enumerate(cs) if n != first])
    return "client %d led, then client %d after it left" % (first, leaders[1])


def queue_across_servers():
    p, q = on(0), on(1)
    producer = p.Queue("/view/queue")
    consumer = q.Queue("/view/queue")
    for k in range(30):
        producer.put(b"item-%02d" % k)
    got = []
    end = time.time() + WAIT
    while len(got) < 30 and time.time() < end:
        item = consumer.get()
        if item is None:
            time.sleep(0.02)
            continue
        got.append(item)
    check(got == [b"item-%02d" % k for k in range(30)], "got %r" % got[:5])
    stop(p, q)
    return "30 items put on server 1 came out of server 2 in order"


def double_barrier_across_servers():
    cs = [on(i) for i in range(3)]
    entered = []
    left = []

    def member(c, n):
        b = c.DoubleBarrier("/view/barrier", 3)
        b.enter()
        entered.append((n, time.time()))
        time.sleep(0.05)
        b.leave()
        left.append((n, time.time()))

    ts = [threading.Thread(target=member, args=(c, n), daemon=True) for n, c in enumerate(cs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(WAIT)
    check(len(entered) == 3 and len(left) == 3, "entered %r left %r" % (entered, left))
    check(max(t for _, t in entered) <= min(t for _, t in left),
          "someone left before everyone entered")
    stop(*cs)
    return "3 members on 3 servers entered together and left together"


CHECKS = [
    ("watches_across_servers", watches_across_servers),
    ("sync_then_read", sync_then_read),
    ("session_move", session_move),
    ("ephemerals_expire_once", ephemerals_expire_once),
    ("lock", lock_across_servers),
    ("election", election_across_servers),
    ("queue", queue_across_servers),
    ("double_barrier", double_barrier_across_servers),
]


def main():
    global SERVERS
    SERVERS = sys.argv[1:4]
    if len(SERVERS) != 3:
        print("usage: ensemble_view.py HOST:PORT HOST:PORT HOST:PORT")
        os._exit(2)
    setup = on(0)
    setup.ensure_path("/view")
    stop(setup)
    passed = failed = 0
    for name, fn in CHECKS:
        start = time.time()
        try:
            detail = fn()
            print("PASS %s: %s [%d ms]" % (name, detail, (time.time() - start) * 1000))
            passed += 1
        except Fail as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1
        except Exception:
            print("FAIL %s: %s" % (name, traceback.format_exc().replace("\n", " | ")))
            failed += 1
        sys.stdout.flush()
    print("DONE passed=%d failed=%d" % (passed, failed))
    sys.stdout.flush()
    for c in _clients:
        try:
            c.stop()
        except Exception:
            pass
    os._exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
