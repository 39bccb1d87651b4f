/* Unit tests of the bottleneck on a virtual clock: delivery traces (mahimahi's format), their phase
 * restarts at new connections, and the queue disciplines CoDel (RFC 8289) and PIE (RFC 8033). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "aqm.h"
#include "config.h"
#include "phase.h"
#include "pipeline.h"
#include "rate.h"
#include "trace.h"

#include "check.h"
#include "test_support.h"


static struct trace trace_of(const char *text)
{
    struct trace t = {.path = "test"};
    char err[256];
    if (trace_parse(&t, text, strlen(text), err, sizeof(err)) < 0) {
        fprintf(stderr, "trace: %s\n", err);
        exit(1);
    }
    return t;
}

/* ---- a virtual-clock driver for one bottleneck stage -------------------------------------------- */

struct run {
    int delivered, aqm_drops, limit_drops, marks;
    int64_t window_from;          /* sojourn statistics of the packets that left from then on */
    double window_sum;
    int window_n;
    int64_t first_drop, last_out;
    uint64_t drop_seq[8192];
    int64_t drop_at[8192];
    int64_t out_at[8192];
    int64_t sojourn[8192];
    uint64_t out_seq[8192];
};

static void record_out(struct run *r, struct pkt *p)
{
    if (r->delivered < 8192) {
        r->out_at[r->delivered] = p->t;
        r->sojourn[r->delivered] = p->qdelay;
        r->out_seq[r->delivered] = p->seq;
    }
    if (r->window_from && p->t >= r->window_from) {
        r->window_sum += (double)p->qdelay;
        r->window_n++;
    }
    r->delivered++;
    r->marks += (p->flags & PKT_CE) != 0;
    r->last_out = p->t;
    free(p->data);
    free(p);
}

static void pump(struct rate_stage *s, struct run *r, int64_t now)
{
    struct pkt *p;
    enum verdict why;
    while ((p = stage_dequeue(&s->base, now)))
        record_out(r, p);
    while ((p = s->base.ops->take_dropped(&s->base, &why))) {
        if (r->aqm_drops < 8192) {
            r->drop_seq[r->aqm_drops] = p->seq;
            r->drop_at[r->aqm_drops] = now;
        }
        if (!r->aqm_drops++)
            r->first_drop = now;
        free(p->data);
        free(p);
    }
}

/* Moves the clock to t, releasing everything due on the way. */
static void advance(struct rate_stage *s, struct run *r, int64_t t)
{
    for (int guard = 0; guard < 10000000; guard++) {
        int64_t next = stage_next_deadline(&s->base);
        if (next == NEVER_DEADLINE || next > t)
            break;
        pump(s, r, next);
    }
    pump(s, r, t);
}

static void offer(struct rate_stage *s, struct run *r, struct pkt *p)
{
    advance(s, r, p->t);
    enum verdict v = stage_enqueue(&s->base, p);
    if (v == V_ACCEPT)
        return;
    if (v == V_DROP_AQM) {
        if (r->aqm_drops < 8192) {
            r->drop_seq[r->aqm_drops] = p->seq;
            r->drop_at[r->aqm_drops] = p->t;
        }
        if (!r->aqm_drops++)
            r->first_drop = p->t;
    } else {
        r->limit_drops++;
    }
    free(p->data);
    free(p);
}

static void free_pkt(void *ctx, struct pkt *p)
{
    free(p->data);
    free(p);
}

/* ---- traces -------------------------------------------------------------------------------------- */

static void test_trace_parse(void)
{
    struct trace t = {.path = "x"};
    char err[256];
    const char *ok = "0\n0\n3\r\n 7 \n10\n";
    CHECK(trace_parse(&t, ok, strlen(ok), err, sizeof(err)) == 0 && t.n == 5 && t.period_ns == 10 * MS &&
              t.t_ns[3] == 7 * MS,
          "parse: %s", err);
    trace_free(&t);
    struct {
        const char *text, *want;
    } bad[] = {
        {"", "line 1: the trace is empty"},
        {"\n", "line 1: the trace is empty"},
        {"0\nabc\n", "line 2: 'abc' is not a whole number"},
        {"0\n1.5\n", "line 2: '1.5' is not a whole number"},
        {"0\n\n5\n", "line 2: '' is not a whole number"},
        {"0\n5\n3\n", "line 3: 3 is before the line above (5)"},
        {"-1\n", "line 1: -1 is negative"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        int rc = trace_parse(&t, bad[i].text, strlen(bad[i].text), err, sizeof(err));
        CHECK(rc < 0 && strstr(err, bad[i].want), "bad trace %zu: '%s', want '%s'", i, err, bad[i].want);
    }
    /* the degenerate ones: all zeros repeat every ms, one line repeats at its own time */
    t = trace_of("0\n0\n");
    CHECK(t.period_ns == 1 * MS, "zeros: period %lld", (long long)t.period_ns);
    struct trace_pos p = trace_seek(&t, 0, 1);
    CHECK(trace_time(&t, 0, p) == 1 * MS, "zeros: next after 1 ns at %lld", (long long)trace_time(&t, 0, p));
    trace_free(&t);
    t = trace_of("5\n");
    p = trace_seek(&t, 0, 0);
    int64_t times[3];
    for (int i = 0; i < 3; i++, trace_advance(&t, &p))
        times[i] = trace_time(&t, 0, p);
    CHECK(times[0] == 5 * MS && times[1] == 10 * MS && times[2] == 15 * MS, "one line: %lld %lld %lld",
          (long long)times[0], (long long)times[1], (long long)times[2]);
    trace_free(&t);
}

static void test_trace_file_and_config(void)
{
    char path[] = "/tmp/pqlink-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    CHECK(write(fd, "0\n2\n", 4) == 4, "write");
    close(fd);
    char kv[600];
    snprintf(kv, sizeof(kv), "s2c.trace=%s", path);
    struct dir_config c[2];
    bool changed[2] = {false, false};
    char err[512];
    config_defaults(&c[0]);
    config_defaults(&c[1]);
    CHECK(config_apply(c, changed, kv, err, sizeof(err)) == 0 && c[1].trace && !c[0].trace &&
              c[1].trace->period_ns == 2 * MS,
          "trace key: %s", err);
    const struct trace *first = c[1].trace;
    CHECK(config_apply(c, changed, kv, err, sizeof(err)) == 0 && c[1].trace == first, "loaded once");
    char json[CONFIG_JSON_MAX];
    config_json(&c[1], json, sizeof(json));
    CHECK(strstr(json, path) && strstr(json, "\"aqm\":\"droptail\"") && strstr(json, "\"ecn\":false"), "json %s", json);
    CHECK(config_apply(c, changed, "trace=none", err, sizeof(err)) == 0 && !c[1].trace, "trace=none");

    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, "0\n7\n3\n", 6) == 6, "write");
    close(fd);
    CHECK(config_apply(c, changed, kv, err, sizeof(err)) < 0 && strstr(err, path) && strstr(err, "line 3"),
          "bad file refused naming it and the line: %s", err);
    unlink(path);
    CHECK(config_apply(c, changed, kv, err, sizeof(err)) < 0 && strstr(err, "cannot open"), "missing: %s", err);

    CHECK(config_apply(c, changed, "aqm=codel", err, sizeof(err)) == 0 && c[0].aqm == AQM_CODEL, "aqm=codel");
    CHECK(config_apply(c, changed, "aqm=red", err, sizeof(err)) < 0 && strstr(err, "droptail codel pie"),
          "unknown aqm: %s", err);
    CHECK(config_apply(c, changed, "c2s.pie_alpha=0.5", err, sizeof(err)) == 0 && c[0].pie_alpha == 0.5 &&
              c[1].pie_alpha == 0.125,
          "pie_alpha");
    CHECK(config_apply(c, changed, "codel_target_ns=0", err, sizeof(err)) < 0, "zero target refused");
    CHECK(config_apply(c, changed, "ecn=1", err, sizeof(err)) == 0 && c[0].ecn && c[1].ecn, "ecn");
    CHECK(c[0].codel_interval_ns == 100 * MS && c[0].pie_tupdate_ns == 15 * MS && c[0].pie_max_burst_ns == 150 * MS &&
              c[0].pie_beta == 1.25 && c[0].codel_target_ns == 5 * MS && c[0].pie_target_ns == 15 * MS,
          "RFC defaults");
}

/* Ten full-size packets at once meet exactly the trace's opportunities, the second loop included
 * (its first opportunity falls on the period, together with the last line of the first loop). */
static void test_trace_delivers_at_opportunities(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct trace t = trace_of("0\n0\n3\n7\n10\n");
    struct dir_config c = cfg_with((const char *[]){"queue_packets=0", NULL});
    c.trace = &t;
    struct rate_stage s;
    rate_init(&s, &c, 0);
    for (int i = 0; i < 10; i++)
        offer(&s, &r, mkpkt(1500, 100 * MS, (uint64_t)i));
    /* the first two left as they came (opportunities at 0 and 0): the next is due at 3 ms */
    CHECK(stage_next_deadline(&s.base) == 103 * MS, "next deadline %lld", (long long)stage_next_deadline(&s.base));
    advance(&s, &r, 1000 * MS);
    int64_t want[] = {0, 0, 3, 7, 10, 10, 10, 13, 17, 20};
    CHECK(r.delivered == 10, "delivered %d", r.delivered);
    for (int i = 0; i < 10; i++)
        CHECK(r.out_at[i] == 100 * MS + want[i] * MS && r.out_seq[i] == (uint64_t)i, "packet %d out at %lld", i,
              (long long)r.out_at[i]);
    CHECK(r.sojourn[9] == 20 * MS, "sojourn of the last %lld", (long long)r.sojourn[9]);

    /* after idle time a packet waits for the next opportunity; one at an opportunity leaves at once */
    offer(&s, &r, mkpkt(1500, 124 * MS, 10)); /* opportunities ... 20, 20, 23, 27, 30, 30, 30, 33, 37 */
    offer(&s, &r, mkpkt(1500, 134 * MS, 11));
    offer(&s, &r, mkpkt(1500, 2000 * MS + 7 * MS, 12)); /* many loops later, exactly on an opportunity */
    advance(&s, &r, 3000 * MS);
    CHECK(r.out_at[10] == 127 * MS && r.out_at[11] == 137 * MS && r.out_at[12] == 2007 * MS,
          "after idle: %lld %lld %lld", (long long)r.out_at[10], (long long)r.out_at[11], (long long)r.out_at[12]);
    rate_stage_ops.destroy(&s.base, free_pkt, NULL);
    trace_free(&t);
}

static void test_trace_bytes(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct trace t = trace_of("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    struct dir_config c = cfg_with((const char *[]){"queue_packets=0", NULL});
    c.trace = &t;
    struct rate_stage s;
    rate_init(&s, &c, 0);
    /* three 500-byte packets share one opportunity; the fourth starts the next one */
    for (int i = 0; i < 4; i++)
        offer(&s, &r, mkpkt(500, 0, (uint64_t)i));
    /* 3000 bytes take two opportunities (impossible at MTU 1500, defined anyway): 1000 B of the 2nd
     * opportunity, all of the 3rd, 500 B of the 4th; the small one after it rides along in the 4th */
    offer(&s, &r, mkpkt(3000, 0, 4));
    offer(&s, &r, mkpkt(1000, 0, 5));
    advance(&s, &r, 100 * MS);
    int64_t want[] = {1, 1, 1, 2, 4, 4};
    for (int i = 0; i < 6; i++)
        CHECK(r.out_at[i] == want[i] * MS, "small/large packet %d out at %lld", i, (long long)r.out_at[i]);
    rate_stage_ops.destroy(&s.base, free_pkt, NULL);
    trace_free(&t);
}

static void test_trace_queue_limit(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct trace t = trace_of("10\n20\n30\n40\n");
    struct dir_config c = cfg_with((const char *[]){"queue_packets=5", NULL});
    c.trace = &t;
    struct rate_stage s;
    rate_init(&s, &c, 0);
    /* 20 packets every 2 ms, one opportunity every 10 ms: the queue fills, then drops */
    for (int i = 0; i < 20; i++)
        offer(&s, &r, mkpkt(1500, i * 2 * MS, (uint64_t)i));
    advance(&s, &r, 1000 * MS);
    CHECK(r.delivered + r.limit_drops == 20 && r.limit_drops > 0 && r.aqm_drops == 0, "delivered %d, dropped %d",
          r.delivered, r.limit_drops);
    CHECK(s.peak_packets == 5, "peak %u", s.peak_packets);
    for (int i = 0; i < r.delivered; i++)
        CHECK(r.out_at[i] == (i + 1) * 10 * MS, "queued packet %d out at %lld", i, (long long)r.out_at[i]);
    rate_stage_ops.destroy(&s.base, free_pkt, NULL);
    trace_free(&t);
}

/* ---- phase restarts at new connections ---------------------------------------------------------- */

/* An IPv4 TCP segment from 10.0.0.1:port to 10.0.0.2:443. */
static struct pkt *tcp_pkt(uint16_t port, uint32_t seq, uint8_t flags, int64_t t)
{
    struct pkt *p = calloc(1, sizeof(*p));
    p->data = calloc(1, 40);
    p->len = p->cap = 40;
    p->t = p->arrival = t;
    uint8_t *d = p->data;
    d[0] = 0x45;
    d[3] = 40;
    d[8] = 64;
    d[9] = 6;
    d[12] = 10, d[15] = 1;
    d[16] = 10, d[19] = 2;
    d[20] = (uint8_t)(port >> 8), d[21] = (uint8_t)port;
    d[22] = 443 >> 8, d[23] = 443 & 0xff;
    d[24] = (uint8_t)(seq >> 24), d[25] = (uint8_t)(seq >> 16), d[26] = (uint8_t)(seq >> 8), d[27] = (uint8_t)seq;
    d[32] = 5 << 4;
    d[33] = flags;
    return p;
}

static int drop_out(void *ctx, struct pkt *p, int64_t now) { return 0; }

static void test_phase_sequence(void)
{
    struct trace_phase a, b, other;
    phase_init(&a, 42);
    phase_init(&b, 42);
    phase_init(&other, 43);
    atomic_store(&a.active, true);
    double ua[5], ub[5], uo[5];
    uint64_t sa = 0, sb = 0, so = 0;
    int64_t at;
    for (int i = 0; i < 5; i++) {
        phase_restart(&a, i * MS);
        phase_restart(&b, i * MS);
        phase_restart(&other, i * MS);
        CHECK(phase_poll(&a, &sa, &at, &ua[i]) && at == i * MS, "poll a");
        phase_poll(&b, &sb, &at, &ub[i]);
        phase_poll(&other, &so, &at, &uo[i]);
        CHECK(ua[i] >= 0 && ua[i] < 1, "u in [0, 1)");
    }
    CHECK(!memcmp(ua, ub, sizeof(ua)), "the same seed gave different offsets");
    CHECK(memcmp(ua, uo, sizeof(ua)), "another seed gave the same offsets");
    CHECK(!phase_poll(&a, &sa, &at, &ua[0]), "nothing new to poll");
    /* a reset restarts the sequence: the next connection meets the first offset again */
    phase_reseed(&a, 42);
    double u;
    phase_restart(&a, 10 * MS);
    phase_poll(&a, &sa, &at, &u);
    CHECK(u == ub[0] && cnt_get(&a.restarts) == 1, "after reseed u %.6f, want %.6f", u, ub[0]);

    /* SYNs: a new connection restarts, its retransmission and other segments do not */
    struct trace_phase ph;
    phase_init(&ph, 7);
    struct pkt *syn = tcp_pkt(40000, 1000, 0x02, 0), *again = tcp_pkt(40000, 1000, 0x02, 0),
               *ack = tcp_pkt(40000, 1001, 0x10, 0), *synack = tcp_pkt(40000, 5, 0x12, 0),
               *next = tcp_pkt(40001, 77, 0x02, 0);
    CHECK(!phase_note(&ph, syn->data, syn->len, 1), "inactive phase restarted");
    atomic_store(&ph.active, true);
    CHECK(phase_note(&ph, syn->data, syn->len, 1), "SYN did not restart");
    CHECK(!phase_note(&ph, again->data, again->len, 2), "retransmitted SYN restarted");
    CHECK(!phase_note(&ph, ack->data, ack->len, 3) && !phase_note(&ph, synack->data, synack->len, 3),
          "ACK or SYN-ACK restarted");
    CHECK(phase_note(&ph, next->data, next->len, 4) && cnt_get(&ph.restarts) == 2, "second connection");
    struct pkt *all[] = {syn, again, ack, synack, next};
    for (int i = 0; i < 5; i++) {
        free(all[i]->data);
        free(all[i]);
    }
}

/* An IPv4 UDP datagram from 10.0.0.1:port to 10.0.0.2:443 whose 1200-byte payload opens with a QUIC
 * long header (first byte, version 1, 8-byte DCID and SCID of one byte each) or, for first < 0x80, a
 * short header. */
static struct pkt *quic_pkt(uint16_t port, uint8_t first, uint8_t dcid, uint8_t scid)
{
    struct pkt *p = calloc(1, sizeof(*p));
    uint32_t len = 20 + 8 + 1200;
    p->data = calloc(1, len);
    p->len = p->cap = len;
    uint8_t *d = p->data, *q = d + 28;
    d[0] = 0x45;
    d[2] = (uint8_t)(len >> 8), d[3] = (uint8_t)len;
    d[8] = 64;
    d[9] = 17;
    d[12] = 10, d[15] = 1;
    d[16] = 10, d[19] = 2;
    d[20] = (uint8_t)(port >> 8), d[21] = (uint8_t)port;
    d[22] = 443 >> 8, d[23] = 443 & 0xff;
    d[24] = (uint8_t)((len - 20) >> 8), d[25] = (uint8_t)(len - 20);
    q[0] = first;
    if (first & 0x80) {
        q[4] = 1;
        q[5] = 8;
        memset(q + 6, dcid, 8);
        q[14] = 8;
        memset(q + 15, scid, 8);
    }
    return p;
}

/* QUIC: a client Initial opens a connection like a SYN, once per (ports, source connection ID): not its
 * retransmission, not its Initials to the server's ID after the server's first packet or a Retry,
 * not its Handshake or 1-RTT packets; a new SCID on a reused port does. The offsets are the same
 * sequence as for TCP connections. */
static void test_phase_quic(void)
{
    struct trace_phase ph, tcp_ph;
    phase_init(&ph, 7);
    phase_init(&tcp_ph, 7);
    atomic_store(&ph.active, true);
    atomic_store(&tcp_ph.active, true);
    struct pkt *first = quic_pkt(40000, 0xc0, 0x11, 0xa1), *again = quic_pkt(40000, 0xc0, 0x11, 0xa1),
               *after_retry = quic_pkt(40000, 0xc0, 0x77, 0xa1), *handshake = quic_pkt(40000, 0xe0, 0x77, 0xa1),
               *short_hdr = quic_pkt(40000, 0x40, 0, 0), *reused = quic_pkt(40000, 0xc0, 0x22, 0xb2),
               *other = quic_pkt(40001, 0xc0, 0x33, 0xc3);
    uint64_t seen = 0, tcp_seen = 0;
    int64_t at;
    double u, tcp_u;
    CHECK(phase_note(&ph, first->data, first->len, 1 * MS), "the first Initial did not restart");
    CHECK(phase_poll(&ph, &seen, &at, &u) && at == 1 * MS, "restart at the Initial's arrival");
    phase_restart(&tcp_ph, 1 * MS); /* the first TCP connection meets the first offset: so does QUIC's */
    phase_poll(&tcp_ph, &tcp_seen, &at, &tcp_u);
    CHECK(u == tcp_u, "first QUIC offset %.6f, TCP %.6f", u, tcp_u);
    CHECK(!phase_note(&ph, again->data, again->len, 300 * MS), "retransmitted Initial restarted");
    CHECK(!phase_note(&ph, after_retry->data, after_retry->len, 301 * MS), "Initial after a Retry restarted");
    CHECK(!phase_note(&ph, handshake->data, handshake->len, 302 * MS) &&
              !phase_note(&ph, short_hdr->data, short_hdr->len, 303 * MS),
          "Handshake or 1-RTT packet restarted");
    CHECK(phase_note(&ph, reused->data, reused->len, 400 * MS), "new SCID on a reused port did not restart");
    CHECK(phase_note(&ph, other->data, other->len, 401 * MS) && cnt_get(&ph.restarts) == 3, "restarts %llu",
          (unsigned long long)cnt_get(&ph.restarts));
    struct pkt *all[] = {first, again, after_retry, handshake, short_hdr, reused, other};
    for (int i = 0; i < 7; i++) {
        free(all[i]->data);
        free(all[i]);
    }
}

/* A client SYN restarts both directions' traces at the seeded offset, from the SYN's time on. */
static void test_phase_pipelines(void)
{
    static struct dir_counters cc, sc;
    memset(&cc, 0, sizeof(cc));
    memset(&sc, 0, sizeof(sc));
    struct trace up = trace_of("0\n100\n200\n300\n400\n500\n600\n700\n800\n900\n1000\n");
    struct trace down = trace_of("0\n10\n20\n30\n40\n50\n60\n70\n80\n90\n100\n110\n120\n130\n140\n150\n160\n170\n"
                                 "180\n190\n200\n");
    struct dir_config c = cfg_with((const char *[]){"seed=9", NULL}), d = c;
    c.trace = &up;
    d.trace = &down;
    struct trace_phase ph;
    phase_init(&ph, c.seed);
    atomic_store(&ph.active, true);
    struct pipeline c2s, s2c;
    pipeline_init(&c2s, DIR_C2S, &c, &cc);
    pipeline_init(&s2c, DIR_S2C, &d, &sc);
    c2s.output = s2c.output = drop_out;
    c2s.phase = s2c.phase = &ph;
    struct pkt *syn = tcp_pkt(40000, 1, 0x02, 0);
    struct pkt *p = pkt_get(&c2s.pool, 64);
    memcpy(p->data, syn->data, 40);
    p->len = 40;
    pipeline_input(&c2s, p, 5000 * MS);
    struct trace_phase ref;
    phase_init(&ref, 9);
    phase_restart(&ref, 0);
    uint64_t seen = 0;
    int64_t at;
    double u;
    phase_poll(&ref, &seen, &at, &u);
    int64_t off_up = trace_offset_ns(&up, u), off_down = trace_offset_ns(&down, u);
    CHECK(c2s.rate.anchored && c2s.rate.epoch == 5000 * MS - off_up && c2s.rate.offset_ns == off_up,
          "c2s epoch %lld offset %lld, want offset %lld", (long long)c2s.rate.epoch, (long long)c2s.rate.offset_ns,
          (long long)off_up);
    /* the other direction follows at its next pump, from the SYN's time */
    pipeline_pump(&s2c, 5003 * MS);
    CHECK(s2c.rate.anchored && s2c.rate.epoch == 5000 * MS - off_down && off_down % MS == 0 && off_down < 200 * MS,
          "s2c epoch %lld offset %lld", (long long)s2c.rate.epoch, (long long)off_down);
    /* the SYN itself left at the first opportunity of the up trace at or after its arrival */
    int64_t next_up = 5000 * MS - off_up + ((off_up + 100 * MS - 1) / (100 * MS)) * 100 * MS;
    CHECK(cnt_get(&cc.fwd_packets) == 0 && pipeline_next_deadline(&c2s) == next_up, "SYN due at %lld, want %lld (forwarded %llu)",
          (long long)pipeline_next_deadline(&c2s), (long long)next_up,
          (unsigned long long)cnt_get(&cc.fwd_packets));
    pipeline_pump(&c2s, next_up);
    CHECK(cnt_get(&cc.fwd_packets) == 1, "SYN forwarded at its opportunity");
    free(syn->data);
    free(syn);
    pipeline_destroy(&c2s);
    pipeline_destroy(&s2c);
    trace_free(&up);
    trace_free(&down);
}

/* ---- CoDel ----------------------------------------------------------------------------------------- */

/* A standing queue: 100 packets at once (100 ms of work at 1 ms per packet), then arrivals at exactly
 * the service rate, so without management the queue never shrinks. */
static void standing_queue(struct rate_stage *s, struct run *r, int seconds)
{
    uint64_t seq = 0;
    for (int i = 0; i < 100; i++)
        offer(s, r, mkpkt(1500, 0, seq++));
    for (int64_t t = 1 * MS; t < seconds * 1000 * MS; t += 1 * MS)
        offer(s, r, mkpkt(1500, t, seq++));
    advance(s, r, (seconds + 1) * 1000 * MS);
}

static void test_codel_standing_queue(void)
{
    static struct run tail, codel;
    memset(&tail, 0, sizeof(tail));
    memset(&codel, 0, sizeof(codel));
    struct rate_stage s;
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", NULL});
    rate_init(&s, &c, 0);
    standing_queue(&s, &tail, 3);
    CHECK(tail.aqm_drops == 0 && tail.sojourn[2900] >= 98 * MS, "drop-tail keeps the queue: sojourn %lld",
          (long long)tail.sojourn[2900]);

    c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", "aqm=codel", NULL});
    rate_init(&s, &c, 0);
    standing_queue(&s, &codel, 6);
    /* the packet served at 5 ms is the first to have waited the target: the first drop one interval later */
    CHECK(codel.first_drop == 105 * MS, "first drop at %lld", (long long)codel.first_drop);
    /* RFC 8289's control law: after the n-th drop of an episode the next comes interval/sqrt(n) later
     * (served on a 1 ms grid here, so up to 1 ms later) */
    for (int n = 1; n <= 5; n++) {
        double gap = (double)(codel.drop_at[n] - codel.drop_at[n - 1]), want = 100.0 * MS / sqrt(n);
        CHECK(gap >= want && gap - want <= 1.0 * MS, "drop gap %d: %.3f ms, want %.3f", n, gap / MS, want / MS);
    }
    /* the standing queue is gone: every packet of the last two seconds waited about the target */
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = codel.delivered - 2000; i < codel.delivered; i++) {
        lo = codel.sojourn[i] < lo ? codel.sojourn[i] : lo;
        hi = codel.sojourn[i] > hi ? codel.sojourn[i] : hi;
    }
    CHECK(lo >= 3 * MS && hi <= 6 * MS, "CoDel sojourn in the last 2 s: %.3f..%.3f ms (target 5)", (double)lo / MS,
          (double)hi / MS);
    CHECK(codel.delivered + codel.aqm_drops == 6099, "every packet accounted for: %d + %d", codel.delivered,
          codel.aqm_drops);

    /* below target: short bursts of 4 at 80 % load never wait 5 ms: no drops */
    static struct run light;
    memset(&light, 0, sizeof(light));
    rate_init(&s, &c, 0);
    for (int i = 0; i < 4000; i++)
        offer(&s, &light, mkpkt(1500, (i / 4) * 5 * MS, (uint64_t)i));
    advance(&s, &light, 10000 * MS);
    CHECK(light.aqm_drops == 0 && light.delivered == 4000, "below target: %d drops", light.aqm_drops);
}

static void test_codel_overload(void)
{
    /* unresponsive traffic 20 % above the rate: CoDel's drop rate grows until it drops the excess
     * (1/6 of the arrivals). It is built for flows that back off: against this one the RFC's re-entry
     * rule (count = drops of the last episode) makes it oscillate between a few ms and a few hundred,
     * so only a bound is checked, where drop-tail's unbounded queue would grow by 12 s per minute. */
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.window_from = 30000 * MS;
    struct rate_stage s;
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", "aqm=codel", NULL});
    rate_init(&s, &c, 0);
    int n = 0;
    for (int64_t t = 0; t < 60000 * MS; t += 833333, n++)
        offer(&s, &r, mkpkt(1500, t, (uint64_t)n));
    advance(&s, &r, 70000 * MS);
    double share = (double)r.aqm_drops / n, mean = r.window_sum / r.window_n / MS;
    CHECK(fabs(share - 1.0 / 6) < 0.01, "CoDel dropped %.3f of the arrivals, the excess is 1/6", share);
    CHECK(mean < 400, "CoDel's mean sojourn under overload %.1f ms", mean);
}

/* With ECN on, ECN-capable packets are marked instead of dropped, with a valid header checksum. */
static void test_codel_ecn(void)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    struct rate_stage s;
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", "aqm=codel", "ecn=1", NULL});
    rate_init(&s, &c, 0);
    uint64_t seq = 0;
    for (int64_t t = 0; t < 3000 * MS; t += (seq < 100 ? 0 : 1 * MS)) {
        struct pkt *p = mkpkt(1500, t, seq++);
        p->data = calloc(1, 1500);
        p->cap = 1500;
        uint8_t *d = p->data;
        d[0] = 0x45, d[1] = 0x02 /* ECT(0) */, d[2] = 1500 >> 8, d[3] = 1500 & 0xff, d[8] = 64, d[9] = 17;
        uint32_t sum = 0;
        for (int i = 0; i < 20; i += 2)
            sum += (uint32_t)(d[i] << 8 | d[i + 1]);
        while (sum >> 16)
            sum = (sum & 0xffff) + (sum >> 16);
        d[10] = (uint8_t)(~sum >> 8), d[11] = (uint8_t)~sum;
        offer(&s, &r, p);
    }
    struct pkt probe = {0};
    uint8_t hdr[20] = {0x45, 0x01, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2};
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += (uint32_t)(hdr[i] << 8 | hdr[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    hdr[10] = (uint8_t)(~sum >> 8), hdr[11] = (uint8_t)~sum;
    probe.data = hdr;
    probe.len = 20;
    CHECK(ecn_mark(&probe) && (hdr[1] & 3) == 3, "ECT(1) marked");
    sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += (uint32_t)(hdr[i] << 8 | hdr[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    CHECK(sum == 0xffff, "checksum after marking: %#x", sum);
    hdr[1] = 0;
    CHECK(!ecn_mark(&probe), "not-ECT packet marked");
    advance(&s, &r, 10000 * MS);
    CHECK(r.aqm_drops == 0 && r.marks > 0, "ECN: %d drops, %d marks", r.aqm_drops, r.marks);
}

/* ---- PIE --------------------------------------------------------------------------------------------- */

/* The controller's arithmetic against RFC 8033: the step, its scaling at small probabilities,
 * the 2 % cap above 10 %, the idle decay and the burst allowance. */
static void test_pie_update_rules(void)
{
    struct pie p = {0};
    struct pkt head = {.len = 1500};
    struct pkt_fifo q = {.head = &head, .tail = &head, .packets = 1, .bytes = 1500};
    pie_init(&p, 15 * MS, 15 * MS, 150 * MS, 0.125, 1.25);
    head.t = 1000 * MS - 30 * MS; /* 30 ms of queueing delay */
    p.qdelay_old = 30 * MS;
    pie_update(&p, &q, 1000 * MS);
    double want = 0.125 * 0.015 / 2048;
    CHECK(fabs(p.prob - want) < 1e-15, "first step %.3g, want %.3g", p.prob, want);
    p.prob = 0.05; /* in [1 %, 10 %): half steps */
    pie_update(&p, &q, 1000 * MS);
    CHECK(fabs(p.prob - (0.05 + 0.125 * 0.015 / 2)) < 1e-12, "half step: %.6f", p.prob);
    p.prob = 0.5;
    p.qdelay_old = 0; /* a big trend: beta * 30 ms = 3.75 %, capped at 2 % */
    pie_update(&p, &q, 1000 * MS);
    CHECK(fabs(p.prob - 0.52) < 1e-12, "capped step: %.6f", p.prob);
    q.head = NULL, q.packets = 0, q.bytes = 0;
    p.prob = 0.5;
    p.qdelay_old = 0; /* idle: alpha pulls down by 0.125 * 15 ms, then the 2 % decay */
    pie_update(&p, &q, 1000 * MS);
    CHECK(fabs(p.prob - (0.5 - 0.125 * 0.015) * 0.98) < 1e-12, "idle decay: %.6f", p.prob);
    CHECK(p.burst_left == 150 * MS - 4 * 15 * MS, "burst allowance %lld after 4 updates", (long long)p.burst_left);
    p.prob = 0;
    pie_update(&p, &q, 1000 * MS);
    CHECK(p.burst_left == 150 * MS, "burst allowance refilled when calm: %lld", (long long)p.burst_left);
}

/* Drop probability after one second of a standing queue of the given delay. */
static double pie_prob_after(int64_t delay)
{
    struct pie p = {0};
    struct pkt head = {.len = 1500};
    struct pkt_fifo q = {.head = &head, .tail = &head, .packets = 10, .bytes = 15000};
    pie_init(&p, 15 * MS, 15 * MS, 0, 0.125, 1.25);
    for (int64_t t = 15 * MS; t <= 1000 * MS; t += 15 * MS) {
        head.t = t - delay;
        pie_update(&p, &q, t);
    }
    return p.prob;
}

static void test_pie_prob_rises_with_delay(void)
{
    double p5 = pie_prob_after(5 * MS), p20 = pie_prob_after(20 * MS), p40 = pie_prob_after(40 * MS),
           p80 = pie_prob_after(80 * MS), p200 = pie_prob_after(200 * MS);
    CHECK(p5 == 0 && 0 < p20 && p20 < p40 && p40 < p80 && p80 < p200,
          "prob at 5/20/40/80/200 ms: %.3g %.3g %.3g %.3g %.3g", p5, p20, p40, p80, p200);
}

static void test_pie_overload(void)
{
    /* unresponsive traffic 20 % above the rate for 60 s: PIE's integral term holds the queueing delay
     * at the target while it drops the excess (1/6 of the arrivals). Over the last 30 s the mean
     * sojourn of seeds 1..5 came to 14.9..15.1 ms: the random drops make the delay wander by a few ms
     * between updates but not on average, so +-10 % of the target is a bound no seed comes near. */
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.window_from = 30000 * MS;
    struct rate_stage s;
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", "aqm=pie", "seed=3", NULL});
    rate_init(&s, &c, 0);
    int n = 0;
    for (int64_t t = 0; t < 60000 * MS; t += 833333, n++)
        offer(&s, &r, mkpkt(1500, t, (uint64_t)n));
    advance(&s, &r, 70000 * MS);
    double share = (double)r.aqm_drops / n, mean = r.window_sum / r.window_n / MS;
    CHECK(fabs(share - 1.0 / 6) < 0.01, "PIE dropped %.3f of the arrivals, the excess is 1/6", share);
    CHECK(fabs(mean - 15) < 1.5, "PIE's mean sojourn under overload %.2f ms, target 15", mean);
    CHECK(s.q.pie.prob > 0.1 && s.q.pie.prob < 0.3, "drop probability %.3f", s.q.pie.prob);
}

static void test_pie_burst_allowance(void)
{
    /* 200 packets in 100 ms into a link that serves one per ms: the queue builds 100 ms of delay, but
     * the burst is shorter than max_burst (150 ms): nothing is dropped */
    static struct run burst, longer;
    memset(&burst, 0, sizeof(burst));
    memset(&longer, 0, sizeof(longer));
    struct rate_stage s;
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", "aqm=pie", NULL});
    rate_init(&s, &c, 0);
    offer(&s, &burst, mkpkt(1500, 0, 0)); /* the controller's clock starts */
    advance(&s, &burst, 1000 * MS);
    for (int i = 0; i < 200; i++)
        offer(&s, &burst, mkpkt(1500, 1000 * MS + i * 500 * US, (uint64_t)i + 1));
    advance(&s, &burst, 3000 * MS);
    int64_t peak = 0;
    for (int i = 0; i < burst.delivered; i++)
        peak = burst.sojourn[i] > peak ? burst.sojourn[i] : peak;
    CHECK(burst.aqm_drops == 0 && peak >= 90 * MS, "burst: %d drops, peak delay %.1f ms", burst.aqm_drops,
          (double)peak / MS);
    /* the same overload for a second outlasts the allowance: drops */
    rate_init(&s, &c, 0);
    offer(&s, &longer, mkpkt(1500, 0, 0));
    advance(&s, &longer, 1000 * MS);
    for (int i = 0; i < 2000; i++)
        offer(&s, &longer, mkpkt(1500, 1000 * MS + i * 500 * US, (uint64_t)i + 1));
    advance(&s, &longer, 5000 * MS);
    CHECK(longer.aqm_drops > 0, "a sustained overload was never dropped from");
}

int main(void)
{
    test_trace_parse();
    test_trace_file_and_config();
    test_trace_delivers_at_opportunities();
    test_trace_bytes();
    test_trace_queue_limit();
    test_phase_sequence();
    test_phase_pipelines();
    test_phase_quic();
    test_codel_standing_queue();
    test_codel_overload();
    test_codel_ecn();
    test_pie_update_rules();
    test_pie_prob_rises_with_delay();
    test_pie_overload();
    test_pie_burst_allowance();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
