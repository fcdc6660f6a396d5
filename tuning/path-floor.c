// The floor this machine puts under one session's write through a follower
// of a 3-member ensemble: ZooKeeper's path with no server in it. Four
// processes on loopback, blocking sockets, 64-byte messages, nothing else:
//   client -> F1 (request) -> L (REQUEST) -> F1, F2 (PROPOSAL); each member
//   appends 4 KiB to its own zero-filled log with O_DIRECT|O_DSYNC, as
//   ringkeeper's log does, and ACKs when that write completes; L commits
//   on 2 of 3 durable (its own write counts) -> F1, F2 (COMMIT) -> F1
//   replies to the client.
// L sends the PROPOSALs before its own write. Two ways to run the writes,
// both measured, since neither is always faster on a small VM:
//   thread: on a thread of each member's own, which sends the ACK, so a
//           follower takes the COMMIT (and replies) without waiting for
//           its own write, as ZooKeeper's members and ringkeeper's do;
//   inline: in the member's socket loop (no hand-off, fewer wake-ups, but
//           a follower reads the COMMIT only after its own write).
// The same client also sends reads that F1 answers at once: the round trip
// the target is stated in.
//
// Build and run (tuning/follower-latency.sh does both):
//   cc -O2 -pthread -o path-floor tuning/path-floor.c
//   ./path-floor DIR [COUNT]      (DIR on the servers' disk)
// Prints, per way:
//   floor thread read p50 27.0 us write p50 301.0 us p90 371.0 us
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define BLOCK 4096
#define LOG_BYTES (16L << 20)

static const char *dir;
static int inline_writes;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void nodelay(int s) {
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int listen_any(int *port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(s, (void *)&a, sizeof a) || listen(s, 4) || getsockname(s, (void *)&a, &len))
        die("listen");
    *port = ntohs(a.sin_port);
    return s;
}

static int connect_to(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(s, (void *)&a, sizeof a)) die("connect");
    nodelay(s);
    return s;
}

static int accept_one(int l) {
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    nodelay(s);
    return s;
}

// A message: kind, then a zxid. A peer that closes ends this process.
struct msg {
    char kind;
    uint64_t zxid;
    char pad[MSG - 16];
};

static void recv_msg(int s, struct msg *m) {
    size_t got = 0;
    while (got < sizeof *m) {
        ssize_t r = recv(s, (char *)m + got, sizeof *m - got, 0);
        if (r <= 0) exit(0);
        got += r;
    }
}

static void send_msg(int s, char kind, uint64_t zxid) {
    struct msg m = {.kind = kind, .zxid = zxid};
    if (send(s, &m, sizeof m, 0) != sizeof m) exit(0);
}

// A member's log: zero-filled first (a plain overwrite afterwards, as
// ringkeeper's prepared segments), then one O_DIRECT|O_DSYNC block per
// txn and an ACK on `ack_fd` once it is durable. With a writer thread,
// zxids reach it on a pipe.
struct log {
    char path[4096];
    int fd;
    void *block;
    off_t offset;
    int jobs[2];
    int ack_fd;
    pthread_mutex_t *send_lock;
};

static void log_write_and_ack(struct log *log, uint64_t zxid) {
    if (pwrite(log->fd, log->block, BLOCK, log->offset) != BLOCK) die("pwrite");
    log->offset = (log->offset + BLOCK) % LOG_BYTES;
    pthread_mutex_lock(log->send_lock);
    send_msg(log->ack_fd, 'A', zxid);
    pthread_mutex_unlock(log->send_lock);
}

static void *log_writer(void *arg) {
    struct log *log = arg;
    uint64_t zxid;
    while (read(log->jobs[0], &zxid, sizeof zxid) == sizeof zxid) log_write_and_ack(log, zxid);
    return NULL;
}

static void log_start(struct log *log, const char *name, int ack_fd, pthread_mutex_t *lock) {
    snprintf(log->path, sizeof log->path, "%s/rk-path-floor-%d-%s.log", dir, getppid(), name);
    int fd = open(log->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    char *zeros = calloc(1, 1 << 20);
    for (long i = 0; i < LOG_BYTES >> 20; i++)
        if (write(fd, zeros, 1 << 20) != 1 << 20) die("zero-fill");
    if (fsync(fd)) die("fsync");
    close(fd);
    free(zeros);
    log->fd = open(log->path, O_RDWR | O_DIRECT | O_DSYNC);
    if (log->fd < 0 || posix_memalign(&log->block, BLOCK, BLOCK)) die("open log O_DIRECT");
    memset(log->block, 'x', BLOCK);
    log->offset = 0;
    log->ack_fd = ack_fd;
    log->send_lock = lock;
    if (inline_writes) return;
    if (pipe(log->jobs)) die("pipe");
    pthread_t t;
    pthread_create(&t, NULL, log_writer, log);
}

static void log_append(struct log *log, uint64_t zxid) {
    if (inline_writes)
        log_write_and_ack(log, zxid);
    else if (write(log->jobs[1], &zxid, sizeof zxid) != sizeof zxid)
        die("log job");
}

static struct log *member_log;

static void remove_log(void) {
    if (member_log) unlink(member_log->path);
}

static void on_term(int sig) {
    (void)sig;
    remove_log(); // unlink(2) is async-signal-safe
    _exit(0);
}

static void follower(char name, int leader_port, int client_listener) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct log log;
    int lead = connect_to(leader_port);
    send_msg(lead, name, 0);
    char log_name[2] = {name, 0};
    log_start(&log, log_name, lead, &lock);
    member_log = &log;
    int client = client_listener >= 0 ? accept_one(client_listener) : -1;
    struct pollfd fds[2] = {{.fd = lead, .events = POLLIN}, {.fd = client, .events = POLLIN}};
    struct msg m;
    for (;;) {
        if (poll(fds, client >= 0 ? 2 : 1, -1) < 0) continue;
        if (client >= 0 && fds[1].revents) {
            recv_msg(client, &m);
            if (m.kind == 'g') {
                send_msg(client, 'g', 0);
            } else {
                pthread_mutex_lock(&lock);
                send_msg(lead, 'R', 0);
                pthread_mutex_unlock(&lock);
            }
        }
        if (fds[0].revents) {
            recv_msg(lead, &m);
            if (m.kind == 'P') log_append(&log, m.zxid);
            if (m.kind == 'C' && client >= 0) send_msg(client, 'C', m.zxid);
        }
    }
}

static void leader(int listener) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct log log;
    int a = accept_one(listener), b = accept_one(listener);
    struct msg m;
    recv_msg(a, &m);
    int f1 = m.kind == '1' ? a : b, f2 = m.kind == '1' ? b : a;
    recv_msg(b, &m);
    int own[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, own)) die("socketpair");
    log_start(&log, "L", own[1], &lock);
    member_log = &log;
    struct pollfd fds[3] = {{.fd = f1, .events = POLLIN}, {.fd = f2, .events = POLLIN},
                            {.fd = own[0], .events = POLLIN}};
    // One txn in flight (the client waits for each reply): it commits when
    // the second of its three ACKs arrives.
    uint64_t zxid = 0, durable_count = 0;
    for (;;) {
        if (poll(fds, 3, -1) < 0) continue;
        for (int i = 0; i < 3; i++) {
            if (!fds[i].revents) continue;
            recv_msg(fds[i].fd, &m);
            if (m.kind == 'R') {
                zxid++;
                durable_count = 0;
                send_msg(f1, 'P', zxid);
                send_msg(f2, 'P', zxid);
                log_append(&log, zxid);
            } else if (m.kind == 'A' && m.zxid == zxid && ++durable_count == 2) {
                send_msg(f1, 'C', zxid);
                send_msg(f2, 'C', zxid);
            }
        }
    }
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

// One ensemble of four processes, COUNT reads and COUNT writes.
static void measure(int count) {
    int port_l, port_f1;
    int lis_l = listen_any(&port_l), lis_f1 = listen_any(&port_f1);
    pid_t children[3];
    for (int role = 0; role < 3; role++) {
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGTERM, on_term);
            atexit(remove_log);
            if (role == 0) leader(lis_l);
            if (role == 1) follower('2', port_l, -1);
            follower('1', port_l, lis_f1);
        }
        children[role] = pid;
    }
    close(lis_l);
    close(lis_f1);
    int c = connect_to(port_f1);
    double *reads = calloc(count, sizeof *reads), *writes = calloc(count, sizeof *writes);
    struct msg m;
    for (int i = 0; i < count; i++) {
        double t = now_us();
        send_msg(c, 'g', 0);
        recv_msg(c, &m);
        reads[i] = now_us() - t;
        t = now_us();
        send_msg(c, 'w', 0);
        recv_msg(c, &m);
        writes[i] = now_us() - t;
    }
    close(c);
    for (int i = 0; i < 3; i++) kill(children[i], SIGTERM);
    for (int i = 0; i < 3; i++) waitpid(children[i], NULL, 0);
    qsort(reads, count, sizeof *reads, cmp);
    qsort(writes, count, sizeof *writes, cmp);
    printf("floor %s read p50 %.1f us write p50 %.1f us p90 %.1f us\n",
           inline_writes ? "inline" : "thread", reads[count / 2], writes[count / 2],
           writes[count * 9 / 10]);
    fflush(stdout);
    free(reads);
    free(writes);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [COUNT]\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    int count = argc > 2 ? atoi(argv[2]) : 2000;
    for (inline_writes = 0; inline_writes < 2; inline_writes++) measure(count);
    return 0;
}
