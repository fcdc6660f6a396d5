"""kazoo's recipes against one ZooKeeper-compatible server, with contention.

Lock (and Semaphore), Election, Barrier (and DoubleBarrier), Queue (and
LockingQueue), Counter, Party (and ShallowParty), server_version(), then a
reconnect through a proxy (setWatches), TreeCache and transactions. Run by
tests/kazoo.rs (KAZOO_RECIPES=Name,Name runs only those):

    /usr/bin/python3 tests/kazoo/recipes.py 127.0.0.1:PORT

Each recipe uses several KazooClients (each its own session and connection)
and threads. Prints one line per check, "PASS <name>: <detail>" or
"FAIL <name>: <reason>", then "DONE passed=<n> failed=<n>"; exits 0 only
when everything passed. Every recipe runs in its own daemon thread with a
deadline, every wait is bounded, and the process ends with os._exit so that
no client thread can keep it alive.
"""

import os
import queue
import socket
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, LockTimeout

WAIT = 30.0  # seconds, any single wait
RECIPE_DEADLINE = 90.0  # seconds, a whole recipe

HOSTS = None
_clients = []
_clients_lock = threading.Lock()


class Fail(Exception):
    pass


def check(ok, msg):
    if not ok:
        raise Fail(msg)


def client():
    c = KazooClient(hosts=HOSTS, timeout=20.0)
    with _clients_lock:
        _clients.append(c)
    c.start(timeout=WAIT)
    return c


def clients(n):
    return [client() for _ in range(n)]


def close(cs):
    for c in cs:
        try:
            c.stop()
            c.close()
        except Exception:
            pass


def run_threads(targets, timeout=2 * WAIT):
    """Runs the callables in threads; the first exception is re-raised."""
    errors = []

    def wrap(f):
        try:
            f()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(f,), daemon=True) for f in targets]
    for t in ts:
        t.start()
    deadline = time.monotonic() + timeout
    for t in ts:
        t.join(max(deadline - time.monotonic(), 0.01))
    check(not any(t.is_alive() for t in ts), "a worker did not finish within %ds" % timeout)
    if errors:
        raise errors[0]


def wait_until(pred, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not pred():
        check(time.monotonic() < deadline, "timed out waiting for " + what)
        time.sleep(0.02)


# ---- Lock -------------------------------------------------------------------


def try_acquire(lock, timeout):
    """Lock.acquire(timeout=...) raises LockTimeout when it gives up."""
    try:
        return lock.acquire(timeout=timeout)
    except LockTimeout:
        return False


def recipe_lock():
    """4 clients x 2 threads take one Lock 10 times each; inside it an overlap
    detector and an unversioned read-modify-write of a znode that only
    exclusion keeps exact. Then: a held lock blocks another client, contenders()
    lists the holder first, and no lock node is left behind."""
    path, counter = "/kazoo/lock", "/kazoo/lock-counter"
    n_clients, threads, rounds = 4, 2, 10
    cs = clients(n_clients)
    try:
        cs[0].create(counter, b"0", makepath=True)
        state = {"inside": 0, "overlaps": 0, "max_contenders": 0}
        mu = threading.Lock()

        def worker(c, ident):
            lock = c.Lock(path, ident)
            for _ in range(rounds):
                check(lock.acquire(timeout=WAIT), ident + ": acquire timed out")
                try:
                    with mu:
                        state["inside"] += 1
                        if state["inside"] != 1:
                            state["overlaps"] += 1
                    n = len(c.get_children(path))
                    with mu:
                        state["max_contenders"] = max(state["max_contenders"], n)
                    v = int(c.get(counter)[0])
                    time.sleep(0.002)
                    c.set(counter, str(v + 1).encode())
                    with mu:
                        state["inside"] -= 1
                finally:
                    lock.release()

        run_threads(
            [
                (lambda c=c, i=i, t=t: worker(c, "c%d-t%d" % (i, t)))
                for i, c in enumerate(cs)
                for t in range(threads)
            ]
        )
        total = n_clients * threads * rounds
        got = int(cs[1].get(counter)[0])
        check(state["overlaps"] == 0, "%d overlapping critical sections" % state["overlaps"])
        check(got == total, "counter is %d, expected %d (lost updates)" % (got, total))
        check(state["max_contenders"] > 1, "never saw contention")
        check(cs[2].get_children(path) == [], "lock nodes left: %s" % cs[2].get_children(path))

        a, b = cs[0].Lock(path, "holder"), cs[3].Lock(path, "waiter")
        check(a.acquire(timeout=WAIT), "holder could not acquire")
        check(not try_acquire(b, 0.3), "waiter got a held lock")
        got_it = threading.Event()

        def waiter():
            if try_acquire(b, WAIT):
                got_it.set()

        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        wait_until(lambda: len(a.contenders()) == 2, "2 contenders")
        check(a.contenders() == ["holder", "waiter"], "contenders() %s" % a.contenders())
        check(not got_it.wait(0.2), "waiter acquired while held")
        a.release()
        check(got_it.wait(WAIT), "waiter did not get the released lock")
        t.join(WAIT)
        b.release()
        check(cs[2].get_children(path) == [], "lock nodes left: %s" % cs[2].get_children(path))
        return "%d exclusive increments by %d clients x %d threads, max %d contenders" % (
            total,
            n_clients,
            threads,
            state["max_contenders"],
        )
    finally:
        close(cs)


# ---- Semaphore --------------------------------------------------------------


def recipe_semaphore():
    """A Semaphore with 2 leases, 4 clients x 5 rounds: never more than 2
    holders at once, and 2 at once is reached."""
    path = "/kazoo/semaphore"
    cs = clients(4)
    try:
        state = {"holders": 0, "max": 0}
        mu = threading.Lock()

        def worker(c, ident):
            sem = c.Semaphore(path, ident, max_leases=2)
            for _ in range(5):
                check(sem.acquire(timeout=WAIT), ident + ": acquire timed out")
                try:
                    with mu:
                        state["holders"] += 1
                        state["max"] = max(state["max"], state["holders"])
                    time.sleep(0.02)
                    with mu:
                        state["holders"] -= 1
                finally:
                    sem.release()

        run_threads([(lambda c=c, i=i: worker(c, "s%d" % i)) for i, c in enumerate(cs)])
        check(state["max"] <= 2, "%d holders at once with 2 leases" % state["max"])
        check(state["max"] == 2, "never 2 holders at once (max %d)" % state["max"])
        return "4 clients, at most %d holders of 2 leases" % state["max"]
    finally:
        close(cs)


# ---- Election ---------------------------------------------------------------


def recipe_election():
    """4 contenders on 4 clients. Exactly one leads at a time and all see the
    same ordered contenders. The 1st leader's function returns -> a 2nd leads;
    the 2nd leader's whole session closes -> a 3rd leads; the 4th cancels
    while waiting and never leads; the 3rd returns; no node is left."""
    path = "/kazoo/election"
    cs = clients(4)
    observer = client()
    try:
        elected = queue.Queue()
        release = [threading.Event() for _ in cs]
        state = {"leader": None, "overlaps": 0, "deposed": set()}
        mu = threading.Lock()
        elections = [c.Election(path, "e%d" % i) for i, c in enumerate(cs)]
        done = [threading.Event() for _ in cs]

        def lead(i):
            with mu:
                if state["leader"] is not None:
                    state["overlaps"] += 1
                state["leader"] = i
            elected.put(i)
            release[i].wait(WAIT * 2)
            with mu:
                if state["leader"] == i:
                    state["leader"] = None

        def contender(i):
            try:
                elections[i].run(lead, i)
            except KazooException:
                # the leader whose session was closed cannot release
                check(i in state["deposed"], "e%d: %s" % (i, traceback.format_exc()))
            finally:
                done[i].set()

        threads = [threading.Thread(target=contender, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()

        def next_leader(prev):
            try:
                i = elected.get(timeout=WAIT)
            except queue.Empty:
                raise Fail("no new leader within %ds after %s" % (WAIT, prev))
            check(i not in prev, "e%d led twice" % i)
            return i

        first = next_leader([])
        wait_until(lambda: len(observer.Election(path).contenders()) == 4, "4 contenders")
        contenders = observer.Election(path).contenders()
        check(contenders[0] == "e%d" % first, "contenders %s, leader e%d" % (contenders, first))
        check(sorted(contenders) == ["e0", "e1", "e2", "e3"], "contenders %s" % contenders)

        release[first].set()
        check(done[first].wait(WAIT), "first leader's run() did not return")
        second = next_leader([first])

        with mu:
            state["deposed"].add(second)
            state["leader"] = None
        cs[second].stop()
        third = next_leader([first, second])
        release[second].set()
        check(done[second].wait(WAIT), "deposed leader's run() did not return")

        (fourth,) = [i for i in range(4) if i not in (first, second, third)]
        elections[fourth].cancel()
        check(done[fourth].wait(WAIT), "cancelled contender's run() did not return")
        check(elected.empty(), "the cancelled contender led")
        release[third].set()
        check(done[third].wait(WAIT), "third leader's run() did not return")
        for t in threads:
            t.join(WAIT)
        check(state["overlaps"] == 0, "%d times two leaders at once" % state["overlaps"])
        wait_until(lambda: observer.get_children(path) == [], "no election nodes left")
        return "4 contenders, e%d -(returned)-> e%d -(session closed)-> e%d, e%d cancelled" % (
            first,
            second,
            third,
            fourth,
        )
    finally:
        close(cs + [observer])


# ---- Barrier ----------------------------------------------------------------


def recipe_barrier():
    """Barrier: 3 clients wait on a barrier a 4th holds; they stay blocked
    until it is removed, then all pass. DoubleBarrier: 4 clients, none passes
    enter() before all 4 entered; all leave."""
    path = "/kazoo/barrier"
    cs = clients(4)
    try:
        holder = cs[0].Barrier(path)
        holder.create()
        check(not cs[1].Barrier(path).wait(timeout=0.2), "wait() passed a standing barrier")
        passed = []
        mu = threading.Lock()

        def waiter(c, i):
            if c.Barrier(path).wait(timeout=WAIT):
                with mu:
                    passed.append(i)

        ts = [threading.Thread(target=waiter, args=(c, i), daemon=True) for i, c in enumerate(cs[1:])]
        for t in ts:
            t.start()
        time.sleep(0.3)
        check(passed == [], "waiters passed before removal: %s" % passed)
        check(holder.remove(), "remove() found no barrier")
        for t in ts:
            t.join(WAIT)
        check(sorted(passed) == [0, 1, 2], "passed after removal: %s" % passed)
        check(cs[1].Barrier(path).wait(timeout=0.2), "wait() on a removed barrier blocked")

        dpath = "/kazoo/double-barrier"
        entered = []
        gate = threading.Barrier(4, timeout=WAIT)

        def member(c, i):
            db = c.DoubleBarrier(dpath, 4, "m%d" % i)
            if i == 3:
                time.sleep(0.3)  # the others must wait for this one
                with mu:
                    check(entered == [], "entered before the last member: %s" % entered)
            db.enter()
            check(db.participating, "m%d failed to enter" % i)
            with mu:
                entered.append(i)
            # nobody leaves before the rendezvous below, so whoever got
            # through enter() must see all 4 members' nodes
            members = [n for n in c.get_children(dpath) if n != "ready"]
            check(len(members) == 4, "m%d passed enter() with %d members" % (i, len(members)))
            # kazoo's DoubleBarrier can hang when a member leaves before
            # another has returned from enter(): rendezvous first.
            gate.wait()
            db.leave()
            check(not db.participating, "m%d still participating" % i)

        run_threads([(lambda c=c, i=i: member(c, i)) for i, c in enumerate(cs)])
        check(sorted(entered) == [0, 1, 2, 3], "entered %s" % entered)
        left = [c for c in cs[0].get_children(dpath)]
        check(left == [], "double barrier nodes left: %s" % left)
        return "3 waiters released by remove(); double barrier of 4 entered and left"
    finally:
        close(cs)


# ---- Queue ------------------------------------------------------------------


def recipe_queue():
    """Queue: 3 producers x 20 items, 3 consumers on other clients; every item
    consumed exactly once; priorities order a single consumer's gets.
    LockingQueue: an item released by one consumer goes to another, consume()
    removes it for good."""
    path = "/kazoo/queue"
    cs = clients(6)
    try:
        producers, consumers = cs[:3], cs[3:]
        n_items = 20
        got = []
        mu = threading.Lock()
        produced = threading.Event()
        total = 3 * n_items

        def produce(c, p):
            q = c.Queue(path)
            for k in range(n_items):
                q.put(("p%d-%02d" % (p, k)).encode())

        def consume(c):
            q = c.Queue(path)
            deadline = time.monotonic() + 2 * WAIT
            while time.monotonic() < deadline:
                item = q.get()
                if item is None:
                    with mu:
                        if produced.is_set() and len(got) >= total:
                            return
                    time.sleep(0.005)
                    continue
                with mu:
                    got.append(item.decode())

        def producers_then_flag():
            run_threads([(lambda c=c, p=p: produce(c, p)) for p, c in enumerate(producers)])
            produced.set()

        run_threads([producers_then_flag] + [(lambda c=c: consume(c)) for c in consumers])
        dups = len(got) - len(set(got))
        expected = {"p%d-%02d" % (p, k) for p in range(3) for k in range(n_items)}
        check(dups == 0, "%d items consumed twice" % dups)
        check(set(got) == expected, "missing %s" % sorted(expected - set(got))[:5])
        check(len(cs[0].Queue(path)) == 0, "queue not empty")
        q = cs[0].Queue(path)
        for prio, v in [(50, b"mid"), (10, b"high"), (90, b"low"), (10, b"high2")]:
            q.put(v, priority=prio)
        order = [cs[4].Queue(path).get() for _ in range(4)]
        check(order == [b"high", b"high2", b"mid", b"low"], "priority order %s" % order)

        lpath = "/kazoo/locking-queue"
        lq0, lq1, lq2 = (c.LockingQueue(lpath) for c in consumers)
        producers[0].LockingQueue(lpath).put_all([b"a", b"b"], priority=5)
        check(len(lq0) == 2, "locking queue length %d" % len(lq0))
        first = lq0.get(timeout=WAIT)
        check(first == b"a", "first item %s" % first)
        second = lq1.get(timeout=WAIT)
        check(second == b"b", "second consumer got %s while a is locked" % second)
        check(lq2.get(timeout=0.3) is None, "a third consumer got a locked item")
        check(lq0.release(), "release failed")
        again = lq2.get(timeout=WAIT)
        check(again == b"a", "released item went to %s" % again)
        check(lq2.consume() and lq1.consume(), "consume failed")
        check(len(lq0) == 0, "locking queue not empty after consume: %d" % len(lq0))
        check(lq0.get(timeout=0.2) is None, "got an item from an empty locking queue")
        return "%d items from 3 producers consumed once each by 3 consumers; priorities; LockingQueue hand-over" % total
    finally:
        close(cs)


# ---- Counter ----------------------------------------------------------------


def recipe_counter():
    """4 clients x 2 threads add 1 to one Counter 25 times each while a 9th
    thread adds 3 five times; the result is the total, every +1 saw a
    distinct post value, subtracting works. A float counter and a
    curator-format (4-byte big-endian) one."""
    path = "/kazoo/counter"
    n_clients, threads, rounds = 4, 2, 25
    cs = clients(n_clients)
    try:
        posts = []
        mu = threading.Lock()

        def adder(c):
            counter = c.Counter(path)
            for _ in range(rounds):
                counter += 1
                check(counter.post_value == counter.pre_value + 1, "post != pre + 1")
                with mu:
                    posts.append(counter.post_value)

        def jumper(c):
            # larger steps, interleaved with the +1s; the value only grows,
            # so the +1s' post values stay distinct
            counter = c.Counter(path)
            for _ in range(5):
                counter += 3

        run_threads(
            [(lambda c=c: adder(c)) for c in cs for _ in range(threads)] + [lambda: jumper(cs[0])]
        )
        total = n_clients * threads * rounds
        value = cs[1].Counter(path).value
        check(value == total + 15, "counter is %d, expected %d" % (value, total + 15))
        check(len(set(posts)) == len(posts) == total, "%d distinct post values of %d" % (len(set(posts)), len(posts)))
        down = cs[3].Counter(path)
        down -= 15
        check((down.pre_value, down.post_value) == (total + 15, total), "subtract %s -> %s" % (down.pre_value, down.post_value))
        _, stat = cs[2].get(path)
        # ensure_path creates it empty (version 0), then one set per change
        check(stat.version == total + 6, "znode version %d, expected %d" % (stat.version, total + 6))

        f = cs[0].Counter("/kazoo/fcounter", default=1.5)
        f += 2.25
        check(cs[1].Counter("/kazoo/fcounter", default=0.0).value == 3.75, "float counter")
        cur = cs[0].Counter("/kazoo/ccounter", support_curator=True)
        cur += 7
        cur -= 2
        data, _ = cs[1].get("/kazoo/ccounter")
        check(data == b"\x00\x00\x00\x05", "curator-format counter data %r" % data)
        return "%d increments by %d clients x %d threads summed correctly; float and curator formats" % (
            total,
            n_clients,
            threads,
        )
    finally:
        close(cs)


# ---- Party ------------------------------------------------------------------


def recipe_party():
    """4 clients join a Party and a ShallowParty concurrently; each sees 4
    members with their identifiers; one leaves; one client's session closes
    and its member disappears (ephemeral)."""
    cs = clients(4)
    try:
        results = {}
        for kind, path in (("Party", "/kazoo/party"), ("ShallowParty", "/kazoo/shallow-party")):
            parties = [getattr(c, kind)(path, "member%d" % i) for i, c in enumerate(cs)]
            gate = threading.Barrier(4, timeout=WAIT)

            def join(p):
                gate.wait()
                p.join()

            run_threads([(lambda p=p: join(p)) for p in parties])
            everyone = ["member%d" % i for i in range(4)]
            for p in parties:
                check(len(p) == 4, "%s: len %d" % (kind, len(p)))
                check(sorted(p) == everyone, "%s: members %s" % (kind, sorted(p)))
            check(parties[1].leave(), "%s: leave failed" % kind)
            check(sorted(parties[0]) == ["member0", "member2", "member3"], "%s after leave: %s" % (kind, sorted(parties[0])))
            results[kind] = True
        # Closing client 3's session removes its members of both parties.
        cs[3].stop()
        for kind, path in (("Party", "/kazoo/party"), ("ShallowParty", "/kazoo/shallow-party")):
            p = getattr(cs[0], kind)(path)
            wait_until(lambda p=p: len(p) == 2, "%s: 2 members after a session closed" % kind)
            check(sorted(p) == ["member0", "member2"], "%s after session close: %s" % (kind, sorted(p)))
        return "Party and ShallowParty: 4 joined, 1 left, 1 session closed"
    finally:
        close(cs)


# ---- Beyond the recipes of issue #5 -----------------------------------------


class Proxy:
    """A TCP relay on 127.0.0.1 to the server that can cut every connection
    and, while paused, closes new ones at once (so a client stays
    disconnected but its session lives on)."""

    def __init__(self, upstream):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.addr = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.paused = False
        self.conns = []
        self.mu = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            with self.mu:
                if self.paused:
                    down.close()
                    continue
            try:
                up = socket.create_connection(self.upstream, timeout=5)
                up.settimeout(None)
            except OSError:
                down.close()
                continue
            with self.mu:
                self.conns += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.mu:
            self.paused = True
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def resume(self):
        with self.mu:
            self.paused = False

    def close(self):
        self.closed = True
        self.cut()
        self.listener.close()


def recipe_reconnect():
    """A client behind a proxy loses its connection (SUSPENDED) and gets it
    back on the same session (CONNECTED, never LOST); its ephemeral node
    survived. kazoo does not send setWatches: at the loss it fires its
    one-shot watches with a NONE event and drops them, and DataWatch and
    ChildrenWatch re-read on reconnect, so they see what another client
    changed meanwhile, and keep working afterwards."""
    proxy = Proxy(HOSTS)
    w = client()
    c = KazooClient(
        hosts=proxy.addr,
        timeout=20.0,
        connection_retry=dict(max_tries=-1, delay=0.05, backoff=1, max_jitter=0.1, max_delay=0.2),
    )
    with _clients_lock:
        _clients.append(c)
    try:
        states = []
        state_change = threading.Condition()

        def listener(state):
            with state_change:
                states.append(state)
                state_change.notify_all()

        c.add_listener(listener)
        c.start(timeout=WAIT)
        sid = c.client_id[0]
        w.create("/kazoo/rc/a", b"", makepath=True)
        w.set("/kazoo/rc", b"d0")
        c.create("/kazoo/rc-eph", b"e", ephemeral=True)
        datas, kids, events = [], [], queue.Queue()
        mu = threading.Lock()

        @c.DataWatch("/kazoo/rc")
        def on_data(data, stat):
            with mu:
                datas.append(data)

        @c.ChildrenWatch("/kazoo/rc")
        def on_children(children):
            with mu:
                kids.append(sorted(children))

        check(c.exists("/kazoo/rc/new", watch=lambda e: events.put(("new", e.type))) is None, "/kazoo/rc/new exists")
        wait_until(lambda: datas == [b"d0"] and kids == [["a"]], "initial DataWatch/ChildrenWatch calls")

        proxy.cut()
        with state_change:
            check(state_change.wait_for(lambda: "SUSPENDED" in states, WAIT), "no SUSPENDED after the cut: %s" % states)
        w.set("/kazoo/rc", b"d1")
        w.create("/kazoo/rc/b", b"")
        time.sleep(0.2)
        check(datas == [b"d0"], "DataWatch called while disconnected: %s" % datas)
        proxy.resume()
        with state_change:
            check(
                state_change.wait_for(lambda: states[-1] == "CONNECTED", WAIT),
                "did not reconnect: %s" % states,
            )
        check("LOST" not in states, "session lost: %s" % states)
        # (kazoo's one callback thread may be held by DataWatch re-reading
        # until the reconnect, so the NONE event can come only now)
        try:
            ev = events.get(timeout=WAIT)
        except queue.Empty:
            raise Fail("no NONE event for the exists watch after the connection loss")
        check(ev == ("new", "NONE"), "event %s after the connection loss" % (ev,))
        check(c.client_id[0] == sid, "a new session after reconnect")
        wait_until(lambda: datas[-1:] == [b"d1"], "DataWatch to see d1 (has %s)" % datas)
        wait_until(lambda: kids[-1:] == [["a", "b"]], "ChildrenWatch to see b (has %s)" % kids)
        _, st = w.get("/kazoo/rc-eph")
        check(st.ephemeralOwner == sid, "ephemeral owner %x, session %x" % (st.ephemeralOwner, sid))
        # the re-registered watches go on working
        w.set("/kazoo/rc", b"d2")
        w.create("/kazoo/rc/c", b"")
        wait_until(lambda: datas[-1:] == [b"d2"], "DataWatch to see d2 (has %s)" % datas)
        wait_until(lambda: kids[-1:] == [["a", "b", "c"]], "ChildrenWatch to see c (has %s)" % kids)
        check(events.empty(), "unexpected events %s" % list(events.queue))
        return "same session after reconnect, ephemeral kept; DataWatch/ChildrenWatch caught up"
    finally:
        close([c, w])
        proxy.close()


def recipe_tree_cache():
    """TreeCache on one client follows another client's creates, updates and
    deletes below its root, nested too."""
    from kazoo.recipe.cache import TreeCache, TreeEvent

    root = "/kazoo/tree"
    cs = clients(2)
    cache = None
    try:
        watcher, writer = cs
        writer.create(root + "/pre", b"p", makepath=True)
        events = queue.Queue()
        cache = TreeCache(watcher, root)
        cache.listen(lambda ev: events.put(ev))
        cache.start()

        def expect(kind, path, data=None):
            deadline = time.monotonic() + WAIT
            while True:
                left = deadline - time.monotonic()
                check(left > 0, "no %s %s event" % (kind, path))
                try:
                    ev = events.get(timeout=left)
                except queue.Empty:
                    continue
                if ev.event_type == kind and (ev.event_data is None or ev.event_data.path == path):
                    if data is not None:
                        check(ev.event_data.data == data, "%s data %r" % (path, ev.event_data.data))
                    return
                if ev.event_type in (TreeEvent.CONNECTION_SUSPENDED, TreeEvent.CONNECTION_LOST):
                    raise Fail("connection event %s" % (ev,))
                raise Fail("event %s %s, expected %s %s" % (ev.event_type, ev.event_data and ev.event_data.path, kind, path))

        seen = set()
        for _ in range(2):
            deadline = time.monotonic() + WAIT
            ev = events.get(timeout=max(deadline - time.monotonic(), 0.01))
            check(ev.event_type == TreeEvent.NODE_ADDED, "initial event %s" % (ev,))
            seen.add(ev.event_data.path)
        check(seen == {root, root + "/pre"}, "initial %s" % seen)
        expect(TreeEvent.INITIALIZED, None)
        writer.create(root + "/a", b"1")
        expect(TreeEvent.NODE_ADDED, root + "/a", b"1")
        writer.set(root + "/a", b"2")
        expect(TreeEvent.NODE_UPDATED, root + "/a", b"2")
        writer.create(root + "/a/b", b"nested")
        expect(TreeEvent.NODE_ADDED, root + "/a/b", b"nested")
        check(cache.get_data(root + "/a/b").data == b"nested", "get_data(/a/b)")
        check(sorted(cache.get_children(root)) == ["a", "pre"], "get_children %s" % cache.get_children(root))
        writer.delete(root + "/a", recursive=True)
        expect(TreeEvent.NODE_REMOVED, root + "/a/b")
        expect(TreeEvent.NODE_REMOVED, root + "/a")
        check(cache.get_data(root + "/a") is None, "deleted node still cached")
        return "initial 2 nodes, then add/update/nested add/remove events"
    finally:
        if cache is not None:
            cache.close()
        close(cs)


def recipe_transaction():
    """client.transaction(): check/create/set/delete commit whole; a failing
    check rolls back the others (RolledBackError, BadVersionError,
    RuntimeInconsistency) and changes nothing."""
    from kazoo.exceptions import BadVersionError, RolledBackError, RuntimeInconsistency

    cs = clients(2)
    try:
        c, other = cs
        c.create("/kazoo/tx/a", b"a0", makepath=True)
        c.create("/kazoo/tx/gone", b"g")
        tx = c.transaction()
        tx.check("/kazoo/tx/a", 0)
        tx.create("/kazoo/tx/b", b"b0")
        tx.set_data("/kazoo/tx/a", b"a1")
        tx.delete("/kazoo/tx/gone")
        res = tx.commit()
        check(res[0] is True and res[1] == "/kazoo/tx/b" and res[3] is True, "results %s" % res)
        check(res[2].version == 1, "set_data result %s" % (res[2],))
        check(other.get("/kazoo/tx/a")[0] == b"a1", "a after commit")
        check(other.exists("/kazoo/tx/gone") is None, "gone after commit")
        tx = c.transaction()
        tx.create("/kazoo/tx/c", b"c")
        tx.check("/kazoo/tx/a", 7)
        tx.set_data("/kazoo/tx/b", b"b1")
        res = tx.commit()
        kinds = [type(r) for r in res]
        check(kinds == [RolledBackError, BadVersionError, RuntimeInconsistency], "failed multi results %s" % res)
        check(other.exists("/kazoo/tx/c") is None, "partial commit: c exists")
        check(other.get("/kazoo/tx/b")[0] == b"b0", "partial commit: b changed")
        return "4-op transaction committed; failing one rolled back with per-op errors"
    finally:
        close(cs)


# ---- server_version ---------------------------------------------------------


def recipe_server_version():
    """client.server_version() (parses the `envi` four-letter word) gives at
    least major.minor, and the server answers ruok with imok."""
    c = client()
    try:
        v = c.server_version()
        check(isinstance(v, tuple) and len(v) >= 2, "server_version() %r" % (v,))
        check(v >= (3, 5), "server_version() %r older than 3.5" % (v,))
        ruok = c.command(b"ruok")
        check(ruok == "imok", "ruok answered %r" % ruok)
        return "server_version() = %s" % ".".join(map(str, v))
    finally:
        close([c])


RECIPES = [
    ("Lock", recipe_lock),
    ("Semaphore", recipe_semaphore),
    ("Election", recipe_election),
    ("Barrier", recipe_barrier),
    ("Queue", recipe_queue),
    ("Counter", recipe_counter),
    ("Party", recipe_party),
    ("server_version", recipe_server_version),
    ("Reconnect", recipe_reconnect),
    ("TreeCache", recipe_tree_cache),
    ("Transaction", recipe_transaction),
]


def run_one(name, fn):
    result = {}

    def body():
        try:
            result["ok"] = fn()
        except Fail as e:
            result["fail"] = str(e)
        except BaseException:  # noqa: B902 - reported as FAIL
            result["fail"] = traceback.format_exc().strip().replace("\n", " | ")

    t = threading.Thread(target=body, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(RECIPE_DEADLINE)
    ms = int((time.monotonic() - t0) * 1000)
    if t.is_alive():
        return False, "FAIL %s: did not finish within %ds [%d ms]" % (name, RECIPE_DEADLINE, ms)
    if "fail" in result:
        return False, "FAIL %s: %s [%d ms]" % (name, result["fail"], ms)
    return True, "PASS %s: %s [%d ms]" % (name, result["ok"], ms)


def main():
    global HOSTS
    if len(sys.argv) != 2:
        print("usage: recipes.py host:port", file=sys.stderr)
        os._exit(2)
    HOSTS = sys.argv[1]
    only = os.environ.get("KAZOO_RECIPES")
    passed = failed = 0
    for name, fn in RECIPES:
        if only and name not in only.split(","):
            continue
        ok, line = run_one(name, fn)
        print(line, flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
    print("DONE passed=%d failed=%d" % (passed, failed), flush=True)
    with _clients_lock:
        close(list(_clients))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
