#define _GNU_SOURCE
#include "link.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define BATCH 64           /* packets read before the due ones are written */
#define PKT_CAP 2048       /* initial buffer per packet; bigger packets grow it */
#define SCRATCH (64 << 10) /* the rest of a packet longer than PKT_CAP lands here first */
#define SPIN_FIFO 1        /* real-time priority while spinning before a deadline */
#define SPIN_RAISE_NS 2000 /* back to fifo_prio this long before it (the call takes ~1 us) */

static int write_out(void *ctx, struct pkt *p, int64_t now)
{
    struct direction *d = ctx;
    ssize_t n;
    do
        n = write(d->out_fd, p->data, p->len);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)p->len)
        return -1;
    struct direction *peer = d->peer;
    if (atomic_load_explicit(&peer->sleeping, memory_order_relaxed) &&
        !atomic_load_explicit(&peer->hint, memory_order_relaxed)) {
        struct pollfd pf = {d->out_fd, POLLIN, 0}; /* the peer's input */
        if (poll(&pf, 1, 0) == 1)
            atomic_store(&peer->hint, mono_ns());
    }
    if (d->pcap.f)
        pcap_write(&d->pcap, p, now);
    return 0;
}

static void log_drop(void *ctx, const struct pkt *p, enum verdict why, int64_t now)
{
    struct direction *d = ctx;
    if (d->droplog)
        fprintf(d->droplog, "%lld %s %llu %s %u\n", (long long)now, dir_names[d->dir],
                (unsigned long long)p->seq, verdict_names[why], p->len);
}

/* Takes whatever the control thread asked for since the last look. */
static void serve_requests(struct direction *d)
{
    struct dir_config *c = atomic_exchange(&d->pending, NULL);
    if (c) {
        pipeline_configure(&d->pl, c);
        free(c);
    }
    unsigned req = atomic_load(&d->reset_req);
    if (req != atomic_load_explicit(&d->reset_done, memory_order_relaxed)) {
        pipeline_reset_counters(&d->pl);
        atomic_store(&d->reset_done, req);
    }
}

/* Reads up to BATCH packets into the pipeline; returns how many were read. */
static int read_batch(struct direction *d)
{
    int n = 0;
    int64_t hint = 0;
    if (d->woke) { /* a hint older than our last look at an empty input is stale */
        d->woke = false;
        hint = atomic_exchange(&d->hint, 0);
        if (hint < d->last_empty)
            hint = 0;
    }
    while (n < BATCH) {
        struct pkt *p = pkt_get(&d->pl.pool, PKT_CAP);
        ssize_t r;
        if (!p) {
            r = read(d->in_fd, d->scratch, SCRATCH);
            if (r > 0) {
                cnt_add(&d->cnt.pool_drops, 1);
                n++;
                continue;
            }
        } else {
            struct iovec iov[2] = {{p->data, p->cap}, {d->scratch, SCRATCH}};
            r = readv(d->in_fd, iov, 2);
            if (r > (ssize_t)p->cap) {
                uint32_t head = p->cap;
                if (pkt_reserve(p, (uint32_t)r, head) < 0) {
                    pkt_put(&d->pl.pool, p);
                    cnt_add(&d->cnt.pool_drops, 1);
                    n++;
                    continue;
                }
                memcpy(p->data + head, d->scratch, (size_t)r - head);
            }
            if (r > 0) {
                p->len = (uint32_t)r;
                int64_t now = mono_ns();
                pipeline_input(&d->pl, p, hint && hint < now ? hint : now);
                /* only the packet that was waiting when the hint was taken arrived then; one read
                 * later in the batch may have come at any time since, and stamping it with the
                 * hint would deliver it early (a connect faster than the configured RTT) */
                hint = 0;
                n++;
                continue;
            }
            pkt_put(&d->pl.pool, p);
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno != EAGAIN)
            die_sys("read", d->in_name);
        d->last_empty = mono_ns();
        break;
    }
    return n;
}

static void wake(struct direction *d)
{
    uint64_t one = 1;
    if (write(d->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        warn_sys("write", "eventfd");
}

/* A client SYN restarted the traces: the other direction's timer may be set by the old phase. */
static void tell_peer_of_phase(struct direction *d)
{
    uint64_t gen = atomic_load_explicit(&d->owner->phase.gen, memory_order_relaxed);
    if (d->dir == DIR_C2S && gen != d->phase_told) {
        d->phase_told = gen;
        wake(d->peer);
    }
}

static void arm(struct direction *d, int64_t when)
{
    if (when == d->armed)
        return;
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (when != 0)
        its.it_value = ns_to_timespec(when);
    if (timerfd_settime(d->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        die_sys("timerfd_settime", dir_names[d->dir]);
    d->armed = when;
}

static void drain(int fd)
{
    uint64_t x;
    while (read(fd, &x, sizeof(x)) > 0)
        ;
}

static void set_fifo(struct direction *d, int prio)
{
    struct sched_param sp = {.sched_priority = prio};
    int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (rc) {
        errno = rc;
        die_sys("pthread_setschedparam(SCHED_FIFO)", dir_names[d->dir]);
    }
}

/* Polls the device and the clock until `until`; true when a packet came first. */
static bool spin_until(struct direction *d, int64_t until)
{
    while (mono_ns() < until && !atomic_load_explicit(&d->owner->stop, memory_order_relaxed))
        if (read_batch(d) > 0)
            return true;
    return false;
}

static void *forward(void *arg)
{
    struct direction *d = arg;
    struct link *l = d->owner;
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake-ups exactly at the deadline, not up to 50 us later */
    if (l->fifo_prio > 0)
        set_fifo(d, l->fifo_prio);
    struct pollfd pfd[3] = {{d->in_fd, POLLIN, 0}, {d->timer_fd, POLLIN, 0}, {d->wake_fd, POLLIN, 0}};
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
        serve_requests(d);
        int n = read_batch(d);
        tell_peer_of_phase(d);
        int64_t now = mono_ns();
        pipeline_pump(&d->pl, now);
        if (n == BATCH)
            continue; /* more may be waiting: read before sleeping */
        int64_t next = pipeline_next_deadline(&d->pl);
        now = mono_ns();
        if (next <= now)
            continue;
        if (next - now <= l->spin_ns) {
            /* close to the deadline: poll the device and the clock instead of sleeping, at the lowest
             * real-time priority: a waking server or client (real-time too, below fifo_prio) takes the CPU
             * from the spin, as it could not from a spin at fifo_prio (another testbed's emulator spinning
             * held this one's client back: client - wire +0.3-0.5 ms beside two bulk flows, +0.05-0.1 now).
             * Raised again just before the deadline, so that the syscall does not make the packet late. */
            bool lowered = l->fifo_prio > SPIN_FIFO;
            if (lowered)
                set_fifo(d, SPIN_FIFO);
            bool got = spin_until(d, next - (lowered ? SPIN_RAISE_NS : 0));
            if (lowered)
                set_fifo(d, l->fifo_prio);
            if (!got)
                spin_until(d, next);
            continue;
        }
        arm(d, next == NEVER_DEADLINE ? 0 : next - l->spin_ns);
        atomic_store(&d->sleeping, true);
        int pr = poll(pfd, 3, -1);
        atomic_store(&d->sleeping, false);
        d->woke = true;
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            die_sys("poll", dir_names[d->dir]);
        }
        if (pfd[1].revents & POLLIN) {
            drain(d->timer_fd);
            d->armed = 0;
        }
        if (pfd[2].revents & POLLIN)
            drain(d->wake_fd);
    }
    serve_requests(d);
    return NULL;
}

/* A halted vCPU takes 50-150 us to wake for a timer or an IPI; every process on the path (the
 * client, the server, our own threads) pays that at each idle gap. A task at SCHED_IDLE runs only
 * when nothing else can and yields at once to any waking task, so the CPUs never halt.
 * They are processes, not threads: with autogroup scheduling the kernel shares the CPU between
 * sessions first, and SCHED_IDLE is idle only inside its own group. Each runs in a session of its
 * own whose group has the lowest weight, so it takes no CPU that anyone else wants, while pqlink's
 * own threads stay in the session that started it. A keeper dies with pqlink (PR_SET_PDEATHSIG). */
static pid_t start_keeper(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    close_range(3, ~0U, 0); /* not the TUN devices: a dead pqlink takes them along at once */
    setsid();
    FILE *ag = fopen("/proc/self/autogroup", "w");
    if (ag) {
        fputs("19", ag);
        fclose(ag);
    }
    struct sched_param sp = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0)
        _exit(1);
    /* A plain loop, no `pause`: under KVM a pause loop can cause pause-loop exits, and the host
     * then deschedules the vCPU as if it spun on a lock. */
    for (;;)
        ;
}

void link_start(struct link *l)
{
    l->started_ns = mono_ns();
    for (int i = 0; i < l->keep_awake; i++) { /* before any thread: fork a single-threaded process */
        l->keepers[i] = start_keeper();
        if (l->keepers[i] < 0)
            die_sys("fork", "keep-awake");
    }
    if (flows_init(&l->flows, l->flow_capacity) < 0)
        die_sys("calloc", "flow table");
    phase_init(&l->phase, l->cfg[DIR_C2S].seed);
    atomic_store(&l->phase.active, l->cfg[0].trace || l->cfg[1].trace);
    for (int i = 0; i < 2; i++) {
        struct direction *d = &l->d[i];
        d->owner = l;
        d->peer = &l->d[1 - i];
        d->dir = i;
        d->droplog = l->droplog;
        if (pipeline_init(&d->pl, i, &l->cfg[i], &d->cnt) < 0)
            die_sys("malloc", "pipeline");
        d->pl.output = write_out;
        d->pl.on_drop = log_drop;
        d->pl.ctx = d;
        d->pl.flows = l->flow_capacity ? &l->flows : NULL;
        d->pl.phase = &l->phase;
        d->scratch = malloc(SCRATCH);
        if (!d->scratch)
            die_sys("malloc", "scratch buffer");
        d->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (d->wake_fd < 0)
            die_sys("eventfd", dir_names[i]);
        d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (d->timer_fd < 0)
            die_sys("timerfd_create", dir_names[i]);
    }
    for (int i = 0; i < 2; i++) {
        int rc = pthread_create(&l->d[i].thread, NULL, forward, &l->d[i]);
        if (rc) {
            errno = rc;
            die_sys("pthread_create", dir_names[i]);
        }
        l->d[i].started = true;
    }
}

/* A keeper killed at SCHED_IDLE waits for the CPU it needs to exit as long as anything else runs
 * (beside two busy loops: seconds), and pqlink's exit with it. With the SIGKILL pending it never
 * runs its loop again, only its exit: raised to real time, it exits at once. */
static void stop_keeper(pid_t pid)
{
    if (kill(pid, SIGKILL) != 0)
        return;
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(pid, SCHED_FIFO, &sp) == 0)
        return;
    /* no real-time budget here: normal scheduling, and out of the lowest-weight CPU group */
    sp.sched_priority = 0;
    sched_setscheduler(pid, SCHED_OTHER, &sp);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/autogroup", (int)pid);
    FILE *ag = fopen(path, "we");
    if (ag) {
        fputs("0", ag);
        fclose(ag);
    }
}

void link_stop(struct link *l)
{
    atomic_store(&l->stop, true);
    for (int i = 0; i < l->keep_awake; i++) /* reaped in link_reap_keepers, after the counters are out */
        stop_keeper(l->keepers[i]);
    for (int i = 0; i < 2; i++) {
        struct direction *d = &l->d[i];
        if (!d->started)
            continue;
        wake(d);
        pthread_join(d->thread, NULL);
        d->started = false;
        pipeline_destroy(&d->pl);
        free(d->scratch);
        close(d->wake_fd);
        close(d->timer_fd);
    }
    flows_destroy(&l->flows);
}

void link_reap_keepers(struct link *l)
{
    for (int i = 0; i < l->keep_awake; i++)
        while (waitpid(l->keepers[i], NULL, 0) < 0 && errno == EINTR)
            ;
    l->keep_awake = 0;
}

/* The threads answer within one loop turn; give up after a second rather than hang. */
static void wait_until(bool (*done)(struct direction *), struct direction *d)
{
    for (int i = 0; i < 10000 && !done(d); i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static bool config_taken(struct direction *d) { return atomic_load(&d->pending) == NULL; }
static bool reset_taken(struct direction *d) { return atomic_load(&d->reset_done) == atomic_load(&d->reset_req); }

void link_reconfigure(struct link *l, const struct dir_config cfg[2], const bool changed[2])
{
    atomic_store(&l->phase.active, cfg[0].trace || cfg[1].trace);
    for (int i = 0; i < 2; i++) {
        l->cfg[i] = cfg[i];
        if (!changed[i])
            continue;
        struct dir_config *c = malloc(sizeof(*c));
        if (!c)
            die_sys("malloc", "config");
        *c = cfg[i];
        free(atomic_exchange(&l->d[i].pending, c));
        wake(&l->d[i]);
    }
    for (int i = 0; i < 2; i++)
        if (changed[i])
            wait_until(config_taken, &l->d[i]);
}

void link_reset(struct link *l)
{
    for (int i = 0; i < 2; i++) {
        atomic_fetch_add(&l->d[i].reset_req, 1);
        wake(&l->d[i]);
    }
    for (int i = 0; i < 2; i++)
        wait_until(reset_taken, &l->d[i]);
    flows_reset(&l->flows);
}

int link_config_json(struct link *l, char *buf, size_t len)
{
    char a[CONFIG_JSON_MAX], b[CONFIG_JSON_MAX];
    config_json(&l->cfg[0], a, sizeof(a));
    config_json(&l->cfg[1], b, sizeof(b));
    int n = snprintf(buf, len, "{\"c2s\":%s,\"s2c\":%s}", a, b);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

/* The trace this direction replays and where the restarts since the last reset put it (null without one). */
static void trace_json(struct link *l, const struct dir_config *cfg, char *buf, size_t len)
{
    const struct trace *t = cfg->trace;
    if (!t) {
        snprintf(buf, len, "null");
        return;
    }
    char path[2 * TRACE_PATH_MAX + 8], first[32] = "null", last[32] = "null";
    config_json_string(t->path, path, sizeof(path));
    uint64_t restarts = cnt_get(&l->phase.restarts);
    if (restarts) {
        double u0 = phase_bits_to_u(atomic_load(&l->phase.first_u_bits));
        double u1 = phase_bits_to_u(atomic_load(&l->phase.last_u_bits));
        snprintf(first, sizeof(first), "%lld", (long long)(trace_offset_ns(t, u0) / 1000000));
        snprintf(last, sizeof(last), "%lld", (long long)(trace_offset_ns(t, u1) / 1000000));
    }
    snprintf(buf, len,
             "{\"file\":%s,\"lines\":%zu,\"period_ms\":%lld,\"bytes_per_opportunity\":%u,\"restarts\":%llu,"
             "\"first_offset_ms\":%s,\"last_offset_ms\":%s}",
             path, t->n, (long long)(t->period_ns / 1000000), cfg->trace_bytes, (unsigned long long)restarts,
             first, last);
}

static int dir_json(struct link *l, struct direction *d, const struct dir_config *cfg, char *buf, size_t len)
{
    struct dir_counters *c = &d->cnt;
    char conf[CONFIG_JSON_MAX], trace[CONFIG_JSON_MAX];
    config_json(cfg, conf, sizeof(conf));
    trace_json(l, cfg, trace, sizeof(trace));
    uint64_t sn = cnt_get(&c->sojourn.n);
    return snprintf(
        buf, len,
        "{\"rx_packets\":%llu,\"rx_bytes\":%llu,\"forwarded_packets\":%llu,\"forwarded_bytes\":%llu,"
        "\"lost\":%llu,\"queue_drops\":%llu,\"aqm_drops\":%llu,\"ecn_marks\":%llu,\"memory_drops\":%llu,"
        "\"write_errors\":%llu,\"peak_queue_packets\":%llu,\"peak_queue_bytes\":%llu,\"max_packet_bytes\":%llu,"
        "\"in_flight\":%llu,\"lateness_us\":{\"n\":%llu,\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},"
        "\"sojourn_us\":{\"n\":%llu,\"mean\":%.3f,\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f,\"max\":%.3f},"
        "\"trace\":%s,\"config\":%s}",
        (unsigned long long)cnt_get(&c->rx_packets), (unsigned long long)cnt_get(&c->rx_bytes),
        (unsigned long long)cnt_get(&c->fwd_packets), (unsigned long long)cnt_get(&c->fwd_bytes),
        (unsigned long long)cnt_get(&c->lost), (unsigned long long)cnt_get(&c->queue_drops),
        (unsigned long long)cnt_get(&c->aqm_drops), (unsigned long long)cnt_get(&c->ecn_marks),
        (unsigned long long)cnt_get(&c->pool_drops), (unsigned long long)cnt_get(&c->write_errors),
        (unsigned long long)cnt_get(&c->peak_queue_packets), (unsigned long long)cnt_get(&c->peak_queue_bytes),
        (unsigned long long)cnt_get(&c->max_packet_bytes), (unsigned long long)cnt_get(&c->in_flight),
        (unsigned long long)cnt_get(&c->lateness.n), hist_quantile(&c->lateness, 0.5) / 1e3,
        hist_quantile(&c->lateness, 0.99) / 1e3, (double)cnt_get(&c->lateness.max) / 1e3,
        (unsigned long long)sn, sn ? (double)cnt_get(&c->sojourn_sum_ns) / (double)sn / 1e3 : 0.0,
        hist_quantile(&c->sojourn, 0.5) / 1e3, hist_quantile(&c->sojourn, 0.95) / 1e3,
        hist_quantile(&c->sojourn, 0.99) / 1e3, (double)cnt_get(&c->sojourn.max) / 1e3, trace, conf);
}

int link_stats_json(struct link *l, char *buf, size_t len)
{
    char a[LINK_DIR_JSON_MAX], b[LINK_DIR_JSON_MAX];
    dir_json(l, &l->d[0], &l->cfg[0], a, sizeof(a));
    dir_json(l, &l->d[1], &l->cfg[1], b, sizeof(b));
    int n = snprintf(buf, len,
                     "{\"pid\":%d,\"uptime_s\":%.3f,\"sched_fifo\":%d,\"spin_us\":%.1f,\"keep_awake\":%d,\"c2s\":%s,\"s2c\":%s}",
                     (int)getpid(), (double)(mono_ns() - l->started_ns) / 1e9, l->fifo_prio,
                     (double)l->spin_ns / 1e3, l->keep_awake, a, b);
    return n < 0 || (size_t)n >= len ? -1 : n;
}
