/*
 * pqload: an open-loop TLS 1.3 load generator. One process, one epoll loop, many handshakes in flight.
 *
 *   pqload --host ADDR --port N --rate R --duration-ms D [--groups G1:G2] [--cafile F] [--servername NAME]
 *          [--timeout-ms T] [--max-inflight K] [--seed S] [--latencies]
 *
 * Arrivals form a Poisson process of rate R per second over D ms (exponential gaps from a seeded PRNG,
 * so a seed gives the same schedule every time). Each arrival opens a new TCP connection at its
 * scheduled time and does a full handshake (no resumption); when SSL_connect completes the latency is
 * recorded and the connection is dropped. Nothing waits for anything else: an arrival that finds the
 * generator busy starts late and its lateness is reported (start_lag_ms), and its latency counts from
 * the scheduled time, so a slow generator or server shows up in the figures instead of thinning the
 * load (no coordinated omission). An arrival finding --max-inflight connections open is skipped.
 *
 * After the last arrival the connections in flight finish (each within --timeout-ms of its start),
 * then one JSON object goes to stdout. Failures are counted by pqtimer's error classes.
 *
 * Exit: 0 it ran (failed handshakes are data), 2 bad options (the message names the option),
 * 3 setup impossible.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define START_BATCH 32   /* late arrivals started before in-flight handshakes get a turn */
#define MAX_EVENTS 256
#define TIMER_TAG UINT32_MAX

struct options {
    const char *host, *groups, *cafile, *servername;
    int port, duration_ms, timeout_ms, max_inflight, latencies;
    double rate;
    uint64_t seed;
    struct sockaddr_in addr;
};

/* ---- options ------------------------------------------------------------------------------- */

static void bad_usage(const char *msg, const char *field) {
    fprintf(stderr, "pqload: %s: %s\n", field, msg);
    exit(2);
}

static long long parse_int(const char *s, const char *field, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char msg[128];
        snprintf(msg, sizeof msg, "'%s' is not a whole number in %lld..%lld", s, lo, hi);
        bad_usage(msg, field);
    }
    return v;
}

static void parse_options(int argc, char **argv, struct options *o) {
    *o = (struct options){.timeout_ms = 10000, .max_inflight = 4096, .seed = 1};
    int have_rate = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--latencies")) { /* the one flag without a value */
            o->latencies = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "--", 2))
            bad_usage("unexpected argument", a);
        if (!v)
            bad_usage("missing value", a);
        i++;
        if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--port")) o->port = (int)parse_int(v, a, 1, 65535);
        else if (!strcmp(a, "--groups")) o->groups = v;
        else if (!strcmp(a, "--cafile")) o->cafile = v;
        else if (!strcmp(a, "--servername")) o->servername = v;
        else if (!strcmp(a, "--duration-ms")) o->duration_ms = (int)parse_int(v, a, 1, 86400000);
        else if (!strcmp(a, "--timeout-ms")) o->timeout_ms = (int)parse_int(v, a, 1, 3600000);
        else if (!strcmp(a, "--max-inflight")) o->max_inflight = (int)parse_int(v, a, 1, 1000000);
        else if (!strcmp(a, "--seed")) o->seed = (uint64_t)parse_int(v, a, 0, INT64_MAX);
        else if (!strcmp(a, "--rate")) {
            char *end;
            errno = 0;
            o->rate = strtod(v, &end);
            if (errno || end == v || *end || !isfinite(o->rate) || o->rate <= 0 || o->rate > 1e7)
                bad_usage("must be a number of arrivals per second, > 0 and <= 1e7", a);
            have_rate = 1;
        } else
            bad_usage("unknown option", a);
    }
    if (!o->host)
        bad_usage("required", "--host");
    if (!o->port)
        bad_usage("required", "--port");
    if (!have_rate)
        bad_usage("required", "--rate");
    if (!o->duration_ms)
        bad_usage("required", "--duration-ms");
    o->addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &o->addr.sin_addr) != 1)
        bad_usage("must be an IPv4 address", "--host");
}

/* ---- clock and schedule -------------------------------------------------------------------- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock timerfd counts in, so deadlines and reads agree */
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* splitmix64: tiny, seedable with any value (0 too), good enough for arrival gaps. */
static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct schedule {
    double rate, offset_s, end_s; /* offset_s: the next arrival's time since t0 */
    uint64_t t0, next;            /* next: its absolute time; 0 when the schedule is over */
};

static void schedule_advance(struct schedule *s) {
    double u = (double)(rng_next() >> 11) * 0x1.0p-53; /* [0, 1) */
    s->offset_s += -log1p(-u) / s->rate;
    s->next = s->offset_s < s->end_s ? s->t0 + (uint64_t)(s->offset_s * 1e9) : 0;
}

/* ---- results ------------------------------------------------------------------------------- */

struct vec {
    uint64_t *v;
    size_t n, cap;
};

static void vec_push(struct vec *a, uint64_t x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        if (!a->v) {
            fprintf(stderr, "pqload: out of memory\n");
            exit(3);
        }
    }
    a->v[a->n++] = x;
}

enum err_class { E_SOCKET, E_CONNECT_REFUSED, E_CONNECT_ERROR, E_CONNECT_TIMEOUT, E_TIMEOUT, E_TLS, E_CLOSED,
                 E_CERT_VERIFY, E_COUNT };
static const char *const class_names[E_COUNT] = {"socket", "connect_refused", "connect_error", "connect_timeout",
                                                 "timeout", "tls_error", "closed", "cert_verify"};

static struct {
    uint64_t scheduled, started, completed, skipped, failures[E_COUNT];
    int inflight, inflight_max;
    struct vec latency, service, lag, latency_in_order;
    uint64_t first_arrival, last_done;
    char group[64];
} R;

static void fail(enum err_class c, const char *fmt, ...) {
    if (!R.failures[c]++) { /* the first cause of each class on stderr, for whoever reads the log */
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "pqload: first %s: %s\n", class_names[c], msg);
    }
}

/* ---- connections --------------------------------------------------------------------------- */

enum state { ST_FREE, ST_CONNECTING, ST_HANDSHAKE };

/* Kept small: --max-inflight of them are allocated at start. prev/next: a list in start order, which
 * is deadline order since every connection has the same timeout. */
struct conn {
    int fd;
    uint8_t state;
    uint32_t events; /* what epoll waits for on fd */
    int32_t prev, next;
    SSL *ssl;
    uint64_t scheduled, started;
};

static struct conn *conns;
static int32_t *free_slots;
static int nfree;
static int32_t oldest = -1, newest = -1;
static int epfd;
static SSL_CTX *ctx;
static struct options opt;

static void list_unlink(int32_t i) {
    struct conn *c = &conns[i];
    if (c->prev >= 0) conns[c->prev].next = c->next; else oldest = c->next;
    if (c->next >= 0) conns[c->next].prev = c->prev; else newest = c->prev;
}

static void conn_close(int32_t i) {
    struct conn *c = &conns[i];
    list_unlink(i);
    SSL_free(c->ssl); /* no close_notify: the server's answer to it is not what is measured */
    /* Abortive close: no TIME_WAIT on our side, so thousands of handshakes per second do not run out
     * of ephemeral ports within a minute. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(c->fd); /* also takes it out of the epoll set */
    c->state = ST_FREE;
    c->ssl = NULL;
    free_slots[nfree++] = i;
    R.inflight--;
}

static void set_events(struct conn *c, int32_t i, uint32_t events) {
    if (c->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.u32 = (uint32_t)i};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

static void handshake_failed(struct conn *c, int ret) {
    int e = SSL_get_error(c->ssl, ret);
    int saved_errno = errno;
    unsigned long code = ERR_peek_last_error();
    char buf[160] = "";
    if (code)
        ERR_error_string_n(code, buf, sizeof buf);
    long verify = SSL_get_verify_result(c->ssl);
    /* Without --cafile nothing is verified (the result is "unknown issuer" anyway): not a cause. */
    if (opt.cafile && verify != X509_V_OK)
        fail(E_CERT_VERIFY, "certificate verification failed: %s", X509_verify_cert_error_string(verify));
    else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !code))
        fail(E_CLOSED, "TLS handshake: the server closed the connection%s%s", saved_errno ? ": " : "",
             saved_errno ? strerror(saved_errno) : "");
    else
        fail(E_TLS, "TLS handshake: %s", buf[0] ? buf : "SSL error");
    ERR_clear_error();
}

static void drive(int32_t i) {
    struct conn *c = &conns[i];
    ERR_clear_error(); /* SSL_get_error reads the thread's queue: it must hold only this call's errors */
    errno = 0;
    int r = SSL_connect(c->ssl);
    if (r == 1) {
        uint64_t done = now_ns();
        R.completed++;
        vec_push(&R.latency, done - c->scheduled);
        vec_push(&R.service, done - c->started);
        R.last_done = done;
        if (!R.group[0]) {
            const char *g = SSL_get0_group_name(c->ssl);
            snprintf(R.group, sizeof R.group, "%s", g ? g : "");
        }
        conn_close(i);
        return;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        set_events(c, i, EPOLLIN);
    else if (e == SSL_ERROR_WANT_WRITE)
        set_events(c, i, EPOLLOUT);
    else {
        handshake_failed(c, r);
        conn_close(i);
    }
}

/* A refused connection is its own class (nothing listens), as in pqtimer. */
static void connect_failed(int err) {
    fail(err == ECONNREFUSED ? E_CONNECT_REFUSED : E_CONNECT_ERROR, "connect: %s", strerror(err));
}

static void tcp_connected(int32_t i) {
    struct conn *c = &conns[i];
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
        connect_failed(err);
        conn_close(i);
        return;
    }
    c->ssl = SSL_new(ctx);
    if (!c->ssl || !SSL_set_fd(c->ssl, c->fd)) {
        fail(E_TLS, "SSL_new: %s", ERR_error_string(ERR_get_error(), NULL));
        conn_close(i);
        return;
    }
    if (opt.servername) {
        SSL_set_tlsext_host_name(c->ssl, opt.servername);
        if (opt.cafile)
            SSL_set1_host(c->ssl, opt.servername);
    }
    c->state = ST_HANDSHAKE;
    drive(i);
}

static void start_arrival(uint64_t scheduled) {
    R.scheduled++;
    if (!R.first_arrival)
        R.first_arrival = scheduled;
    if (R.inflight >= opt.max_inflight) {
        R.skipped++;
        return;
    }
    R.started++;
    uint64_t start = now_ns();
    vec_push(&R.lag, start > scheduled ? start - scheduled : 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(E_SOCKET, "socket: %s", strerror(errno));
        return;
    }
    int one = 1; /* as pqtimer: Nagle must not hold a handshake flight */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&opt.addr, sizeof opt.addr) != 0 && errno != EINPROGRESS) {
        connect_failed(errno);
        close(fd);
        return;
    }
    int32_t i = free_slots[--nfree];
    struct conn *c = &conns[i];
    *c = (struct conn){.fd = fd, .state = ST_CONNECTING, .events = EPOLLOUT, .prev = newest, .next = -1,
                       .scheduled = scheduled, .started = start};
    if (newest >= 0) conns[newest].next = i; else oldest = i;
    newest = i;
    R.inflight++;
    if (R.inflight > R.inflight_max)
        R.inflight_max = R.inflight;
    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fail(E_SOCKET, "epoll_ctl: %s", strerror(errno));
        conn_close(i);
    }
}

static void expire(uint64_t now, uint64_t timeout_ns) {
    while (oldest >= 0 && conns[oldest].started + timeout_ns <= now) {
        struct conn *c = &conns[oldest];
        if (c->state == ST_CONNECTING)
            fail(E_CONNECT_TIMEOUT, "TCP connect did not complete within the timeout");
        else
            fail(E_TIMEOUT, "TLS handshake did not complete within the timeout");
        conn_close(oldest);
    }
}

/* ---- output -------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks, as pqbench.stats.percentile (numpy's default). */
static double pct_ms(const struct vec *sorted, double q) {
    double pos = (double)(sorted->n - 1) * q / 100;
    size_t lo = (size_t)pos, hi = lo + 1 < sorted->n ? lo + 1 : sorted->n - 1;
    double a = (double)sorted->v[lo], b = (double)sorted->v[hi];
    return (a + (pos - (double)lo) * (b - a)) / 1e6;
}

static void print_pcts(const char *name, struct vec *a, const double *qs, int nq, int with_max, int with_mean) {
    printf(", \"%s\": ", name);
    if (!a->n) {
        printf("null");
        return;
    }
    qsort(a->v, a->n, sizeof *a->v, cmp_u64);
    printf("{");
    for (int k = 0; k < nq; k++)
        printf("%s\"p%g\": %.3f", k ? ", " : "", qs[k], pct_ms(a, qs[k]));
    if (with_max)
        printf(", \"max\": %.3f", (double)a->v[a->n - 1] / 1e6);
    if (with_mean) {
        double sum = 0;
        for (size_t k = 0; k < a->n; k++)
            sum += (double)a->v[k];
        printf(", \"mean\": %.3f", sum / (double)a->n / 1e6);
    }
    printf("}");
}

static void print_report(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    double duration_s = opt.duration_ms / 1000.0;
    printf("{\"generator\": \"pqload\", \"offered_rate\": %.15g, \"duration_s\": %.15g, \"scheduled\": %" PRIu64
           ", \"started\": %" PRIu64 ", \"completed\": %" PRIu64 ", \"failures\": {",
           opt.rate, duration_s, R.scheduled, R.started, R.completed);
    int first = 1;
    for (int c = 0; c < E_COUNT; c++)
        if (R.failures[c]) {
            printf("%s\"%s\": %" PRIu64, first ? "" : ", ", class_names[c], R.failures[c]);
            first = 0;
        }
    printf("}, \"skipped\": %" PRIu64 ", \"inflight_max\": %d", R.skipped, R.inflight_max);
    /* in completion order, before the copy used for percentiles is sorted */
    if (opt.latencies && R.latency.n) {
        R.latency_in_order.v = malloc(R.latency.n * sizeof(uint64_t));
        if (!R.latency_in_order.v) {
            fprintf(stderr, "pqload: out of memory\n");
            exit(3);
        }
        memcpy(R.latency_in_order.v, R.latency.v, R.latency.n * sizeof(uint64_t));
        R.latency_in_order.n = R.latency.n;
    }
    static const double lat_q[] = {50, 90, 99}, lag_q[] = {50, 99};
    print_pcts("latency_ms", &R.latency, lat_q, 3, 1, 1);
    print_pcts("service_ms", &R.service, lat_q, 3, 0, 0);
    print_pcts("start_lag_ms", &R.lag, lag_q, 2, 1, 0);
    printf(", \"achieved_rate\": %.3f, \"wall_s\": ", (double)R.completed / duration_s);
    if (R.completed)
        printf("%.6f", (double)(R.last_done - R.first_arrival) / 1e9);
    else
        printf("null");
    printf(", \"client_cpu_s\": %.6f, \"group\": ", cpu);
    if (R.group[0])
        printf("\"%s\"", R.group); /* an OpenSSL group name: letters, digits, '_' */
    else
        printf("null");
    if (opt.latencies) {
        printf(", \"latencies_ms\": [");
        for (size_t k = 0; k < R.latency_in_order.n; k++)
            printf("%s%.3f", k ? ", " : "", (double)R.latency_in_order.v[k] / 1e6);
        printf("]");
    }
    printf("}\n");
}

/* ---- main ---------------------------------------------------------------------------------- */

static int setup_failed(const char *what) {
    fprintf(stderr, "pqload: cannot set up: %s: %s\n", what, errno ? strerror(errno) : "");
    return 3;
}

static void make_ctx(void) {
    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
        fprintf(stderr, "pqload: cannot set up TLS: %s\n", ERR_error_string(ERR_get_error(), NULL));
        exit(3);
    }
    if (opt.groups && !SSL_CTX_set1_groups_list(ctx, opt.groups))
        bad_usage("no group in the list is available in this OpenSSL (see `pqbench algorithms`)", "--groups");
    if (opt.cafile) {
        if (!SSL_CTX_load_verify_locations(ctx, opt.cafile, NULL))
            bad_usage("cannot load CA certificates from this file", "--cafile");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* every arrival a full handshake */
    /* Our OpenSSL has zlib/brotli/zstd and would offer certificate compression: the ClientHello pqtimer
     * sends by default (no compress_certificate extension) */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RX_CERTIFICATE_COMPRESSION);
}

int main(int argc, char **argv) {
    parse_options(argc, argv, &opt);
    make_ctx();
    signal(SIGPIPE, SIG_IGN); /* a write to a connection the server reset is a failure, not our death */

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)opt.max_inflight + 16 > rl.rlim_cur)
        fprintf(stderr, "pqload: --max-inflight %d exceeds the open-file limit %llu: arrivals beyond it fail "
                "as 'socket'\n", opt.max_inflight, (unsigned long long)rl.rlim_cur);

    conns = calloc((size_t)opt.max_inflight, sizeof *conns);
    free_slots = calloc((size_t)opt.max_inflight, sizeof *free_slots);
    if (!conns || !free_slots)
        return setup_failed("memory for --max-inflight connections");
    for (int k = 0; k < opt.max_inflight; k++)
        free_slots[nfree++] = opt.max_inflight - 1 - k;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return setup_failed("epoll_create1");
    /* Arrivals are woken by an absolute timer, not by epoll_wait's millisecond timeout: at thousands
     * per second the gaps are shorter than a millisecond. */
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0)
        return setup_failed("timerfd_create");
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = TIMER_TAG};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &tev) != 0)
        return setup_failed("epoll_ctl");

    uint64_t timeout_ns = (uint64_t)opt.timeout_ms * NS_PER_MS;
    rng_state = opt.seed;
    struct schedule sched = {.rate = opt.rate, .end_s = opt.duration_ms / 1000.0, .t0 = now_ns()};
    schedule_advance(&sched);
    uint64_t armed = 0;
    struct epoll_event events[MAX_EVENTS];

    for (;;) {
        uint64_t now = now_ns();
        /* Due arrivals first, a batch at a time, so handshakes in flight are not starved while the
         * generator catches up. */
        for (int k = 0; sched.next && sched.next <= now && k < START_BATCH; k++) {
            start_arrival(sched.next);
            schedule_advance(&sched);
            now = now_ns();
        }
        expire(now, timeout_ns);
        if (!sched.next && R.inflight == 0)
            break;
        int wait_ms;
        if (sched.next && sched.next <= now)
            wait_ms = 0; /* still behind schedule */
        else {
            if (sched.next != armed) {
                struct itimerspec its = {.it_value = {.tv_sec = (time_t)(sched.next / NS_PER_S),
                                                      .tv_nsec = (long)(sched.next % NS_PER_S)}};
                timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL); /* zero disarms when the schedule is over */
                armed = sched.next;
            }
            wait_ms = -1;
            if (oldest >= 0) {
                uint64_t deadline = conns[oldest].started + timeout_ns;
                wait_ms = deadline <= now ? 0 : (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS);
            }
        }
        int n = epoll_wait(epfd, events, MAX_EVENTS, wait_ms);
        if (n < 0 && errno != EINTR)
            return setup_failed("epoll_wait");
        for (int k = 0; k < n; k++) {
            uint32_t i = events[k].data.u32;
            if (i == TIMER_TAG) {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                    return setup_failed("timerfd read");
                armed = 0; /* fired: one-shot */
                continue;
            }
            struct conn *c = &conns[i];
            if (c->state == ST_CONNECTING)
                tcp_connected((int32_t)i);
            else if (c->state == ST_HANDSHAKE)
                drive((int32_t)i);
            /* ST_FREE: closed earlier in this batch; its event is stale */
        }
    }
    print_report();
    SSL_CTX_free(ctx);
    close(tfd);
    close(epfd);
    free(conns);
    free(free_slots);
    free(R.latency.v);
    free(R.service.v);
    free(R.lag.v);
    free(R.latency_in_order.v);
    return 0;
}
