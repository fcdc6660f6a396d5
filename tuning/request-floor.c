// The floor this machine puts under ZooKeeper-framed requests on loopback
// (issue 27 §1): a bare server that answers the ZooKeeper client protocol
// with no tree, no log and no sessions beyond an id, so that what it costs
// per request is the kernel's loopback TCP, its wake-ups and the way the
// server talks to the kernel, and nothing else. ringkeeper's CPU per
// request is measured against this.
//
// What it answers (4-byte big-endian length prefix, frames > 1 MiB close the
// connection, as ZooKeeper's jute.maxbuffer does):
//   ConnectRequest (first frame)  -> ConnectResponse: a fresh session id,
//                                    16-byte password, readOnly false (the
//                                    byte only if the request had one)
//   getData (4)     -> ReplyHeader + data (VALUE_BYTES of 'x') + Stat
//   setData (5)     -> ReplyHeader (new zxid) + Stat
//   create (1)      -> the path echoed; create2/container/TTL (15, 19, 21)
//                      the path and a Stat
//   delete (2)      -> header; exists (3) -> Stat; getChildren (8) -> empty
//                      vector; getChildren2 (12) -> empty vector + Stat;
//                      sync (9) -> path echoed; ping (11) -> header;
//                      addWatch (106) -> ErrorResponse 0
//   closeSession (-11) -> header (new zxid), then the connection is closed
//   anything else   -> header with err 0
//   srvr/stat, ruok, isro (four-letter words on a fresh connection), so that
//   ringkeeper-loadgen's counter check ("Received:") runs against it.
// A zxid counter increments per write. Every buffer is bounded: a frame over
// 1 MiB, or more than 16 MiB of replies queued for one connection that does
// not read them, closes the connection.
//
// Three ways to talk to the kernel, one thread each (one core, like one
// shard of the server):
//   epoll   nonblocking sockets, level-triggered epoll_wait; per readable
//           connection per turn one recv() and, after the turn's events are
//           processed, one send() of every reply it produced: the classic
//           floor.
//   uring   io_uring: multishot accept straight into the fixed file table
//           (direct descriptors; the sockets never get an fd), multishot
//           recv into a provided-buffer ring, replies of one loop turn
//           batched per connection and every send of the turn submitted with
//           the one io_uring_submit_and_wait() that also waits for the next
//           completions; IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (printed
//           notes if the kernel refuses either), the ring fd registered.
//           Recv-buffer exhaustion (ENOBUFS) and multishot termination (no
//           IORING_CQE_F_MORE) re-arm the recv. --zc: IORING_OP_SEND_ZC for
//           sends of >= 4 KiB.
//   --log DIR (uring, sqpoll): the floor plus a log. Every write's frame is
//           appended to a batch; at the end of a loop turn, when no log
//           write is in flight, the batch goes to DIR/request-floor.log
//           (preallocated, zero-filled, O_DIRECT|O_DSYNC, as ringkeeper's
//           direct log) as one io_uring write padded to 4 KiB blocks. A
//           write's reply, and every reply its connection produces after
//           it, is held until the write covering it completes: group
//           commit, and a session's order, as ZooKeeper keeps them. The
//           file wraps at 64 MiB (only the cost of the writes matters).
//   sqpoll  the same with IORING_SETUP_SQPOLL (DEFER_TASKRUN is refused with
//           SQPOLL by the kernel: noted, dropped). The submission thread
//           (iou-sqp-PID) is pinned to --sq-cpu (default: the first CPU this
//           process may run on, i.e. the server's own core) and its CPU time
//           is part of this process's (getrusage(RUSAGE_SELF) and
//           /proc/PID/stat include it). The app thread skips io_uring_enter
//           when completions are already there.
//
// Build and run (tuning/request-floor.sh does both, and measures):
//   cc -O2 -Wall -o request-floor tuning/request-floor.c -luring
//   taskset -c 1 ./request-floor epoll|uring|sqpoll PORT [VALUE_BYTES]
//       [--zc] [--sq-cpu N] [--sq-idle-ms N] [--bufs N] [--buf-size B] [--log DIR]
// Prints "request-floor pid PID ...", notes on what the kernel granted and
// "ready" (its threads all exist then: attach perf after it), then runs
// (bound to 127.0.0.1:PORT) until SIGTERM/SIGINT. On SIGUSR1 it
// prints one line
//   snap MONO_NS OPS READS WRITES FRAMES CPU_US VCSW IVCSW CONNS
// (OPS = getData + setData answered; CPU from getrusage(RUSAGE_SELF), all
// threads), and at exit its totals:
//   totals cpu_user_s U cpu_sys_s S vcsw V ivcsw I frames F ops O reads R
//   writes W connects C ...
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (1u << 20)       // larger frames close the connection
#define OUT_MAX (16u << 20)        // replies queued for one connection
#define OUT_SOFT (1u << 20)        // epoll: stop reading above this
#define MAX_CONNS 16384            // fixed file slots (uring), fds (epoll)
#define SCRATCH (256u << 10)       // epoll: one recv's buffer
#define ZC_MIN 4096                // --zc: sends this large go zero-copy
#define BGID 7

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CLOSE, OP_CANCEL, OP_LOGW };

// Replies held until a log write completes (--log).
struct hbuf {
    uint8_t *p;
    uint32_t len, cap;
};

struct conn {
    int fd;         // epoll: the socket; uring: its fixed file slot
    uint32_t gen;   // uring: tells stale completions from a slot's new conn
    int connected;  // the ConnectRequest was answered
    int closing;    // close once the queued replies are sent
    int dirty;      // on this turn's flush list
    struct conn *next_dirty;
    // a frame split across reads
    uint8_t *in;
    uint32_t inlen, incap;
    // replies queued (epoll: also partly sent, from outoff)
    uint8_t *out;
    uint32_t outlen, outcap, outoff;
    // epoll
    uint32_t events;
    // uring: the buffer the kernel is sending
    uint8_t *snd;
    uint32_t sndlen, sndcap, sndoff;
    int send_inflight, recv_armed, cancel_sent;
    int zc_wait;    // zero-copy: the notification is still to come
    int zc_res;     // zero-copy: the send's result, applied at the notification
    // --log: replies held for batch 0/1 and whether it is on that batch's list
    struct hbuf held[2];
    int in_batch[2];
};

static struct {
    uint64_t frames, connects, reads, writes, other, closes, accepted;
    uint64_t rearm_enobufs, rearm_other, sqe_full, zc_sends, partial_sends;
    uint64_t log_writes, log_bytes;
} st;
static int64_t zxid;
static uint64_t session_seq;
static uint32_t value_bytes = 1024;
static uint8_t *value;
static int conns_open;
static volatile sig_atomic_t stop_flag, snap_flag;
static struct conn *dirty_head;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void on_signal(int sig) {
    if (sig == SIGUSR1)
        snap_flag = 1;
    else
        stop_flag = 1;
}

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static void snapshot(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                   ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    printf("snap %llu %llu %llu %llu %llu %llu %ld %ld %d\n", (unsigned long long)mono_ns(),
           (unsigned long long)(st.reads + st.writes), (unsigned long long)st.reads,
           (unsigned long long)st.writes, (unsigned long long)st.frames, (unsigned long long)cpu,
           ru.ru_nvcsw, ru.ru_nivcsw, conns_open);
    fflush(stdout);
}

static void totals(const char *variant) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double u = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    double s = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    uint64_t ops = st.reads + st.writes;
    printf("totals variant %s cpu_user_s %.3f cpu_sys_s %.3f vcsw %ld ivcsw %ld frames %llu ops %llu "
           "reads %llu writes %llu other %llu connects %llu accepted %llu closes %llu "
           "rearm_enobufs %llu rearm_other %llu sqe_full %llu zc_sends %llu partial_sends %llu "
           "log_writes %llu log_bytes %llu cpu_us_per_op %.3f\n",
           variant, u, s, ru.ru_nvcsw, ru.ru_nivcsw, (unsigned long long)st.frames,
           (unsigned long long)ops, (unsigned long long)st.reads, (unsigned long long)st.writes,
           (unsigned long long)st.other, (unsigned long long)st.connects,
           (unsigned long long)st.accepted, (unsigned long long)st.closes,
           (unsigned long long)st.rearm_enobufs, (unsigned long long)st.rearm_other,
           (unsigned long long)st.sqe_full, (unsigned long long)st.zc_sends,
           (unsigned long long)st.partial_sends, (unsigned long long)st.log_writes,
           (unsigned long long)st.log_bytes, ops ? (u + s) * 1e6 / ops : 0.0);
    fflush(stdout);
}

// ---------------------------------------------------------------- protocol

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }
static inline uint8_t *put32(uint8_t *p, uint32_t v) {
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
    return p + 4;
}
static inline uint8_t *put64(uint8_t *p, uint64_t v) {
    put32(p, v >> 32);
    return put32(p + 4, (uint32_t)v);
}

// --log: where the frame being answered puts its reply (NULL: c->out).
static struct hbuf *redirect;

static uint8_t *hbuf_room(struct hbuf *h, uint32_t n) {
    if (h->len + n > OUT_MAX) return NULL;
    if (h->len + n > h->cap) {
        uint32_t cap = h->cap ? h->cap : 4096;
        while (cap < h->len + n) cap *= 2;
        uint8_t *b = realloc(h->p, cap);
        if (!b) die("realloc");
        h->p = b;
        h->cap = cap;
    }
    uint8_t *p = h->p + h->len;
    h->len += n;
    return p;
}

// Makes room for n more bytes of replies; NULL when the bound is passed.
static uint8_t *out_room(struct conn *c, uint32_t n) {
    if (redirect) return hbuf_room(redirect, n);
    if (c->outoff && c->outoff == c->outlen)
        c->outoff = c->outlen = 0;
    if (c->outlen + n > c->outcap) {
        if (c->outoff) {  // epoll: drop what was sent already
            memmove(c->out, c->out + c->outoff, c->outlen - c->outoff);
            c->outlen -= c->outoff;
            c->outoff = 0;
        }
        if (c->outlen + n > OUT_MAX) return NULL;
        uint32_t cap = c->outcap ? c->outcap : 16384;
        while (cap < c->outlen + n) cap *= 2;
        if (cap != c->outcap) {
            uint8_t *b = realloc(c->out, cap);
            if (!b) die("realloc");
            c->out = b;
            c->outcap = cap;
        }
    }
    uint8_t *p = c->out + c->outlen;
    c->outlen += n;
    return p;
}

// Appends `len | ReplyHeader` for a body of body_len; returns the body.
static uint8_t *reply(struct conn *c, int32_t xid, int64_t z, int32_t err, uint32_t body_len) {
    uint8_t *p = out_room(c, 4 + 16 + body_len);
    if (!p) return NULL;
    p = put32(p, 16 + body_len);
    p = put32(p, (uint32_t)xid);
    p = put64(p, (uint64_t)z);
    return put32(p, (uint32_t)err);
}

#define STAT_BYTES 68
static uint8_t *put_stat(uint8_t *p, int64_t mz, int32_t version, int32_t data_len) {
    p = put64(p, 1);                 // czxid
    p = put64(p, (uint64_t)mz);      // mzxid
    p = put64(p, 1700000000000ull);  // ctime
    p = put64(p, 1700000000000ull);  // mtime
    p = put32(p, (uint32_t)version);
    p = put32(p, 0);                 // cversion
    p = put32(p, 0);                 // aversion
    p = put64(p, 0);                 // ephemeralOwner
    p = put32(p, (uint32_t)data_len);
    p = put32(p, 0);                 // numChildren
    return put64(p, 1);              // pzxid
}

// The ustring at the start of b (len bytes); -1 when it does not fit.
static int32_t str_len(const uint8_t *b, uint32_t len) {
    if (len < 4) return -1;
    int32_t n = (int32_t)be32(b);
    if (n < 0) return 0;  // null string: echoed as empty
    if ((uint32_t)n > len - 4) return -1;
    return n;
}

static int answer_connect(struct conn *c, const uint8_t *p, uint32_t len) {
    // protocolVersion i32, lastZxidSeen i64, timeOut i32, sessionId i64,
    // passwd buffer, [readOnly bool]
    if (len < 28) return -1;
    int32_t timeout = (int32_t)be32(p + 12);
    uint64_t sid = be64(p + 16);
    int32_t plen = (int32_t)be32(p + 24);
    if (plen < -1 || (plen > 0 && (uint32_t)plen > len - 28)) return -1;
    uint32_t end = 28 + (plen > 0 ? plen : 0);
    int has_ro = len > end;
    if (timeout < 4000) timeout = 4000;  // ZooKeeper's defaults: 2 and 20 ticks of 2 s
    if (timeout > 40000) timeout = 40000;
    if (sid == 0) sid = (0x7full << 56) | ++session_seq;
    uint32_t body = 4 + 4 + 8 + 4 + 16 + (has_ro ? 1 : 0);
    uint8_t *o = out_room(c, 4 + body);
    if (!o) return -1;
    o = put32(o, body);
    o = put32(o, 0);  // protocolVersion
    o = put32(o, (uint32_t)timeout);
    o = put64(o, sid);
    o = put32(o, 16);
    for (int i = 0; i < 16; i++) *o++ = (uint8_t)(sid >> (i % 8 * 8)) ^ 0x5a;
    if (has_ro) *o = 0;
    c->connected = 1;
    st.connects++;
    return 0;
}

// ---------------------------------------------------------------- log

#define LOG_FILE_BYTES (64u << 20)
#define LOG_BLOCK 4096u
#define LOG_BATCH_MAX (4u << 20)

static int log_fd = -1;
static uint64_t log_off;
static uint8_t *log_stage[2];
static uint32_t log_stage_len[2];
static int log_next;      // the batch taking writes; !log_next is in flight
static int log_inflight;
static struct conn **batch_conns[2];
static uint32_t batch_n[2], batch_cap[2];

static void log_open(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/request-floor.log", dir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) die("open log");
    static uint8_t zeros[1 << 20];
    for (uint32_t off = 0; off < LOG_FILE_BYTES; off += sizeof zeros)
        if (write(fd, zeros, sizeof zeros) != (ssize_t)sizeof zeros) die("zero-fill log");
    if (fsync(fd)) die("fsync log");
    close(fd);
    log_fd = open(path, O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
    if (log_fd < 0) die("open log O_DIRECT|O_DSYNC");
    for (int b = 0; b < 2; b++)
        if (posix_memalign((void **)&log_stage[b], LOG_BLOCK, LOG_BATCH_MAX + LOG_BLOCK)) die("memalign");
    printf("log: %s, %u MiB zero-filled, O_DIRECT|O_DSYNC, one write per batch\n", path,
           LOG_FILE_BYTES >> 20);
}

// Puts c's reply to the frame being answered into batch b's held replies.
static void hold(struct conn *c, int b) {
    redirect = &c->held[b];
    if (c->in_batch[b]) return;
    if (batch_n[b] == batch_cap[b]) {
        batch_cap[b] = batch_cap[b] ? batch_cap[b] * 2 : 256;
        batch_conns[b] = realloc(batch_conns[b], batch_cap[b] * sizeof *batch_conns[b]);
        if (!batch_conns[b]) die("realloc");
    }
    batch_conns[b][batch_n[b]++] = c;
    c->in_batch[b] = 1;
}

// A write's record (its frame) joins the batch being built; -1 past the bound.
static int log_append(const uint8_t *frame, uint32_t len) {
    int b = log_next;
    if (log_stage_len[b] + 4 + len > LOG_BATCH_MAX) return -1;
    uint8_t *p = put32(log_stage[b] + log_stage_len[b], len);
    memcpy(p, frame, len);
    log_stage_len[b] += 4 + len;
    return 0;
}

static int is_write_op(int32_t type) {
    return type == 5 || type == 1 || type == 15 || type == 19 || type == 21 || type == 2 ||
           type == -11;
}

static int answer_frame(struct conn *c, const uint8_t *p, uint32_t len);

// One frame (without its length). 0, or -1: close the connection now.
static int answer(struct conn *c, const uint8_t *p, uint32_t len) {
    st.frames++;
    if (!c->connected) return answer_connect(c, p, len);
    if (len < 8) return -1;
    if (log_fd >= 0) {
        int nb = log_next, ib = !log_next;
        if (is_write_op((int32_t)be32(p + 4))) {
            if (log_append(p, len)) return -1;
            hold(c, nb);
        } else if (c->in_batch[nb]) {
            hold(c, nb);
        } else if (c->in_batch[ib]) {
            hold(c, ib);
        }
    }
    int r = answer_frame(c, p, len);
    redirect = NULL;
    return r;
}

static int answer_frame(struct conn *c, const uint8_t *p, uint32_t len) {
    int32_t xid = (int32_t)be32(p), type = (int32_t)be32(p + 4);
    const uint8_t *b = p + 8;
    uint32_t blen = len - 8;
    uint8_t *o;
    int32_t n;
    switch (type) {
    case 4:  // getData{path, watch} -> {data, stat}
        st.reads++;
        o = reply(c, xid, zxid, 0, 4 + value_bytes + STAT_BYTES);
        if (!o) return -1;
        o = put32(o, value_bytes);
        memcpy(o, value, value_bytes);
        put_stat(o + value_bytes, zxid, (int32_t)zxid, (int32_t)value_bytes);
        return 0;
    case 5: {  // setData{path, data, version} -> {stat}
        st.writes++;
        n = str_len(b, blen);
        int32_t dlen = 0;
        if (n >= 0 && blen >= 4 + (uint32_t)n + 4) dlen = (int32_t)be32(b + 4 + n);
        if (dlen < 0) dlen = 0;
        zxid++;
        o = reply(c, xid, zxid, 0, STAT_BYTES);
        if (!o) return -1;
        put_stat(o, zxid, (int32_t)zxid, dlen);
        return 0;
    }
    case 1: case 15: case 19: case 21:  // create{path, ...} -> {path[, stat]}
        st.other++;
        n = str_len(b, blen);
        if (n < 0) return -1;
        zxid++;
        o = reply(c, xid, zxid, 0, 4 + n + (type == 1 ? 0 : STAT_BYTES));
        if (!o) return -1;
        memcpy(o, b, 4 + n);
        if (be32(b) == 0xffffffffu) put32(o, 0);
        if (type != 1) put_stat(o + 4 + n, zxid, 0, 0);
        return 0;
    case 9:  // sync{path} -> {path}
        st.other++;
        n = str_len(b, blen);
        if (n < 0) return -1;
        o = reply(c, xid, zxid, 0, 4 + n);
        if (!o) return -1;
        memcpy(o, b, 4 + n);
        if (be32(b) == 0xffffffffu) put32(o, 0);
        return 0;
    case 2:  // delete
        st.other++;
        zxid++;
        return reply(c, xid, zxid, 0, 0) ? 0 : -1;
    case 3:  // exists -> {stat}
        st.other++;
        o = reply(c, xid, zxid, 0, STAT_BYTES);
        if (!o) return -1;
        put_stat(o, zxid, 0, (int32_t)value_bytes);
        return 0;
    case 8:  // getChildren -> {children: empty}
        st.other++;
        o = reply(c, xid, zxid, 0, 4);
        if (!o) return -1;
        put32(o, 0);
        return 0;
    case 12:  // getChildren2 -> {children: empty, stat}
        st.other++;
        o = reply(c, xid, zxid, 0, 4 + STAT_BYTES);
        if (!o) return -1;
        put_stat(put32(o, 0), zxid, 0, 0);
        return 0;
    case 106:  // addWatch -> ErrorResponse{0}
        st.other++;
        o = reply(c, xid, zxid, 0, 4);
        if (!o) return -1;
        put32(o, 0);
        return 0;
    case -11:  // closeSession: header with a new zxid, then close
        st.other++;
        zxid++;
        if (!reply(c, xid, zxid, 0, 0)) return -1;
        c->closing = 1;
        return 0;
    default:  // ping (11) and everything else: header only
        st.other++;
        return reply(c, xid, zxid, 0, 0) ? 0 : -1;
    }
}

// A four-letter word as a fresh connection's first 4 bytes: 1 answered
// (close after the reply), 0 not one.
static int four_letter(struct conn *c, const uint8_t *p) {
    char text[512];
    int n;
    if (!memcmp(p, "srvr", 4) || !memcmp(p, "stat", 4)) {
        n = snprintf(text, sizeof text,
                     "Zookeeper version: request-floor (no tree, no log)\n"
                     "Latency min/avg/max: 0/0.0/0\nReceived: %llu\nSent: %llu\n"
                     "Connections: %d\nOutstanding: 0\nZxid: 0x%llx\nMode: standalone\n"
                     "Node count: 0\n",
                     (unsigned long long)st.frames, (unsigned long long)st.frames, conns_open,
                     (unsigned long long)zxid);
    } else if (!memcmp(p, "ruok", 4)) {
        n = snprintf(text, sizeof text, "imok");
    } else if (!memcmp(p, "isro", 4)) {
        n = snprintf(text, sizeof text, "rw");
    } else {
        return 0;
    }
    uint8_t *o = out_room(c, n);
    if (o) memcpy(o, text, n);
    c->closing = 1;
    return 1;
}

static int stash(struct conn *c, const uint8_t *d, uint32_t n) {
    if (c->inlen + n > c->incap) {
        uint32_t cap = c->incap ? c->incap : 4096;
        while (cap < c->inlen + n) cap *= 2;
        uint8_t *b = realloc(c->in, cap);
        if (!b) die("realloc");
        c->in = b;
        c->incap = cap;
    }
    memcpy(c->in + c->inlen, d, n);
    c->inlen += n;
    return 0;
}

// A frame's length word: -1 when it closes the connection, 1 when it was a
// four-letter word (answered), else 0 with *flen set.
static int frame_len(struct conn *c, const uint8_t *p, uint32_t *flen) {
    if (!c->connected && four_letter(c, p)) return 1;
    uint32_t v = be32(p);
    if (v > MAX_FRAME) return -1;
    *flen = v;
    return 0;
}

// Bytes read from a connection: answers every complete frame, keeps a
// partial one. -1: close the connection now.
static int take_bytes(struct conn *c, const uint8_t *d, uint32_t n) {
    uint32_t flen;
    int r;
    while (n > 0 && !c->closing) {
        if (c->inlen > 0) {  // completing a frame split across reads
            if (c->inlen < 4) {
                uint32_t k = 4 - c->inlen < n ? 4 - c->inlen : n;
                stash(c, d, k);
                d += k;
                n -= k;
                if (c->inlen < 4) return 0;
            }
            if ((r = frame_len(c, c->in, &flen)) != 0) return r < 0 ? -1 : 0;
            uint32_t need = 4 + flen - c->inlen;
            uint32_t k = need < n ? need : n;
            stash(c, d, k);
            d += k;
            n -= k;
            if (c->inlen < 4 + flen) return 0;
            c->inlen = 0;
            if (answer(c, c->in + 4, flen)) return -1;
            continue;
        }
        if (n < 4) return stash(c, d, n);
        if ((r = frame_len(c, d, &flen)) != 0) return r < 0 ? -1 : 0;
        if (n < 4 + flen) return stash(c, d, n);
        if (answer(c, d + 4, flen)) return -1;
        d += 4 + flen;
        n -= 4 + flen;
    }
    return 0;
}

static void mark_dirty(struct conn *c) {
    if (!c->dirty) {
        c->dirty = 1;
        c->next_dirty = dirty_head;
        dirty_head = c;
    }
}

static struct conn *conn_new(int fd) {
    struct conn *c = calloc(1, sizeof *c);
    if (!c) die("calloc");
    c->fd = fd;
    conns_open++;
    st.accepted++;
    return c;
}

static void conn_free(struct conn *c) {
    free(c->held[0].p);
    free(c->held[1].p);
    free(c->in);
    free(c->out);
    free(c->snd);
    free(c);
    conns_open--;
    st.closes++;
}

static int listen_on(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Accepted sockets inherit TCP_NODELAY (the uring variant's direct
    // descriptors have no fd to set it on).
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(s, (void *)&a, sizeof a) || listen(s, 4096)) die("listen");
    return s;
}

// ---------------------------------------------------------------- epoll

static struct conn **by_fd;
static int ep;

static void ep_interest(struct conn *c, uint32_t events) {
    if (c->events == events) return;
    struct epoll_event e = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e)) die("epoll_ctl mod");
    c->events = events;
}

static void ep_close(struct conn *c) {
    close(c->fd);  // also leaves the epoll set
    by_fd[c->fd] = NULL;
    c->closing = 2;  // freed after the turn (it may still be on the dirty list)
}

static void run_epoll(int lfd) {
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    by_fd = calloc(MAX_CONNS, sizeof *by_fd);
    uint8_t *scratch = malloc(SCRATCH);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL}, evs[512];
    if (!by_fd || !scratch) die("malloc");
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e)) die("epoll_ctl listen");
    fcntl(lfd, F_SETFL, O_NONBLOCK);
    struct conn *graveyard[512];
    printf("ready\n");
    fflush(stdout);
    while (!stop_flag) {
        if (snap_flag) {
            snap_flag = 0;
            snapshot();
        }
        int n = epoll_wait(ep, evs, 512, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        int dead = 0;
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {  // the listener
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    if (fd >= MAX_CONNS) {
                        close(fd);
                        continue;
                    }
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = conn_new(fd);
                    nc->events = EPOLLIN;
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = nc};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce)) die("epoll_ctl add");
                    by_fd[fd] = nc;
                }
                continue;
            }
            if (c->closing == 2) continue;
            uint32_t ev = evs[i].events;
            if (ev & EPOLLOUT) mark_dirty(c);  // the flush below is its send
            if (c->closing) {  // only writing what is left: a hang-up ends it
                if (ev & (EPOLLHUP | EPOLLERR)) {
                    ep_close(c);
                    if (!c->dirty) graveyard[dead++] = c;
                }
                continue;
            }
            if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t r = recv(c->fd, scratch, SCRATCH, 0);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) ||
                    (r > 0 && take_bytes(c, scratch, (uint32_t)r))) {
                    ep_close(c);
                    if (!c->dirty) graveyard[dead++] = c;
                    continue;
                }
                mark_dirty(c);
            }
        }
        // One send per connection that has replies (or had EPOLLOUT).
        while (dirty_head) {
            struct conn *c = dirty_head;
            dirty_head = c->next_dirty;
            c->dirty = 0;
            if (c->closing == 2) {
                conn_free(c);
                continue;
            }
            uint32_t pending = c->outlen - c->outoff;
            if (pending) {
                ssize_t r = send(c->fd, c->out + c->outoff, pending, MSG_NOSIGNAL);
                if (r < 0 && errno != EAGAIN && errno != EINTR) {
                    ep_close(c);
                    conn_free(c);
                    continue;
                }
                if (r > 0) {
                    if ((uint32_t)r < pending) st.partial_sends++;
                    c->outoff += r;
                    pending -= r;
                }
                if (!pending) c->outoff = c->outlen = 0;
            }
            if (c->closing && !pending) {
                ep_close(c);
                conn_free(c);
                continue;
            }
            // Replies left: wait for room; above OUT_SOFT stop reading.
            ep_interest(c, (pending ? EPOLLOUT : 0) |
                               (pending > OUT_SOFT || c->closing ? 0 : EPOLLIN));
        }
        for (int i = 0; i < dead; i++) conn_free(graveyard[i]);
    }
}

// ---------------------------------------------------------------- io_uring

static struct io_uring ring;
static struct conn **by_slot;
static struct io_uring_buf_ring *br;
static uint8_t *bufs;
static unsigned nbufs = 1024, buf_size = 16384, br_mask, recycled;
static uint32_t gen_seq;
static int use_zc, sqpoll;

static inline uint64_t ud(int op, uint32_t gen, uint32_t slot) {
    return (uint64_t)op << 56 | (uint64_t)(gen & 0xffffff) << 32 | slot;
}

static struct io_uring_sqe *sqe_get(void) {
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    while (!s) {  // the SQ is full: submit what is there (an extra enter)
        st.sqe_full++;
        io_uring_submit(&ring);
        if (sqpoll) io_uring_sqring_wait(&ring);
        s = io_uring_get_sqe(&ring);
    }
    return s;
}

static void arm_accept(void) {
    struct io_uring_sqe *s = sqe_get();
    io_uring_prep_multishot_accept_direct(s, 0, NULL, NULL, 0);
    s->flags |= IOSQE_FIXED_FILE;  // slot 0: the listener
    io_uring_sqe_set_data64(s, ud(OP_ACCEPT, 0, 0));
}

static void arm_recv(struct conn *c) {
    struct io_uring_sqe *s = sqe_get();
    io_uring_prep_recv_multishot(s, c->fd, NULL, 0, 0);
    s->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    s->buf_group = BGID;
    io_uring_sqe_set_data64(s, ud(OP_RECV, c->gen, c->fd));
    c->recv_armed = 1;
}

static void submit_send(struct conn *c) {
    struct io_uring_sqe *s = sqe_get();
    uint32_t len = c->sndlen - c->sndoff;
    if (use_zc && len >= ZC_MIN) {
        io_uring_prep_send_zc(s, c->fd, c->snd + c->sndoff, len, MSG_NOSIGNAL | MSG_WAITALL, 0);
        st.zc_sends++;
    } else {
        io_uring_prep_send(s, c->fd, c->snd + c->sndoff, len, MSG_NOSIGNAL | MSG_WAITALL);
    }
    s->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(s, ud(OP_SEND, c->gen, c->fd));
    c->send_inflight = 1;
}

// The batch being built goes to the log when none is in flight.
static void log_submit(void) {
    int b = log_next;
    if (log_fd < 0 || log_inflight || !log_stage_len[b]) return;
    uint32_t n = (log_stage_len[b] + LOG_BLOCK - 1) / LOG_BLOCK * LOG_BLOCK;
    memset(log_stage[b] + log_stage_len[b], 0, n - log_stage_len[b]);
    if (log_off + n > LOG_FILE_BYTES) log_off = 0;
    struct io_uring_sqe *s = sqe_get();
    io_uring_prep_write(s, log_fd, log_stage[b], n, log_off);
    io_uring_sqe_set_data64(s, ud(OP_LOGW, 0, 0));
    log_off += n;
    log_inflight = 1;
    log_next = !b;
    st.log_writes++;
    st.log_bytes += n;
}

// The batch in flight is durable: its connections' held replies go out.
static void log_done(int res) {
    int b = !log_next;
    if (res < 0) {
        errno = -res;
        die("log write");
    }
    for (uint32_t i = 0; i < batch_n[b]; i++) {
        struct conn *c = batch_conns[b][i];
        struct hbuf *h = &c->held[b];
        c->in_batch[b] = 0;
        if (h->len) {
            uint8_t *o = out_room(c, h->len);
            if (o) memcpy(o, h->p, h->len);
            else c->closing = 1;  // past OUT_MAX: close, as for any reply
            h->len = 0;
        }
        mark_dirty(c);
    }
    batch_n[b] = 0;
    log_stage_len[b] = 0;
    log_inflight = 0;
}

static void recycle(unsigned bid) {
    io_uring_buf_ring_add(br, bufs + (size_t)bid * buf_size, buf_size, bid, br_mask, recycled++);
}

// Closes a connection once nothing of it is in the kernel: a cancel ends
// its multishot recv (whose last completion brings it back here), then the
// slot is closed. (Not IORING_OP_SHUTDOWN: that one always goes to an io-wq
// worker thread.)
static void uring_finish(struct conn *c) {
    if (c->send_inflight) return;
    if (c->recv_armed) {
        if (!c->cancel_sent) {
            struct io_uring_sqe *s = sqe_get();
            io_uring_prep_cancel64(s, ud(OP_RECV, c->gen, c->fd), 0);
            s->flags |= IOSQE_CQE_SKIP_SUCCESS;
            io_uring_sqe_set_data64(s, ud(OP_CANCEL, c->gen, c->fd));
            c->cancel_sent = 1;
        }
        return;
    }
    struct io_uring_sqe *s = sqe_get();
    io_uring_prep_close_direct(s, c->fd);
    s->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(s, ud(OP_CLOSE, c->gen, c->fd));
    by_slot[c->fd] = NULL;
    c->closing = 2;  // freed when it leaves the dirty list
}

// A send (or its zero-copy notification) finished with res.
static void send_done(struct conn *c, int res) {
    if (res < 0) {
        c->send_inflight = 0;
        c->outlen = 0;
        c->closing = 1;
    } else if ((uint32_t)res < c->sndlen - c->sndoff) {
        st.partial_sends++;
        c->sndoff += res;
        submit_send(c);  // the rest, before anything queued since
        return;
    } else {
        c->send_inflight = 0;
    }
    mark_dirty(c);
}

static void on_cqe(struct io_uring_cqe *cqe) {
    uint64_t u = io_uring_cqe_get_data64(cqe);
    int op = u >> 56;
    uint32_t gen = (u >> 32) & 0xffffff, slot = (uint32_t)u;
    int res = cqe->res;
    struct conn *c = slot < MAX_CONNS ? by_slot[slot] : NULL;
    if (c && (c->gen & 0xffffff) != gen) c = NULL;  // a closed conn's late completion
    switch (op) {
    case OP_ACCEPT:
        if (res >= 0 && res < MAX_CONNS) {
            c = conn_new(res);
            c->gen = ++gen_seq;
            by_slot[res] = c;
            arm_recv(c);
        } else if (res >= 0) {
            struct io_uring_sqe *s = sqe_get();
            io_uring_prep_close_direct(s, res);
            s->flags |= IOSQE_CQE_SKIP_SUCCESS;
            io_uring_sqe_set_data64(s, ud(OP_CLOSE, 0, res));
        } else if (res != -ECANCELED) {
            fprintf(stderr, "request-floor: accept: %s\n", strerror(-res));
        }
        if (!(cqe->flags & IORING_CQE_F_MORE) && !stop_flag) arm_accept();
        return;
    case OP_RECV:
        if (res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
            unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
            if (c && !c->closing) {
                if (take_bytes(c, bufs + (size_t)bid * buf_size, (uint32_t)res)) {
                    c->outlen = 0;  // a bad frame: close without the replies
                    c->closing = 1;
                }
                mark_dirty(c);
            }
            recycle(bid);
        }
        if (!c || (cqe->flags & IORING_CQE_F_MORE)) return;
        c->recv_armed = 0;
        if (res == -ENOBUFS && !c->closing) {  // the buffer ring ran dry
            st.rearm_enobufs++;
            arm_recv(c);
        } else if (res > 0 && !c->closing) {  // the kernel ended the multishot
            st.rearm_other++;
            arm_recv(c);
        } else {  // EOF, error or our cancel
            c->closing = 1;
            mark_dirty(c);
        }
        return;
    case OP_LOGW:
        log_done(res);
        return;
    case OP_SEND:
        if (!c) return;
        if (cqe->flags & IORING_CQE_F_NOTIF) {  // zero-copy: buffer released
            c->zc_wait = 0;
            send_done(c, c->zc_res);
        } else if (cqe->flags & IORING_CQE_F_MORE) {  // zero-copy result; notification follows
            c->zc_wait = 1;
            c->zc_res = res;
        } else {
            send_done(c, res);
        }
        return;
    default:  // close/cancel failures: nothing to do
        return;
    }
}

static void uring_flush(void) {
    while (dirty_head) {
        struct conn *c = dirty_head;
        dirty_head = c->next_dirty;
        c->dirty = 0;
        if (c->closing == 2) {
            conn_free(c);
            continue;
        }
        if (!c->send_inflight && c->outlen) {
            // The queued replies go to the kernel; a fresh queue starts.
            uint8_t *b = c->snd;
            uint32_t cap = c->sndcap;
            c->snd = c->out;
            c->sndcap = c->outcap;
            c->sndlen = c->outlen;
            c->sndoff = 0;
            c->out = b;
            c->outcap = cap;
            c->outlen = 0;
            submit_send(c);
        }
        if (c->closing && !c->in_batch[0] && !c->in_batch[1]) {
            uring_finish(c);
            if (c->closing == 2) {
                conn_free(c);
                continue;
            }
        }
    }
}

static void setup_ring(int lfd, int sq_cpu, unsigned sq_idle_ms) {
    struct io_uring_params p;
    unsigned want = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                    IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    if (sqpoll) want |= IORING_SETUP_SQPOLL | IORING_SETUP_SQ_AFF;
    int r;
    for (;;) {
        memset(&p, 0, sizeof p);
        p.flags = want;
        p.cq_entries = 32768;
        p.sq_thread_cpu = sq_cpu;
        p.sq_thread_idle = sq_idle_ms;
        r = io_uring_queue_init_params(4096, &ring, &p);
        if (r != -EINVAL) break;
        if (want & IORING_SETUP_DEFER_TASKRUN) {
            printf("note: the kernel refused IORING_SETUP_DEFER_TASKRUN%s: running without it\n",
                   sqpoll ? " with SQPOLL (it is only for rings without a poller thread)" : "");
            want &= ~IORING_SETUP_DEFER_TASKRUN;
        } else if (want & IORING_SETUP_SINGLE_ISSUER) {
            printf("note: the kernel refused IORING_SETUP_SINGLE_ISSUER: running without it\n");
            want &= ~IORING_SETUP_SINGLE_ISSUER;
        } else {
            break;
        }
    }
    if (r < 0) {
        errno = -r;
        die("io_uring_queue_init_params");
    }
    printf("ring: flags 0x%x (single_issuer %d defer_taskrun %d sqpoll %d sq_cpu %d sq_idle_ms %u) "
           "features 0x%x\n",
           p.flags, !!(p.flags & IORING_SETUP_SINGLE_ISSUER),
           !!(p.flags & IORING_SETUP_DEFER_TASKRUN), !!(p.flags & IORING_SETUP_SQPOLL),
           sqpoll ? sq_cpu : -1, sqpoll ? sq_idle_ms : 0, p.features);
    if ((r = io_uring_register_ring_fd(&ring)) < 0)
        printf("note: registering the ring fd failed (%s)\n", strerror(-r));
    // The fixed file table: slot 0 the listener, the rest for accepted
    // sockets (direct descriptors, allocated by the kernel).
    if ((r = io_uring_register_files_sparse(&ring, MAX_CONNS)) < 0) {
        errno = -r;
        die("io_uring_register_files_sparse");
    }
    if ((r = io_uring_register_files_update(&ring, 0, &lfd, 1)) < 0) {
        errno = -r;
        die("io_uring_register_files_update");
    }
    if ((r = io_uring_register_file_alloc_range(&ring, 1, MAX_CONNS - 1)) < 0)
        printf("note: file_alloc_range: %s\n", strerror(-r));
    // The provided-buffer ring (liburing 2.3 has no io_uring_setup_buf_ring:
    // map it and register it here).
    size_t ring_bytes = (size_t)nbufs * sizeof(struct io_uring_buf);
    br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (br == MAP_FAILED) die("mmap buf ring");
    bufs = mmap(NULL, (size_t)nbufs * buf_size, PROT_READ | PROT_WRITE,
                MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
    if (bufs == MAP_FAILED) die("mmap bufs");
    struct io_uring_buf_reg reg = {.ring_addr = (uintptr_t)br, .ring_entries = nbufs, .bgid = BGID};
    if ((r = io_uring_register_buf_ring(&ring, &reg, 0)) < 0) {
        errno = -r;
        die("io_uring_register_buf_ring");
    }
    io_uring_buf_ring_init(br);
    br_mask = io_uring_buf_ring_mask(nbufs);
    for (unsigned i = 0; i < nbufs; i++) recycle(i);
    io_uring_buf_ring_advance(br, recycled);
    recycled = 0;
    printf("buffers: %u x %u bytes provided; fixed file table of %d; send zero-copy %s\n", nbufs,
           buf_size, MAX_CONNS, use_zc ? "on for >= 4096 bytes" : "off");
    fflush(stdout);
}

static void run_uring(int lfd, int sq_cpu, unsigned sq_idle_ms) {
    by_slot = calloc(MAX_CONNS, sizeof *by_slot);
    if (!by_slot) die("calloc");
    setup_ring(lfd, sq_cpu, sq_idle_ms);
    arm_accept();
    printf("ready\n");
    fflush(stdout);
    while (!stop_flag) {
        if (snap_flag) {
            snap_flag = 0;
            snapshot();
        }
        int r;
        if (sqpoll) {
            // The poller submits; enter only to wait when nothing is there.
            r = io_uring_submit(&ring);
            if (r >= 0 && !io_uring_cq_ready(&ring)) {
                struct io_uring_cqe *cqe;
                r = io_uring_wait_cqe(&ring, &cqe);
            }
        } else {
            // One io_uring_enter a turn: submits the turn's sends and
            // re-arms, runs the deferred completions, waits for one.
            r = io_uring_submit_and_wait(&ring, 1);
        }
        if (r < 0 && r != -EINTR && r != -ETIME && r != -EAGAIN && r != -EBUSY) {
            errno = -r;
            die("io_uring_enter");
        }
        unsigned head, seen = 0;
        struct io_uring_cqe *cqe;
        io_uring_for_each_cqe(&ring, head, cqe) {
            on_cqe(cqe);
            seen++;
        }
        io_uring_cq_advance(&ring, seen);
        if (recycled) {
            io_uring_buf_ring_advance(br, recycled);
            recycled = 0;
        }
        log_submit();
        uring_flush();
    }
}

// ---------------------------------------------------------------- main

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s epoll|uring|sqpoll PORT [VALUE_BYTES] [--zc] [--sq-cpu N] "
                "[--sq-idle-ms N] [--bufs N] [--buf-size B] [--log DIR]\n",
                argv[0]);
        return 2;
    }
    const char *variant = argv[1];
    int port = atoi(argv[2]), sq_cpu = -1;
    unsigned sq_idle_ms = 10;
    const char *log_dir = NULL;
    int argi = 3;
    if (argc > 3 && argv[3][0] != '-') value_bytes = (uint32_t)atoi(argv[argi++]);
    for (; argi < argc; argi++) {
        const char *a = argv[argi];
        const char *v = argi + 1 < argc ? argv[argi + 1] : NULL;
        if (!strcmp(a, "--zc")) use_zc = 1;
        else if (!strcmp(a, "--sq-cpu") && v) sq_cpu = atoi(v), argi++;
        else if (!strcmp(a, "--sq-idle-ms") && v) sq_idle_ms = (unsigned)atoi(v), argi++;
        else if (!strcmp(a, "--bufs") && v) nbufs = (unsigned)atoi(v), argi++;
        else if (!strcmp(a, "--buf-size") && v) buf_size = (unsigned)atoi(v), argi++;
        else if (!strcmp(a, "--log") && v) log_dir = v, argi++;
        else {
            fprintf(stderr, "request-floor: unknown option %s\n", a);
            return 2;
        }
    }
    if (value_bytes > MAX_FRAME / 2 || !nbufs || (nbufs & (nbufs - 1)) || nbufs > 32768 ||
        buf_size < 64) {
        fprintf(stderr, "request-floor: bad value size or buffer ring (--bufs a power of 2 <= 32768)\n");
        return 2;
    }
    int is_epoll = !strcmp(variant, "epoll"), is_uring = !strcmp(variant, "uring");
    sqpoll = !strcmp(variant, "sqpoll");
    if (!is_epoll && !is_uring && !sqpoll) {
        fprintf(stderr, "request-floor: variant %s: want epoll, uring or sqpoll\n", variant);
        return 2;
    }
    if (sqpoll && sq_cpu < 0) {  // the poller shares this process's first CPU
        cpu_set_t set;
        sched_getaffinity(0, sizeof set, &set);
        for (sq_cpu = 0; sq_cpu < CPU_SETSIZE && !CPU_ISSET(sq_cpu, &set); sq_cpu++) {}
    }
    value = malloc(value_bytes + 1);
    if (!value) die("malloc");
    memset(value, 'x', value_bytes);
    struct sigaction sa = {.sa_handler = on_signal};  // no SA_RESTART: waits return EINTR
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (log_dir && is_epoll) {
        fprintf(stderr, "request-floor: --log is for the uring and sqpoll variants\n");
        return 2;
    }
    if (log_dir) log_open(log_dir);
    int lfd = listen_on(port);
    printf("request-floor pid %d variant %s port %d value_bytes %u\n", getpid(), variant, port,
           value_bytes);
    fflush(stdout);
    if (is_epoll) run_epoll(lfd);
    else run_uring(lfd, sq_cpu, sq_idle_ms);
    totals(variant);
    return 0;
}
