// Apache Curator recipes against one ZooKeeper-compatible server, with real
// contention: several CuratorFramework clients (each its own session and
// connection) and threads. InterProcessMutex, LeaderLatch, CuratorCache and
// DistributedAtomicLong (issue #5), then InterProcessReadWriteLock,
// InterProcessSemaphoreV2, LeaderSelector, SharedCount,
// DistributedDoubleBarrier and transactions. Compiled and run by
// tests/curator.rs (CURATOR_RECIPES=Name,Name runs only those):
//
//   java -cp <classes>:<curator jars>:zookeeper.jar Recipes 127.0.0.1:PORT
//
// With several servers (the members of one ensemble), each new client is
// pinned to the next of them in turn, so contenders sit on different servers:
//
//   java -cp ... Recipes 127.0.0.1:PORT1 127.0.0.2:PORT2 127.0.0.3:PORT3
//
// Prints one line per recipe, "PASS <recipe>: <detail>" or
// "FAIL <recipe>: <reason>", then "DONE passed=<n> failed=<n>".
// Exits 0 only when every recipe passed. Every wait is bounded; the program
// ends with System.exit so that no client thread can keep it alive.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.data.Stat;

public class Recipes {
    /** The servers; each new client is pinned to the next one in turn. */
    static String[] servers;
    static final AtomicInteger turn = new AtomicInteger();

    static String nextServer() {
        return servers[Math.floorMod(turn.getAndIncrement(), servers.length)];
    }
    static final long WAIT_S = 30;
    static final long RECIPE_DEADLINE_S = 90;
    static final List<CuratorFramework> clients = new ArrayList<>();

    static final class Fail extends Exception {
        private static final long serialVersionUID = 1L;

        Fail(String msg) {
            super(msg);
        }
    }

    static void check(boolean ok, String msg) throws Fail {
        if (!ok) {
            throw new Fail(msg);
        }
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? "<null>" : new String(b, StandardCharsets.UTF_8);
    }

    /** A new started client (own session), connected or a Fail. */
    static CuratorFramework client() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(nextServer())
                .sessionTimeoutMs(20000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        synchronized (clients) {
            clients.add(c);
        }
        c.start();
        check(c.blockUntilConnected((int) WAIT_S, TimeUnit.SECONDS), "client did not connect");
        return c;
    }

    static List<CuratorFramework> clients(int n) throws Exception {
        List<CuratorFramework> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(client());
        }
        return out;
    }

    static void closeAll(List<CuratorFramework> cs) {
        for (CuratorFramework c : cs) {
            try {
                c.close();
            } catch (Exception e) {
                // closing is best effort
            }
        }
    }

    /** Waits for every future; the first failure is rethrown. */
    static void joinAll(List<Future<?>> fs) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S * 2);
        for (Future<?> f : fs) {
            long left = deadline - System.nanoTime();
            try {
                f.get(Math.max(left, 1), TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                Throwable t = e.getCause();
                if (t instanceof Exception) {
                    throw (Exception) t;
                }
                throw new RuntimeException(t);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new Fail("a worker did not finish within " + (WAIT_S * 2) + "s");
            }
        }
    }

    // ---- InterProcessMutex --------------------------------------------------

    /**
     * 4 clients x 2 threads each take the same mutex 10 times. Inside the
     * lock: an in-process overlap detector, and a read-modify-write of a
     * znode without a version (only exclusion keeps it exact). Also checks
     * reentrancy and that no lock node is left behind.
     */
    static String mutex() throws Exception {
        final String lockPath = "/curator/mutex/lock";
        final String counterPath = "/curator/mutex/counter";
        final int nClients = 4, perClientThreads = 2, rounds = 10;
        List<CuratorFramework> cs = clients(nClients);
        ExecutorService pool = Executors.newFixedThreadPool(nClients * perClientThreads);
        try {
            cs.get(0).create().creatingParentsIfNeeded().forPath(counterPath, b("0"));
            final AtomicInteger inside = new AtomicInteger();
            final AtomicInteger overlaps = new AtomicInteger();
            final AtomicInteger maxQueue = new AtomicInteger();
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < nClients; i++) {
                final CuratorFramework c = cs.get(i);
                for (int t = 0; t < perClientThreads; t++) {
                    fs.add(pool.submit(() -> {
                        InterProcessMutex m = new InterProcessMutex(c, lockPath);
                        for (int r = 0; r < rounds; r++) {
                            check(m.acquire(WAIT_S, TimeUnit.SECONDS), "acquire timed out");
                            try {
                                if (inside.incrementAndGet() != 1) {
                                    overlaps.incrementAndGet();
                                }
                                // Reentrant: a second acquire by the owner succeeds at once.
                                check(m.acquire(1, TimeUnit.SECONDS), "reentrant acquire failed");
                                m.release();
                                check(m.isAcquiredInThisProcess(), "not acquired after reentrant release");
                                int waiting = c.getChildren().forPath(lockPath).size();
                                maxQueue.accumulateAndGet(waiting, Math::max);
                                int v = Integer.parseInt(s(c.getData().forPath(counterPath)));
                                Thread.sleep(2);
                                c.setData().forPath(counterPath, b(Integer.toString(v + 1)));
                                inside.decrementAndGet();
                            } finally {
                                m.release();
                            }
                        }
                        return null;
                    }));
                }
            }
            joinAll(fs);
            int total = nClients * perClientThreads * rounds;
            syncPath(cs.get(1), counterPath); // the last increment may be another server's
            int got = Integer.parseInt(s(cs.get(1).getData().forPath(counterPath)));
            check(overlaps.get() == 0, overlaps.get() + " overlapping critical sections");
            check(got == total, "counter is " + got + ", expected " + total + " (lost updates)");
            check(maxQueue.get() > 1, "never saw contention (max lock queue " + maxQueue.get() + ")");
            check(waitNoChildren(cs.get(2), lockPath), "lock nodes left behind: "
                    + cs.get(2).getChildren().forPath(lockPath));
            // A held lock blocks another client until released.
            InterProcessMutex a = new InterProcessMutex(cs.get(0), lockPath);
            InterProcessMutex bm = new InterProcessMutex(cs.get(3), lockPath);
            check(a.acquire(WAIT_S, TimeUnit.SECONDS), "acquire by client 0");
            check(!bm.acquire(300, TimeUnit.MILLISECONDS), "client 3 got a held lock");
            a.release();
            check(bm.acquire(WAIT_S, TimeUnit.SECONDS), "client 3 did not get the released lock");
            bm.release();
            return total + " exclusive increments by " + nClients + " clients x "
                    + perClientThreads + " threads, max queue " + maxQueue.get();
        } finally {
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    // ---- LeaderLatch --------------------------------------------------------

    static boolean waitNoChildren(CuratorFramework c, String path) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (!c.getChildren().forPath(path).isEmpty()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    static List<LeaderLatch> leaders(List<LeaderLatch> ls) {
        List<LeaderLatch> out = new ArrayList<>();
        for (LeaderLatch l : ls) {
            if (l.hasLeadership()) {
                out.add(l);
            }
        }
        return out;
    }

    /** Waits until exactly one open latch leads and all agree on its id. */
    static LeaderLatch oneLeader(List<LeaderLatch> open) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        String last = "";
        while (System.nanoTime() < deadline) {
            List<LeaderLatch> ls = leaders(open);
            if (ls.size() == 1) {
                LeaderLatch leader = ls.get(0);
                boolean agree = true;
                for (LeaderLatch l : open) {
                    Participant p = l.getLeader();
                    if (!p.isLeader() || !p.getId().equals(leader.getId())) {
                        agree = false;
                        last = l.getId() + " sees leader " + p.getId();
                    }
                    if (l.getParticipants().size() != open.size()) {
                        agree = false;
                        last = l.getId() + " sees " + l.getParticipants().size() + " participants";
                    }
                }
                if (agree) {
                    return leader;
                }
            } else {
                last = ls.size() + " leaders";
            }
            Thread.sleep(20);
        }
        throw new Fail("no single agreed leader among " + open.size() + " within " + WAIT_S + "s (" + last + ")");
    }

    /**
     * 3 participants (3 clients); exactly one leads and all agree on it;
     * when the leader closes its latch, leadership passes to one of the
     * others; when that leader's client closes (session ends, ephemeral
     * node removed by the server), it passes to the last.
     */
    static String leaderLatch() throws Exception {
        final String path = "/curator/latch";
        List<CuratorFramework> cs = clients(3);
        List<LeaderLatch> open = new ArrayList<>();
        try {
            final CountDownLatch startGate = new CountDownLatch(1);
            List<Future<?>> fs = new ArrayList<>();
            ExecutorService pool = Executors.newFixedThreadPool(3);
            for (int i = 0; i < 3; i++) {
                LeaderLatch l = new LeaderLatch(cs.get(i), path, "p" + i);
                open.add(l);
                fs.add(pool.submit(() -> {
                    startGate.await();
                    l.start();
                    return null;
                }));
            }
            startGate.countDown();
            joinAll(fs);
            pool.shutdownNow();
            StringBuilder order = new StringBuilder();
            LeaderLatch first = oneLeader(open);
            check(first.await(1, TimeUnit.SECONDS), "leader's await() returned false");
            order.append(first.getId());
            for (int round = 0; round < 2; round++) {
                LeaderLatch leader = leaders(open).get(0);
                open.remove(leader);
                if (round == 0) {
                    leader.close();
                    check(!leader.hasLeadership(), "closed latch still leads");
                } else {
                    // The leader's whole client goes away: the server ends
                    // its session and removes its ephemeral latch node.
                    cs.get(Integer.parseInt(leader.getId().substring(1))).close();
                }
                LeaderLatch next = oneLeader(open);
                check(next != leader, "leadership did not move");
                check(next.await(WAIT_S, TimeUnit.SECONDS), "new leader's await() failed");
                order.append(round == 0 ? " -(latch closed)-> " : " -(session closed)-> ").append(next.getId());
            }
            LeaderLatch last = open.remove(0);
            last.close();
            // close() deletes the latch node in the background. (Any of
            // the three clients may be the closed one: ask a fresh one.)
            CuratorFramework observer = client();
            cs.add(observer);
            check(waitNoChildren(observer, path), "latch nodes left behind: "
                    + observer.getChildren().forPath(path));
            return "3 participants, leadership " + order;
        } finally {
            for (LeaderLatch l : open) {
                try {
                    l.close();
                } catch (Exception e) {
                    // best effort
                }
            }
            closeAll(cs);
        }
    }

    // ---- CuratorCache -------------------------------------------------------

    static final class Ev {
        final CuratorCacheListener.Type type;
        final ChildData oldData, data;

        Ev(CuratorCacheListener.Type type, ChildData oldData, ChildData data) {
            this.type = type;
            this.oldData = oldData;
            this.data = data;
        }

        String path() {
            return data != null ? data.getPath() : oldData.getPath();
        }

        public String toString() {
            return type + " " + path() + (data != null ? " =" + s(data.getData()) : "");
        }
    }

    static Ev next(BlockingQueue<Ev> q, CuratorCacheListener.Type type, String path, String data)
            throws Exception {
        Ev e = q.poll(WAIT_S, TimeUnit.SECONDS);
        check(e != null, "no event within " + WAIT_S + "s, expected " + type + " " + path);
        String want = type + " " + path + (data != null ? " =" + data : "");
        check(e.toString().equals(want), "event " + e + ", expected " + want);
        return e;
    }

    /**
     * A cache over /curator/cache on one client sees the initial tree, then
     * another client's creates (nested too), updates and deletes, in order,
     * with the right data; the cache's view follows.
     */
    static String curatorCache() throws Exception {
        final String root = "/curator/cache";
        List<CuratorFramework> cs = clients(2);
        CuratorFramework watcher = cs.get(0), writer = cs.get(1);
        CuratorCache cache = null;
        try {
            writer.create().creatingParentsIfNeeded().forPath(root + "/pre", b("p"));
            final BlockingQueue<Ev> q = new LinkedBlockingQueue<>();
            final CountDownLatch initialized = new CountDownLatch(1);
            cache = CuratorCache.build(watcher, root);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forAll((type, oldData, data) -> q.add(new Ev(type, oldData, data)))
                    .forInitialized(initialized::countDown)
                    .build());
            cache.start();
            check(initialized.await(WAIT_S, TimeUnit.SECONDS), "cache not initialized");
            Set<String> initial = new HashSet<>();
            for (Ev e; (e = q.poll()) != null; ) {
                check(e.type == CuratorCacheListener.Type.NODE_CREATED, "initial event " + e);
                initial.add(e.path());
            }
            check(initial.equals(Set.of(root, root + "/pre")), "initial events for " + initial);
            int events = 0;
            writer.create().forPath(root + "/a", b("1"));
            next(q, CuratorCacheListener.Type.NODE_CREATED, root + "/a", "1");
            writer.setData().forPath(root + "/a", b("2"));
            Ev ch = next(q, CuratorCacheListener.Type.NODE_CHANGED, root + "/a", "2");
            check(s(ch.oldData.getData()).equals("1"), "NODE_CHANGED old data " + s(ch.oldData.getData()));
            check(ch.data.getStat().getVersion() == 1, "version " + ch.data.getStat().getVersion());
            writer.create().forPath(root + "/a/b", b("nested"));
            next(q, CuratorCacheListener.Type.NODE_CREATED, root + "/a/b", "nested");
            writer.setData().forPath(root, b("rootdata"));
            next(q, CuratorCacheListener.Type.NODE_CHANGED, root, "rootdata");
            Optional<ChildData> seen = cache.get(root + "/a/b");
            check(seen.isPresent() && s(seen.get().getData()).equals("nested"), "cache.get(/a/b) " + seen);
            writer.delete().forPath(root + "/a/b");
            next(q, CuratorCacheListener.Type.NODE_DELETED, root + "/a/b", null);
            writer.delete().forPath(root + "/a");
            Ev del = next(q, CuratorCacheListener.Type.NODE_DELETED, root + "/a", null);
            check(s(del.oldData.getData()).equals("2"), "deleted node's last data " + s(del.oldData.getData()));
            check(!cache.get(root + "/a").isPresent(), "deleted node still cached");
            // An ephemeral of the writer's session disappears when it closes.
            writer.create().withMode(org.apache.zookeeper.CreateMode.EPHEMERAL).forPath(root + "/eph", b("e"));
            next(q, CuratorCacheListener.Type.NODE_CREATED, root + "/eph", "e");
            writer.close();
            next(q, CuratorCacheListener.Type.NODE_DELETED, root + "/eph", null);
            events = 9;
            Thread.sleep(200);
            check(q.isEmpty(), "unexpected extra events " + q);
            check(cache.size() == 2, "cache holds " + cache.size() + " nodes, expected 2");
            return "initial 2 nodes, then " + events + " events in order (create/update/nested/delete/ephemeral)";
        } finally {
            if (cache != null) {
                cache.close();
            }
            closeAll(cs);
        }
    }

    // ---- DistributedAtomicLong ----------------------------------------------

    /**
     * 4 clients x 2 threads increment one DistributedAtomicLong 15 times each
     * (clients 0-1 optimistic only, 2-3 promoted to a lock on contention).
     * Every successful increment must see a distinct value and the final
     * value must be the total. The first increment creates the znode
     * (version 0) and every later write is one setData, so after the final
     * compareAndSet its version is the number of increments.
     */
    /** sync(path) on c's session, waited for: reads after it see every write before it. */
    static void syncPath(CuratorFramework c, String path) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        AtomicInteger rc = new AtomicInteger(Integer.MIN_VALUE);
        c.getZookeeperClient().getZooKeeper().sync(path, (code, p, ctx) -> {
            rc.set(code);
            done.countDown();
        }, null);
        check(done.await(WAIT_S, TimeUnit.SECONDS), "sync " + path + " did not complete");
        check(rc.get() == 0, "sync " + path + " failed: " + rc.get());
    }

    static String atomicLong() throws Exception {
        final String path = "/curator/counter";
        final String lockPath = "/curator/counter-lock";
        final int nClients = 4, perClientThreads = 2, rounds = 15;
        List<CuratorFramework> cs = clients(nClients);
        ExecutorService pool = Executors.newFixedThreadPool(nClients * perClientThreads);
        try {
            final Set<Long> postValues = java.util.Collections.synchronizedSet(new HashSet<>());
            final AtomicInteger retries = new AtomicInteger();
            final AtomicInteger tries = new AtomicInteger();
            final AtomicInteger badPairs = new AtomicInteger();
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < nClients; i++) {
                final CuratorFramework c = cs.get(i);
                final boolean promoted = i >= 2;
                for (int t = 0; t < perClientThreads; t++) {
                    fs.add(pool.submit(() -> {
                        DistributedAtomicLong n = promoted
                                ? new DistributedAtomicLong(c, path, new RetryNTimes(3, 5),
                                        PromotedToLock.builder().lockPath(lockPath)
                                                .retryPolicy(new RetryNTimes(20, 10))
                                                .timeout(WAIT_S, TimeUnit.SECONDS).build())
                                : new DistributedAtomicLong(c, path, new RetryNTimes(20, 5));
                        for (int r = 0; r < rounds; r++) {
                            int attempts = 0;
                            while (true) {
                                AtomicValue<Long> v = n.increment();
                                tries.addAndGet(v.getStats().getOptimisticTries());
                                if (v.succeeded()) {
                                    if (v.postValue() != v.preValue() + 1) {
                                        badPairs.incrementAndGet();
                                    }
                                    check(postValues.add(v.postValue()),
                                            "two increments both produced " + v.postValue());
                                    break;
                                }
                                retries.incrementAndGet();
                                check(++attempts < 200, "increment never succeeded");
                            }
                        }
                        return null;
                    }));
                }
            }
            joinAll(fs);
            long total = (long) nClients * perClientThreads * rounds;
            check(badPairs.get() == 0, badPairs.get() + " increments with post != pre + 1");
            // Other clients' increments may not have reached this client's
            // server yet (a read is served locally): sync first, as
            // ZooKeeper requires for an up-to-date read.
            syncPath(cs.get(0), path);
            AtomicValue<Long> end = new DistributedAtomicLong(cs.get(0), path, new RetryNTimes(3, 10)).get();
            check(end.succeeded(), "final get() failed");
            check(end.postValue() == total, "final value " + end.postValue() + ", expected " + total);
            for (long v = 1; v <= total; v++) {
                check(postValues.contains(v), "no increment produced " + v);
            }
            // compareAndSet with a stale expectation fails, with the right one succeeds.
            DistributedAtomicLong n = new DistributedAtomicLong(cs.get(1), path, new RetryNTimes(3, 10));
            check(!n.compareAndSet(total - 1, 0L).succeeded(), "stale compareAndSet succeeded");
            check(n.compareAndSet(total, 1000L).succeeded(), "compareAndSet failed");
            check(n.get().postValue() == 1000L, "value after compareAndSet " + n.get().postValue());
            Stat st = cs.get(2).checkExists().forPath(path);
            check(st != null && st.getVersion() == total, "counter znode version " + (st == null ? "none" : st.getVersion()));
            return total + " increments by " + nClients + " clients x " + perClientThreads
                    + " threads summed correctly (" + tries.get() + " optimistic tries, "
                    + retries.get() + " increments retried after exhausting the policy)";
        } finally {
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    // ---- Beyond the four of issue #5 ------------------------------------------

    /**
     * InterProcessReadWriteLock: 4 readers on 4 clients hold the read lock
     * together (they meet at a CyclicBarrier while holding it) and a writer
     * cannot get in meanwhile; then 2 writer and 4 reader threads contend,
     * a writer always alone, readers never beside a writer.
     */
    static String readWriteLock() throws Exception {
        final String path = "/curator/rwlock";
        List<CuratorFramework> cs = clients(4);
        ExecutorService pool = Executors.newFixedThreadPool(6);
        try {
            final java.util.concurrent.CyclicBarrier together = new java.util.concurrent.CyclicBarrier(5);
            List<Future<?>> fs = new ArrayList<>();
            for (CuratorFramework c : cs) {
                fs.add(pool.submit(() -> {
                    InterProcessMutex r = new org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock(c, path).readLock();
                    check(r.acquire(WAIT_S, TimeUnit.SECONDS), "read lock acquire");
                    try {
                        together.await(WAIT_S, TimeUnit.SECONDS); // all 4 hold it
                        together.await(WAIT_S, TimeUnit.SECONDS); // the writer tried
                    } finally {
                        r.release();
                    }
                    return null;
                }));
            }
            together.await(WAIT_S, TimeUnit.SECONDS);
            InterProcessMutex w = new org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock(cs.get(0), path).writeLock();
            boolean wrote = w.acquire(300, TimeUnit.MILLISECONDS);
            together.await(WAIT_S, TimeUnit.SECONDS);
            joinAll(fs);
            check(!wrote, "a writer got the lock while 4 readers held it");
            check(w.acquire(WAIT_S, TimeUnit.SECONDS), "writer did not get the lock after the readers left");
            w.release();

            final AtomicInteger readers = new AtomicInteger(), writers = new AtomicInteger(), bad = new AtomicInteger();
            fs.clear();
            for (int i = 0; i < 6; i++) {
                final boolean writer = i < 2;
                final CuratorFramework c = cs.get(i % 4);
                fs.add(pool.submit(() -> {
                    org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock rw =
                            new org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock(c, path);
                    InterProcessMutex m = writer ? rw.writeLock() : rw.readLock();
                    for (int r = 0; r < 5; r++) {
                        check(m.acquire(WAIT_S, TimeUnit.SECONDS), "acquire timed out");
                        try {
                            if (writer) {
                                if (writers.incrementAndGet() != 1 || readers.get() != 0) {
                                    bad.incrementAndGet();
                                }
                                Thread.sleep(5);
                                writers.decrementAndGet();
                            } else {
                                readers.incrementAndGet();
                                if (writers.get() != 0) {
                                    bad.incrementAndGet();
                                }
                                Thread.sleep(5);
                                readers.decrementAndGet();
                            }
                        } finally {
                            m.release();
                        }
                    }
                    return null;
                }));
            }
            joinAll(fs);
            check(bad.get() == 0, bad.get() + " exclusion violations");
            check(waitNoChildren(cs.get(1), path), "lock nodes left behind");
            return "4 readers shared the lock, writer excluded; 2 writers + 4 readers x 5 rounds";
        } finally {
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    /**
     * InterProcessSemaphoreV2 with 2 leases: 2 clients hold them and a 3rd
     * cannot get one; then 4 clients x 5 rounds never exceed 2 holders.
     */
    static String semaphore() throws Exception {
        final String path = "/curator/semaphore";
        List<CuratorFramework> cs = clients(4);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            org.apache.curator.framework.recipes.locks.Lease l0 =
                    new org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2(cs.get(0), path, 2).acquire(WAIT_S, TimeUnit.SECONDS);
            org.apache.curator.framework.recipes.locks.Lease l1 =
                    new org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2(cs.get(1), path, 2).acquire(WAIT_S, TimeUnit.SECONDS);
            check(l0 != null && l1 != null, "two leases not granted");
            org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2 s2 =
                    new org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2(cs.get(2), path, 2);
            check(s2.acquire(300, TimeUnit.MILLISECONDS) == null, "a third lease was granted");
            l0.close();
            org.apache.curator.framework.recipes.locks.Lease l2 = s2.acquire(WAIT_S, TimeUnit.SECONDS);
            check(l2 != null, "the returned lease was not granted");
            l1.close();
            l2.close();
            final AtomicInteger holders = new AtomicInteger(), max = new AtomicInteger();
            List<Future<?>> fs = new ArrayList<>();
            for (CuratorFramework c : cs) {
                fs.add(pool.submit(() -> {
                    org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2 s =
                            new org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2(c, path, 2);
                    for (int r = 0; r < 5; r++) {
                        org.apache.curator.framework.recipes.locks.Lease l = s.acquire(WAIT_S, TimeUnit.SECONDS);
                        check(l != null, "acquire timed out");
                        try {
                            max.accumulateAndGet(holders.incrementAndGet(), Math::max);
                            Thread.sleep(10);
                            holders.decrementAndGet();
                        } finally {
                            l.close();
                        }
                    }
                    return null;
                }));
            }
            joinAll(fs);
            check(max.get() <= 2, max.get() + " holders at once");
            return "2 of 2 leases held, third refused; 4 clients x 5 rounds, max " + max.get() + " holders";
        } finally {
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    /**
     * LeaderSelector (autoRequeue) on 3 clients: leadership rotates, each
     * leads at least twice, never two at once.
     */
    static String leaderSelector() throws Exception {
        final String path = "/curator/selector";
        List<CuratorFramework> cs = clients(3);
        List<org.apache.curator.framework.recipes.leader.LeaderSelector> sels = new ArrayList<>();
        try {
            final AtomicInteger leading = new AtomicInteger(), overlaps = new AtomicInteger();
            final int[] turns = new int[3];
            final CountDownLatch enough = new CountDownLatch(1);
            for (int i = 0; i < 3; i++) {
                final int me = i;
                org.apache.curator.framework.recipes.leader.LeaderSelector sel =
                        new org.apache.curator.framework.recipes.leader.LeaderSelector(cs.get(i), path,
                                new org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter() {
                                    public void takeLeadership(CuratorFramework c) throws Exception {
                                        if (leading.incrementAndGet() != 1) {
                                            overlaps.incrementAndGet();
                                        }
                                        // close() interrupts a leader in its sleep:
                                        // it still stops leading before it releases.
                                        try {
                                            Thread.sleep(20);
                                            synchronized (turns) {
                                                turns[me]++;
                                                if (turns[0] >= 2 && turns[1] >= 2 && turns[2] >= 2) {
                                                    enough.countDown();
                                                }
                                            }
                                        } finally {
                                            leading.decrementAndGet();
                                        }
                                    }
                                });
                sel.setId("s" + i);
                sel.autoRequeue();
                sels.add(sel);
            }
            for (org.apache.curator.framework.recipes.leader.LeaderSelector s : sels) {
                s.start();
            }
            check(enough.await(WAIT_S, TimeUnit.SECONDS), "not everyone led twice");
            check(sels.get(0).getParticipants().size() >= 1, "no participants");
            for (org.apache.curator.framework.recipes.leader.LeaderSelector s : sels) {
                s.close();
            }
            sels.clear();
            check(overlaps.get() == 0, overlaps.get() + " times two leaders at once");
            check(waitNoChildren(cs.get(0), path), "selector nodes left behind");
            synchronized (turns) {
                return "3 selectors, turns " + turns[0] + "/" + turns[1] + "/" + turns[2] + ", never two leaders";
            }
        } finally {
            for (org.apache.curator.framework.recipes.leader.LeaderSelector s : sels) {
                try {
                    s.close();
                } catch (Exception e) {
                    // best effort
                }
            }
            closeAll(cs);
        }
    }

    /**
     * SharedCount: 3 clients x 20 increments by versioned trySetCount; the
     * result is 60, and a listener on a 4th client sees the final value.
     */
    static String sharedCount() throws Exception {
        final String path = "/curator/sharedcount";
        List<CuratorFramework> cs = clients(4);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<org.apache.curator.framework.recipes.shared.SharedCount> counts = new ArrayList<>();
        try {
            final CountDownLatch sawFinal = new CountDownLatch(1);
            org.apache.curator.framework.recipes.shared.SharedCount watcher =
                    new org.apache.curator.framework.recipes.shared.SharedCount(cs.get(3), path, 0);
            counts.add(watcher);
            watcher.addListener(new org.apache.curator.framework.recipes.shared.SharedCountListener() {
                public void countHasChanged(org.apache.curator.framework.recipes.shared.SharedCountReader r, int n) {
                    if (n == 60) {
                        sawFinal.countDown();
                    }
                }

                public void stateChanged(CuratorFramework c, org.apache.curator.framework.state.ConnectionState s) {
                }
            });
            watcher.start();
            final AtomicInteger conflicts = new AtomicInteger();
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                org.apache.curator.framework.recipes.shared.SharedCount sc =
                        new org.apache.curator.framework.recipes.shared.SharedCount(cs.get(i), path, 0);
                counts.add(sc);
                sc.start();
                fs.add(pool.submit(() -> {
                    for (int r = 0; r < 20; r++) {
                        int attempts = 0;
                        while (true) {
                            org.apache.curator.framework.recipes.shared.VersionedValue<Integer> v = sc.getVersionedValue();
                            if (sc.trySetCount(v, v.getValue() + 1)) {
                                break;
                            }
                            conflicts.incrementAndGet();
                            check(++attempts < 500, "trySetCount never succeeded");
                        }
                    }
                    return null;
                }));
            }
            joinAll(fs);
            check(sawFinal.await(WAIT_S, TimeUnit.SECONDS), "listener never saw 60 (has " + watcher.getCount() + ")");
            syncPath(cs.get(0), path); // the listener may sit on another server
            byte[] raw = cs.get(0).getData().forPath(path);
            check(java.nio.ByteBuffer.wrap(raw).getInt() == 60, "stored count " + java.util.Arrays.toString(raw));
            return "3 clients x 20 versioned increments = 60 (" + conflicts.get() + " version conflicts), listener saw it";
        } finally {
            for (org.apache.curator.framework.recipes.shared.SharedCount sc : counts) {
                try {
                    sc.close();
                } catch (Exception e) {
                    // best effort
                }
            }
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    /**
     * DistributedDoubleBarrier of 4 on 4 clients: nobody passes enter()
     * until the 4th arrives; all leave.
     */
    static String doubleBarrier() throws Exception {
        final String path = "/curator/double-barrier";
        List<CuratorFramework> cs = clients(4);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            final AtomicInteger arrived = new AtomicInteger(), early = new AtomicInteger();
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                final int me = i;
                final CuratorFramework c = cs.get(i);
                fs.add(pool.submit(() -> {
                    org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier b =
                            new org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier(c, path, 4);
                    if (me == 3) {
                        Thread.sleep(300);
                    }
                    arrived.incrementAndGet();
                    check(b.enter(WAIT_S, TimeUnit.SECONDS), "enter timed out");
                    if (arrived.get() != 4) {
                        early.incrementAndGet();
                    }
                    check(b.leave(WAIT_S, TimeUnit.SECONDS), "leave timed out");
                    return null;
                }));
            }
            joinAll(fs);
            check(early.get() == 0, early.get() + " members passed enter() early");
            check(waitNoChildren(cs.get(0), path), "barrier nodes left behind");
            return "4 members entered together and left";
        } finally {
            pool.shutdownNow();
            closeAll(cs);
        }
    }

    /**
     * Curator transactions (multi): a create/setData/check/delete batch
     * commits whole; a batch whose check fails changes nothing.
     */
    static String transaction() throws Exception {
        List<CuratorFramework> cs = clients(2);
        try {
            CuratorFramework c = cs.get(0);
            c.create().creatingParentsIfNeeded().forPath("/curator/tx/a", b("a0"));
            c.create().forPath("/curator/tx/gone", b("g"));
            List<org.apache.curator.framework.api.transaction.CuratorTransactionResult> res = c.transaction().forOperations(
                    c.transactionOp().check().withVersion(0).forPath("/curator/tx/a"),
                    c.transactionOp().create().forPath("/curator/tx/b", b("b0")),
                    c.transactionOp().setData().forPath("/curator/tx/a", b("a1")),
                    c.transactionOp().delete().forPath("/curator/tx/gone"));
            check(res.size() == 4, res.size() + " results");
            check(res.get(1).getResultPath().equals("/curator/tx/b"), "create result " + res.get(1).getResultPath());
            check(res.get(2).getResultStat() != null && res.get(2).getResultStat().getVersion() == 1, "setData result stat");
            CuratorFramework other = cs.get(1);
            check(s(other.getData().forPath("/curator/tx/a")).equals("a1"), "a after commit");
            check(other.checkExists().forPath("/curator/tx/gone") == null, "gone after commit");
            boolean failed = false;
            try {
                c.transaction().forOperations(
                        c.transactionOp().create().forPath("/curator/tx/c", b("c")),
                        c.transactionOp().setData().forPath("/curator/tx/b", b("b1")),
                        c.transactionOp().check().withVersion(7).forPath("/curator/tx/a"));
            } catch (org.apache.zookeeper.KeeperException.BadVersionException e) {
                failed = true;
            }
            check(failed, "a transaction with a failing check did not fail with BadVersion");
            check(other.checkExists().forPath("/curator/tx/c") == null, "partial commit: c exists");
            check(s(other.getData().forPath("/curator/tx/b")).equals("b0"), "partial commit: b changed");
            return "4-op transaction committed whole; failing one left nothing";
        } finally {
            closeAll(cs);
        }
    }

    /**
     * A TCP relay on 127.0.0.1 to the server that can cut every connection
     * and, while paused, closes new ones at once, so that a client stays
     * disconnected while its session lives on.
     */
    static final class Proxy implements java.io.Closeable {
        final java.net.ServerSocket listener;
        final String upstreamHost;
        final int upstreamPort;
        final List<java.net.Socket> conns = new ArrayList<>();
        volatile boolean paused;

        Proxy(String upstream) throws java.io.IOException {
            int colon = upstream.lastIndexOf(':');
            upstreamHost = upstream.substring(0, colon);
            upstreamPort = Integer.parseInt(upstream.substring(colon + 1));
            listener = new java.net.ServerSocket(0, 16, java.net.InetAddress.getByName("127.0.0.1"));
            Thread t = new Thread(this::acceptLoop, "proxy-accept");
            t.setDaemon(true);
            t.start();
        }

        String addr() {
            return "127.0.0.1:" + listener.getLocalPort();
        }

        void acceptLoop() {
            while (!listener.isClosed()) {
                try {
                    java.net.Socket down = listener.accept();
                    if (paused) {
                        down.close();
                        continue;
                    }
                    java.net.Socket up = new java.net.Socket(upstreamHost, upstreamPort);
                    synchronized (conns) {
                        conns.add(down);
                        conns.add(up);
                    }
                    pump(down, up);
                    pump(up, down);
                } catch (java.io.IOException e) {
                    // listener closed, or one connection failed
                }
            }
        }

        static void pump(java.net.Socket from, java.net.Socket to) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[65536];
                try {
                    java.io.InputStream in = from.getInputStream();
                    java.io.OutputStream out = to.getOutputStream();
                    for (int n; (n = in.read(buf)) > 0; ) {
                        out.write(buf, 0, n);
                        out.flush();
                    }
                } catch (java.io.IOException e) {
                    // cut
                }
                try {
                    from.close();
                    to.close();
                } catch (java.io.IOException e) {
                    // best effort
                }
            }, "proxy-pump");
            t.setDaemon(true);
            t.start();
        }

        void cut() {
            paused = true;
            synchronized (conns) {
                for (java.net.Socket s : conns) {
                    try {
                        s.close();
                    } catch (java.io.IOException e) {
                        // best effort
                    }
                }
                conns.clear();
            }
        }

        void resume() {
            paused = false;
        }

        public void close() throws java.io.IOException {
            cut();
            listener.close();
        }
    }

    /**
     * A client behind a proxy loses its connection; meanwhile another client
     * changes nodes it watches. On reconnect (same session) ZooKeeper's Java
     * client sends setWatches (setWatches2, as a CuratorCache's persistent
     * recursive watch is among them): the server fires at once the data,
     * child and exists watches of what changed after the client's last zxid,
     * and not the data watch of an unchanged node; that one and the
     * persistent watch keep working; the ephemeral node survived.
     */
    static String reconnect() throws Exception {
        final String root = "/curator/rc";
        Proxy proxy = new Proxy(nextServer());
        CuratorFramework w = client();
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(proxy.addr())
                .sessionTimeoutMs(20000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new RetryNTimes(100, 100))
                .build();
        synchronized (clients) {
            clients.add(c);
        }
        CuratorCache cache = null;
        try {
            final BlockingQueue<org.apache.curator.framework.state.ConnectionState> states = new LinkedBlockingQueue<>();
            c.getConnectionStateListenable().addListener((cl, st) -> states.add(st));
            c.start();
            check(c.blockUntilConnected((int) WAIT_S, TimeUnit.SECONDS), "client did not connect through the proxy");
            org.apache.zookeeper.ZooKeeper zk = c.getZookeeperClient().getZooKeeper();
            long sid = zk.getSessionId();
            w.create().creatingParentsIfNeeded().forPath(root + "/keep", b("k"));
            w.setData().forPath(root, b("d0"));
            c.create().withMode(org.apache.zookeeper.CreateMode.EPHEMERAL).forPath(root + "-eph");

            final BlockingQueue<String> fired = new LinkedBlockingQueue<>();
            org.apache.zookeeper.Watcher rec = ev -> {
                if (ev.getType() != org.apache.zookeeper.Watcher.Event.EventType.None) {
                    fired.add(ev.getType() + " " + ev.getPath());
                }
            };
            check(zk.exists(root + "/new", rec) == null, root + "/new exists");
            zk.getData(root, rec, null);
            zk.getChildren(root, rec);
            zk.getData(root + "/keep", rec, null);

            final BlockingQueue<Ev> q = new LinkedBlockingQueue<>();
            final CountDownLatch initialized = new CountDownLatch(1);
            cache = CuratorCache.build(c, root);
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forAll((type, oldData, data) -> q.add(new Ev(type, oldData, data)))
                    .forInitialized(initialized::countDown)
                    .build());
            cache.start();
            check(initialized.await(WAIT_S, TimeUnit.SECONDS), "cache not initialized");
            q.clear();

            proxy.cut();
            org.apache.curator.framework.state.ConnectionState st;
            while ((st = states.poll(WAIT_S, TimeUnit.SECONDS)) != org.apache.curator.framework.state.ConnectionState.SUSPENDED) {
                check(st != null, "no SUSPENDED after the cut");
            }
            w.setData().forPath(root, b("d1"));
            w.create().forPath(root + "/new", b("n"));
            Thread.sleep(200);
            check(fired.isEmpty(), "watches fired while disconnected: " + fired);
            proxy.resume();
            while ((st = states.poll(WAIT_S, TimeUnit.SECONDS)) != org.apache.curator.framework.state.ConnectionState.RECONNECTED) {
                check(st != null, "did not reconnect");
                check(st != org.apache.curator.framework.state.ConnectionState.LOST, "session lost");
            }
            check(c.getZookeeperClient().getZooKeeper().getSessionId() == sid, "a new session after reconnect");
            Set<String> got = new HashSet<>();
            for (int i = 0; i < 3; i++) {
                String e = fired.poll(WAIT_S, TimeUnit.SECONDS);
                check(e != null, "after reconnect only " + got + " fired");
                got.add(e);
            }
            Set<String> want = Set.of("NodeCreated " + root + "/new", "NodeDataChanged " + root,
                    "NodeChildrenChanged " + root);
            check(got.equals(want), "after reconnect fired " + got + ", expected " + want);
            Thread.sleep(300);
            check(fired.isEmpty(), "unchanged node's watch fired: " + fired);
            Stat eph = w.checkExists().forPath(root + "-eph");
            check(eph != null && eph.getEphemeralOwner() == sid, "ephemeral node lost");
            // The cache catches up with what changed meanwhile...
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (!(cache.get(root + "/new").isPresent()
                    && s(cache.get(root).map(ChildData::getData).orElse(null)).equals("d1"))) {
                check(System.nanoTime() < deadline, "cache did not catch up after reconnect");
                Thread.sleep(20);
            }
            Set<String> caught = new HashSet<>();
            for (Ev e; (e = q.poll()) != null; ) {
                caught.add(e.toString());
            }
            // ...and the persistent watch and the kept one-shot watch work on.
            q.clear();
            w.setData().forPath(root + "/keep", b("k2"));
            String e = fired.poll(WAIT_S, TimeUnit.SECONDS);
            check(("NodeDataChanged " + root + "/keep").equals(e), "kept watch after reconnect: " + e);
            next(q, CuratorCacheListener.Type.NODE_CHANGED, root + "/keep", "k2");
            w.create().forPath(root + "/after", b("x"));
            next(q, CuratorCacheListener.Type.NODE_CREATED, root + "/after", "x");
            return "same session; setWatches fired " + got.size() + " changed watches, kept the unchanged one; cache caught up " + caught;
        } finally {
            if (cache != null) {
                cache.close();
            }
            closeAll(List.of(c, w));
            proxy.close();
        }
    }

    // ---- main ---------------------------------------------------------------

    interface Recipe {
        String run() throws Exception;
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: Recipes host:port [host:port ...]");
            System.exit(2);
        }
        servers = args;
        String[] names = {
            "InterProcessMutex", "LeaderLatch", "CuratorCache", "DistributedAtomicLong",
            "InterProcessReadWriteLock", "InterProcessSemaphoreV2", "LeaderSelector", "SharedCount",
            "DistributedDoubleBarrier", "Transaction", "Reconnect",
        };
        Recipe[] recipes = {
            Recipes::mutex, Recipes::leaderLatch, Recipes::curatorCache, Recipes::atomicLong,
            Recipes::readWriteLock, Recipes::semaphore, Recipes::leaderSelector, Recipes::sharedCount,
            Recipes::doubleBarrier, Recipes::transaction, Recipes::reconnect,
        };
        String only = System.getenv("CURATOR_RECIPES");
        int passed = 0, failed = 0;
        for (int i = 0; i < names.length; i++) {
            if (only != null && !java.util.Arrays.asList(only.split(",")).contains(names[i])) {
                continue;
            }
            long t0 = System.nanoTime();
            String line;
            // Each recipe on its own daemon thread with a deadline, so that
            // a hang is reported as a FAIL and the others still run.
            final Recipe recipe = recipes[i];
            java.util.concurrent.FutureTask<String> task = new java.util.concurrent.FutureTask<>(recipe::run);
            Thread th = new Thread(task, "recipe-" + names[i]);
            th.setDaemon(true);
            th.start();
            try {
                String detail = task.get(RECIPE_DEADLINE_S, TimeUnit.SECONDS);
                line = "PASS " + names[i] + ": " + detail;
                passed++;
            } catch (java.util.concurrent.TimeoutException e) {
                line = "FAIL " + names[i] + ": did not finish within " + RECIPE_DEADLINE_S + "s";
                th.interrupt();
                failed++;
            } catch (java.util.concurrent.ExecutionException e) {
                Throwable t = e.getCause();
                if (t instanceof Fail) {
                    line = "FAIL " + names[i] + ": " + t.getMessage();
                } else {
                    line = "FAIL " + names[i] + ": " + t;
                    t.printStackTrace();
                }
                failed++;
            } catch (InterruptedException e) {
                line = "FAIL " + names[i] + ": interrupted";
                failed++;
            }
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            System.out.println(line + " [" + ms + " ms]");
            System.out.flush();
        }
        System.out.println("DONE passed=" + passed + " failed=" + failed);
        System.out.flush();
        synchronized (clients) {
            closeAll(clients);
        }
        System.exit(failed == 0 ? 0 : 1);
    }
}
