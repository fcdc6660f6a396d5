// One ZooKeeper session's synchronous round trips, measured by the leanest
// client this machine allows: one blocking socket, one send() per request,
// one recv() of the reply, no runtime, no allocation per request. The same
// client is pointed at every server (ringkeeper, Apache ZooKeeper,
// tuning/request-floor.c), so what differs between them is the server alone
// (issue 27 §3: one session's round trips against the bare path's).
//
// Phases, in order, COUNT requests each, one at a time:
//   create  /rtt-PID-I (VALUE_BYTES of data, open ACL, persistent)
//   set     setData on each, version -1
//   get     getData on each, no watch
//   delete  each, version -1
// A reply whose error code is not 0 stops the run (exit 1) and names it.
//
// With RTT_AFTER_PHASE set, that shell command runs after each phase has
// reported (tuning/idle-instructions.sh dumps a profiler's counts there,
// so that each phase is counted apart).
//
// Build and run (tuning/idle-latency.sh does both):
//   cc -O2 -Wall -o rtt-client tuning/rtt-client.c
//   ./rtt-client HOST PORT [COUNT] [VALUE_BYTES]
// Prints one line per phase:
//   rtt create p50 63.0 us p90 80.0 us p99 120.0 us
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAX (1 << 20)

static int sock;
static int32_t xid = 1;
static unsigned char out[FRAME_MAX];
static unsigned char in[FRAME_MAX];

static void die(const char *what) {
    perror(what);
    exit(1);
}

static size_t put_i32(size_t at, int32_t v) {
    uint32_t b = htonl((uint32_t)v);
    memcpy(out + at, &b, 4);
    return at + 4;
}

static size_t put_i64(size_t at, int64_t v) {
    at = put_i32(at, (int32_t)((uint64_t)v >> 32));
    return put_i32(at, (int32_t)(uint64_t)v);
}

static size_t put_bytes(size_t at, const void *p, int32_t n) {
    at = put_i32(at, n);
    if (n > 0) {
        memcpy(out + at, p, (size_t)n);
        at += (size_t)n;
    }
    return at;
}

static size_t put_str(size_t at, const char *s) { return put_bytes(at, s, (int32_t)strlen(s)); }

static int32_t get_i32(const unsigned char *p) {
    uint32_t b;
    memcpy(&b, p, 4);
    return (int32_t)ntohl(b);
}

// Sends out[4..end) as one frame (its length in out[0..4]).
static void send_frame(size_t end) {
    put_i32(0, (int32_t)(end - 4));
    size_t done = 0;
    while (done < end) {
        ssize_t n = send(sock, out + done, end - done, 0);
        if (n <= 0)
            die("send");
        done += (size_t)n;
    }
}

// Reads one frame into `in`; returns its length.
static int32_t recv_frame(void) {
    unsigned char len_bytes[4];
    if (recv(sock, len_bytes, 4, MSG_WAITALL) != 4)
        die("recv length");
    int32_t len = get_i32(len_bytes);
    if (len < 0 || len > FRAME_MAX) {
        fprintf(stderr, "frame length %d out of range\n", len);
        exit(1);
    }
    if (len > 0 && recv(sock, in, (size_t)len, MSG_WAITALL) != len)
        die("recv frame");
    return len;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

// One request (its body from out[12..end)): sends it, waits for the reply
// of the same xid (skipping watch events, xid -1), checks its error code.
static double round_trip(int32_t type, size_t end, const char *phase) {
    int32_t my_xid = xid++;
    put_i32(4, my_xid);
    put_i32(8, type);
    double start = now_us();
    send_frame(end);
    for (;;) {
        int32_t len = recv_frame();
        if (len < 16) {
            fprintf(stderr, "%s: reply of %d bytes\n", phase, len);
            exit(1);
        }
        if (get_i32(in) != my_xid)
            continue;
        double took = now_us() - start;
        int32_t err = get_i32(in + 12);
        if (err != 0) {
            fprintf(stderr, "%s: error %d\n", phase, err);
            exit(1);
        }
        return took;
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *phase, double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("rtt %s p50 %.1f us p90 %.1f us p99 %.1f us\n", phase, v[n / 2], v[n * 9 / 10],
           v[n * 99 / 100]);
    fflush(stdout);
    const char *after = getenv("RTT_AFTER_PHASE");
    if (after && *after && system(after) != 0) {
        fprintf(stderr, "RTT_AFTER_PHASE failed after %s\n", phase);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST PORT [COUNT] [VALUE_BYTES]\n", argv[0]);
        return 2;
    }
    int count = argc > 3 ? atoi(argv[3]) : 2000;
    int value_bytes = argc > 4 ? atoi(argv[4]) : 25;
    if (count < 1 || value_bytes < 0 || value_bytes > 65536) {
        fprintf(stderr, "COUNT must be >= 1 and VALUE_BYTES in 0..65536\n");
        return 2;
    }
    char *value = malloc((size_t)value_bytes + 1);
    memset(value, 'v', (size_t)value_bytes);
    double *took = calloc((size_t)count, sizeof *took);

    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
        fprintf(stderr, "bad host %s\n", argv[1]);
        return 2;
    }
    sock = socket(AF_INET, SOCK_STREAM, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    int one = 1;
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
    // passwd (16 zero bytes), readOnly.
    static const char zero_password[16];
    size_t at = put_i32(4, 0);
    at = put_i64(at, 0);
    at = put_i32(at, 30000);
    at = put_i64(at, 0);
    at = put_bytes(at, zero_password, 16);
    out[at++] = 0;
    send_frame(at);
    if (recv_frame() < 20) {
        fprintf(stderr, "short ConnectResponse\n");
        return 1;
    }

    char path[64];
    int pid = (int)getpid();
    for (int i = 0; i < count; i++) {  // create
        snprintf(path, sizeof path, "/rtt-%d-%d", pid, i);
        at = put_str(12, path);
        at = put_bytes(at, value, value_bytes);
        at = put_i32(at, 1);  // one ACL: world:anyone, all permissions
        at = put_i32(at, 31);
        at = put_str(at, "world");
        at = put_str(at, "anyone");
        at = put_i32(at, 0);  // persistent
        took[i] = round_trip(1, at, "create");
    }
    report("create", took, count);
    for (int i = 0; i < count; i++) {  // setData
        snprintf(path, sizeof path, "/rtt-%d-%d", pid, i);
        at = put_str(12, path);
        at = put_bytes(at, value, value_bytes);
        at = put_i32(at, -1);
        took[i] = round_trip(5, at, "set");
    }
    report("set", took, count);
    for (int i = 0; i < count; i++) {  // getData
        snprintf(path, sizeof path, "/rtt-%d-%d", pid, i);
        at = put_str(12, path);
        out[at++] = 0;
        took[i] = round_trip(4, at, "get");
    }
    report("get", took, count);
    for (int i = 0; i < count; i++) {  // delete
        snprintf(path, sizeof path, "/rtt-%d-%d", pid, i);
        at = put_str(12, path);
        at = put_i32(at, -1);
        took[i] = round_trip(2, at, "delete");
    }
    report("delete", took, count);
    close(sock);
    return 0;
}
