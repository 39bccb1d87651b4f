/* Unit tests of pqlink's stages and pipeline on a virtual clock (no root, no devices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "delay.h"
#include "hist.h"
#include "loss.h"
#include "middlebox.h"
#include "pipeline.h"
#include "rate.h"

#include "check.h"
#include "test_support.h"


/* ---- loss ------------------------------------------------------------------------------- */

static void test_bernoulli(void)
{
    struct dir_config c = cfg_with((const char *[]){"loss=0.1", "seed=42", NULL});
    struct loss_stage a, b, other;
    loss_init(&a, &c, 0);
    loss_init(&b, &c, 0);
    c.seed = 43;
    loss_init(&other, &c, 0);
    int n = 200000, lost = 0, same = 1, differ = 0;
    for (int i = 0; i < n; i++) {
        bool x = loss_decide(&a), y = loss_decide(&b), z = loss_decide(&other);
        lost += x;
        same &= x == y;
        differ |= x != z;
    }
    double sd = sqrt(n * 0.1 * 0.9);
    CHECK(fabs(lost - n * 0.1) < 4.5 * sd, "lost %d of %d at p=0.1", lost, n);
    CHECK(same, "the same seed gave different loss sequences");
    CHECK(differ, "different seeds gave the same loss sequence");

    struct loss_stage d0, d1; /* the two directions use independent streams */
    c.seed = 42;
    loss_init(&d0, &c, 0);
    loss_init(&d1, &c, 1);
    int diff = 0;
    for (int i = 0; i < 1000; i++)
        diff |= loss_decide(&d0) != loss_decide(&d1);
    CHECK(diff, "both directions drew the same loss sequence");

    struct dir_config none = cfg_with(NULL);
    struct loss_stage z;
    loss_init(&z, &none, 0);
    int any = 0;
    for (int i = 0; i < 10000; i++)
        any |= loss_decide(&z);
    CHECK(!any, "loss without a model dropped a packet");

    /* A restart replays the seed's sequence from its start. */
    struct loss_stage r;
    c.seed = 42;
    loss_init(&r, &c, 0);
    bool first[500];
    for (int i = 0; i < 500; i++)
        first[i] = loss_decide(&r);
    loss_restart(&r, &c, 0);
    int replayed = 1;
    for (int i = 0; i < 500; i++)
        replayed &= loss_decide(&r) == first[i];
    CHECK(replayed, "a restarted loss stage did not replay its seed's sequence");
}

static void test_gemodel_order(void)
{
    /* netem decides the transition first, then loss with the probability of the state the
     * packet arrived in: from good with p=1 the first packet survives, then all are lost. */
    struct dir_config c = cfg_with((const char *[]){"ge_p=1", "ge_r=0", "ge_1h=1", "ge_1k=0", NULL});
    struct loss_stage s;
    loss_init(&s, &c, 0);
    CHECK(!loss_decide(&s), "first packet (good state) lost");
    for (int i = 0; i < 5; i++)
        CHECK(loss_decide(&s), "packet %d in the bad state survived", i + 2);

    c = cfg_with((const char *[]){"ge_p=1", "ge_r=1", "ge_1h=1", "ge_1k=0", NULL});
    loss_init(&s, &c, 0);
    for (int i = 0; i < 8; i++)
        CHECK(loss_decide(&s) == (i % 2 == 1), "alternating states: packet %d", i);

    c = cfg_with((const char *[]){"ge_p=0", "ge_1k=1", NULL});
    loss_init(&s, &c, 0);
    CHECK(loss_decide(&s) && loss_decide(&s), "1-k = 1 loses every packet in the good state");
}

static void test_gemodel_rate(void)
{
    double p = 0.01, r = 0.3, h1 = 0.5, k1 = 0.002;
    struct dir_config c = cfg_with((const char *[]){"ge_p=0.01", "ge_r=0.3", "ge_1h=0.5", "ge_1k=0.002", NULL});
    struct loss_stage s;
    loss_init(&s, &c, 0);
    int n = 2000000, lost = 0;
    for (int i = 0; i < n; i++)
        lost += loss_decide(&s);
    double pi_bad = p / (p + r), expect = (1 - pi_bad) * k1 + pi_bad * h1;
    CHECK(fabs((double)lost / n - expect) < 0.05 * expect, "GE loss %.5f, stationary %.5f", (double)lost / n,
          expect);
}

/* ---- rate limiter and queue -------------------------------------------------------------- */

static void test_rate(void)
{
    struct dir_config c = cfg_with((const char *[]){"rate_bps=12000000", "queue_packets=0", NULL});
    struct rate_stage s;
    rate_init(&s, &c, 0);
    CHECK(rate_ser_ns(&s, 1500) == 1 * MS, "1500 B at 12 Mbit/s took %lld ns", (long long)rate_ser_ns(&s, 1500));
    for (int i = 0; i < 3; i++)
        CHECK(stage_enqueue(&s.base, mkpkt(1500, 0, i)) == V_ACCEPT, "enqueue %d", i);
    CHECK(stage_next_deadline(&s.base) == 1 * MS, "first departure at %lld", (long long)stage_next_deadline(&s.base));
    CHECK(stage_dequeue(&s.base, 1 * MS - 1) == NULL, "left before its serialisation ended");
    for (int i = 1; i <= 3; i++) {
        struct pkt *p = stage_dequeue(&s.base, 10 * MS); /* dequeued late: times stay ideal */
        CHECK(p && p->t == i * MS, "packet %d left at %lld", i, p ? (long long)p->t : -1LL);
        free(p);
    }
    /* an idle link starts serialising on arrival, not at the end of the previous packet */
    stage_enqueue(&s.base, mkpkt(1500, 20 * MS, 3));
    struct pkt *p = stage_dequeue(&s.base, 30 * MS);
    CHECK(p && p->t == 21 * MS, "after idle left at %lld", p ? (long long)p->t : -1LL);
    free(p);

    c.overhead = 100; /* per-packet overhead counts at the rate */
    rate_configure(&s, &c);
    CHECK(rate_ser_ns(&s, 1400) == 1 * MS, "1400+100 B took %lld ns", (long long)rate_ser_ns(&s, 1400));

    c.rate_bps = 0; /* unlimited: no time, no queue limit */
    c.queue_packets = 1;
    rate_configure(&s, &c);
    for (int i = 0; i < 5; i++)
        CHECK(stage_enqueue(&s.base, mkpkt(1500, 50 * MS, i)) == V_ACCEPT, "unlimited enqueue %d", i);
    for (int i = 0; i < 5; i++) {
        p = stage_dequeue(&s.base, 50 * MS);
        CHECK(p && p->t == 50 * MS, "unlimited packet %d delayed", i);
        free(p);
    }
}

static void test_queue_limits(void)
{
    struct dir_config c = cfg_with((const char *[]){"rate_bps=1000000", "queue_packets=3", NULL});
    struct rate_stage s;
    rate_init(&s, &c, 0);
    int drops = 0;
    for (int i = 0; i < 5; i++) {
        struct pkt *p = mkpkt(1000, 0, i);
        if (stage_enqueue(&s.base, p) == V_DROP_QUEUE) {
            drops++;
            free(p);
        }
    }
    CHECK(drops == 2 && s.peak_packets == 3, "packet limit 3: %d drops, peak %u", drops, s.peak_packets);
    /* once the head has left there is room for one more (the one in service counted) */
    free(stage_dequeue(&s.base, 8 * MS));
    struct pkt *p = mkpkt(1000, 8 * MS, 9);
    CHECK(stage_enqueue(&s.base, p) == V_ACCEPT, "room after a departure");
    p = mkpkt(1000, 8 * MS, 10);
    CHECK(stage_enqueue(&s.base, p) == V_DROP_QUEUE, "full again");
    free(p);
    while ((p = stage_dequeue(&s.base, 1000 * MS)))
        free(p);

    c.queue_packets = 0;
    c.queue_bytes = 3000;
    rate_configure(&s, &c);
    int accepted = 0;
    for (int i = 0; i < 4; i++) {
        p = mkpkt(1400, 2000 * MS, i);
        if (stage_enqueue(&s.base, p) == V_ACCEPT)
            accepted++;
        else
            free(p);
    }
    CHECK(accepted == 2, "byte limit 3000 took %d packets of 1400 B", accepted);
    while ((p = stage_dequeue(&s.base, 5000 * MS)))
        free(p);
}

/* ---- delay ------------------------------------------------------------------------------- */

static void test_delay_constant(void)
{
    struct dir_config c = cfg_with((const char *[]){"delay_ns=10000000", NULL});
    struct delay_stage s;
    delay_init(&s, &c, 0);
    stage_enqueue(&s.base, mkpkt(100, 5 * MS, 0));
    stage_enqueue(&s.base, mkpkt(100, 6 * MS, 1));
    CHECK(stage_next_deadline(&s.base) == 15 * MS, "deadline %lld", (long long)stage_next_deadline(&s.base));
    CHECK(stage_dequeue(&s.base, 15 * MS - 1) == NULL, "left early");
    struct pkt *p = stage_dequeue(&s.base, 15 * MS);
    CHECK(p && p->seq == 0 && p->t == 15 * MS, "first out");
    free(p);
    /* a shorter delay set live does not let new packets overtake the ones in flight */
    c.delay_ns = 1 * MS;
    delay_configure(&s, &c, 0);
    stage_enqueue(&s.base, mkpkt(100, 7 * MS, 2));
    p = stage_dequeue(&s.base, 100 * MS);
    CHECK(p && p->seq == 1 && p->t == 16 * MS, "in flight keeps its deadline");
    free(p);
    p = stage_dequeue(&s.base, 100 * MS);
    CHECK(p && p->seq == 2 && p->t == 16 * MS, "new packet waits behind: seq %llu t %lld",
          p ? (unsigned long long)p->seq : 99ULL, p ? (long long)p->t : -1LL);
    free(p);
    CHECK(stage_next_deadline(&s.base) == NEVER_DEADLINE, "empty stage has no deadline");
    delay_destroy(&s, NULL, NULL);
}

static int jitter_run(bool reorder, int *out_of_order)
{
    const char *kv[] = {"delay_ns=10000000", "jitter_ns=5000000", reorder ? "reorder=1" : "reorder=0", NULL};
    struct dir_config c = cfg_with(kv);
    struct delay_stage s;
    delay_init(&s, &c, 0);
    int n = 2000, bad = 0;
    for (int i = 0; i < n; i++)
        stage_enqueue(&s.base, mkpkt(100, i * 10 * US, i));
    uint64_t last = 0;
    int64_t last_t = 0;
    *out_of_order = 0;
    for (int i = 0; i < n; i++) {
        struct pkt *p = stage_dequeue(&s.base, INT64_MAX - 1);
        int64_t sent = (int64_t)p->seq * 10 * US;
        if (p->t < sent + 5 * MS || p->t > sent + 15 * MS)
            bad++;
        if (i && p->seq < last)
            (*out_of_order)++;
        if (p->t < last_t)
            bad++;
        last = p->seq;
        last_t = p->t;
        free(p);
    }
    delay_destroy(&s, NULL, NULL);
    return bad;
}

static void test_delay_jitter(void)
{
    int ooo;
    int bad = jitter_run(false, &ooo);
    CHECK(bad == 0 && ooo == 0, "FIFO jitter: %d out of bounds, %d reordered", bad, ooo);
    bad = jitter_run(true, &ooo);
    CHECK(bad == 0 && ooo > 100, "reordering jitter: %d out of bounds, %d reordered", bad, ooo);
}

/* ---- the whole pipeline on a virtual clock -------------------------------------------------- */

struct sink {
    int n;
    uint64_t seq[4096];
    int64_t at[4096];
    int drops[4];
    uint64_t dropped_seq[4096];
    int ndropped;
};

static int sink_out(void *ctx, struct pkt *p, int64_t now)
{
    struct sink *k = ctx;
    k->seq[k->n] = p->seq;
    k->at[k->n++] = now;
    return 0;
}

static void sink_drop(void *ctx, const struct pkt *p, enum verdict why, int64_t now)
{
    struct sink *k = ctx;
    k->drops[why]++;
    k->dropped_seq[k->ndropped++] = p->seq;
}

static void run_virtual(struct pipeline *pl, int64_t until, int64_t late_by)
{
    for (;;) {
        int64_t next = pipeline_next_deadline(pl);
        if (next == NEVER_DEADLINE || next > until)
            return;
        pipeline_pump(pl, next + late_by);
    }
}

static void feed(struct pipeline *pl, int n, uint32_t len, int64_t t0, int64_t gap)
{
    for (int i = 0; i < n; i++) {
        int64_t t = t0 + i * gap;
        run_virtual(pl, t, 0);
        struct pkt *p = pkt_get(&pl->pool, len);
        p->len = len;
        pipeline_input(pl, p, t);
    }
}

static void test_pipeline_timing(void)
{
    static struct dir_counters cnt;
    static struct sink k;
    memset(&cnt, 0, sizeof(cnt));
    memset(&k, 0, sizeof(k));
    struct dir_config c = cfg_with((const char *[]){"rate_bps=10000000", "delay_ns=20000000", NULL});
    struct pipeline pl;
    pipeline_init(&pl, 0, &c, &cnt);
    pl.output = sink_out;
    pl.on_drop = sink_drop;
    pl.ctx = &k;
    feed(&pl, 5, 1250, 0, 0); /* 1250 B at 10 Mbit/s = 1 ms each */
    run_virtual(&pl, INT64_MAX - 1, 0);
    CHECK(k.n == 5, "forwarded %d", k.n);
    for (int i = 0; i < k.n; i++)
        CHECK(k.at[i] == (21 + i) * MS && k.seq[i] == (uint64_t)i, "packet %d out at %lld", i, (long long)k.at[i]);
    CHECK(cnt_get(&cnt.lateness.max) == 0, "lateness on an exact clock");
    CHECK(cnt_get(&cnt.fwd_bytes) == 5 * 1250 && cnt_get(&cnt.peak_queue_packets) == 5, "counters");

    /* lateness is measured from the ideal time and does not accumulate across stages */
    feed(&pl, 3, 1250, 100 * MS, 0);
    run_virtual(&pl, INT64_MAX - 1, 7 * US);
    CHECK(k.n == 8 && k.at[5] == 121 * MS + 7 * US && k.at[7] == 123 * MS + 7 * US,
          "late pump: out at %lld %lld", (long long)k.at[5], (long long)k.at[7]);
    double p99 = hist_quantile(&cnt.lateness, 0.99);
    CHECK(cnt_get(&cnt.lateness.max) == 7 * US && fabs(p99 - 7 * US) < 0.02 * 7 * US, "lateness p99 %.0f", p99);
    CHECK(cnt_get(&cnt.in_flight) == 0, "in flight %llu", (unsigned long long)cnt_get(&cnt.in_flight));
    pipeline_destroy(&pl);
}

static void test_pipeline_drops(void)
{
    static struct dir_counters cnt;
    static struct sink a, b;
    const char *kv[] = {"loss=0.2", "seed=7", "rate_bps=1000000", "queue_packets=10", NULL};
    struct dir_config c = cfg_with(kv);
    struct sink *runs[2] = {&a, &b};
    for (int r = 0; r < 2; r++) {
        memset(&cnt, 0, sizeof(cnt));
        memset(runs[r], 0, sizeof(a));
        struct pipeline pl;
        pipeline_init(&pl, 0, &c, &cnt);
        pl.output = sink_out;
        pl.on_drop = sink_drop;
        pl.ctx = runs[r];
        feed(&pl, 1000, 125, 0, 100 * US); /* 1 ms of serialisation every 0.1 ms: overload */
        run_virtual(&pl, INT64_MAX - 1, 0);
        CHECK(cnt_get(&cnt.lost) == (uint64_t)runs[r]->drops[V_DROP_LOSS] &&
                  cnt_get(&cnt.queue_drops) == (uint64_t)runs[r]->drops[V_DROP_QUEUE],
              "counters match drop callbacks");
        CHECK(runs[r]->n + runs[r]->ndropped == 1000, "every packet accounted for");
        CHECK(runs[r]->drops[V_DROP_QUEUE] > 500 && cnt_get(&cnt.peak_queue_packets) == 10,
              "overload: %d queue drops, peak %llu", runs[r]->drops[V_DROP_QUEUE],
              (unsigned long long)cnt_get(&cnt.peak_queue_packets));
        pipeline_destroy(&pl);
    }
    CHECK(a.ndropped == b.ndropped && !memcmp(a.dropped_seq, b.dropped_seq, sizeof(uint64_t) * a.ndropped),
          "same seed, same drops");
}

static void count_and_free(void *ctx, struct pkt *p)
{
    (*(int *)ctx)++;
    free(p);
}

/* destroy hands back every packet a stage holds; a pipeline torn down mid-flight leaks nothing
 * (LeakSanitizer checks that under ASan). */
static void test_destroy(void)
{
    struct dir_config c = cfg_with((const char *[]){"rate_bps=1000000", "delay_ns=10000000", NULL});
    struct rate_stage r;
    struct delay_stage d;
    struct stage *stages[] = {&r.base, &d.base};
    rate_stage_ops.init(&r.base, &c, 0);
    delay_stage_ops.init(&d.base, &c, 0);
    for (int i = 0; i < 3; i++) {
        stage_enqueue(&r.base, mkpkt(1000, 0, i));
        stage_enqueue(&d.base, mkpkt(1000, 0, i));
    }
    for (int i = 0; i < 2; i++) {
        int n = 0;
        stages[i]->ops->destroy(stages[i], count_and_free, &n);
        CHECK(n == 3, "%s handed back %d of 3 packets", stages[i]->ops->name, n);
    }

    static struct dir_counters cnt;
    memset(&cnt, 0, sizeof(cnt));
    struct pipeline pl;
    pipeline_init(&pl, 0, &c, &cnt);
    pl.output = sink_out;
    pl.ctx = &(struct sink){0};
    feed(&pl, 5, 1000, 0, 0); /* one in service, four queued; none left yet */
    CHECK(pl.pool.live == 5, "%zu packets held", pl.pool.live);
    pipeline_destroy(&pl);
}

/* ---- the ossified middlebox ---------------------------------------------------------------- */

/* An IPv4 TCP segment (ACK|PSH, one 12-byte option) from 10.0.0.1:40000 to 10.0.0.2:443 whose payload
 * opens a TLS handshake record of record_len bytes with a ClientHello, payload bytes of it carried. */
static struct pkt *mk_hello(uint32_t record_len, uint32_t payload, uint16_t sport)
{
    uint32_t len = 20 + 32 + payload;
    struct pkt *p = mkpkt(len, 0, 0);
    p->data = calloc(1, len);
    p->cap = len;
    uint8_t *d = p->data, *t = d + 20, *x = t + 32;
    d[0] = 0x45;
    d[2] = (uint8_t)(len >> 8);
    d[3] = (uint8_t)len;
    d[6] = 0x40; /* don't fragment */
    d[8] = 64;
    d[9] = 6;
    memcpy(d + 12, (uint8_t[]){10, 0, 0, 1, 10, 0, 0, 2}, 8);
    t[0] = (uint8_t)(sport >> 8);
    t[1] = (uint8_t)sport;
    t[2] = 443 >> 8;
    t[3] = 443 & 255;
    memcpy(t + 4, (uint8_t[]){0, 0, 0x30, 0x39}, 4); /* seq 12345 */
    t[12] = 8 << 4;
    t[13] = 0x18;
    t[14] = 0xff;
    for (uint32_t i = 0; i < payload; i++)
        x[i] = (uint8_t)i;
    if (payload >= 6) {
        x[0] = 22;
        x[1] = 3;
        x[2] = 1;
        x[3] = (uint8_t)(record_len >> 8);
        x[4] = (uint8_t)record_len;
        x[5] = 1;
    }
    return p;
}

static void free_pkt(struct pkt *p)
{
    free(p->data);
    free(p);
}

/* The ones' complement sum over a header and its pseudo-header is 0xffff when the checksum is right. */
static uint16_t csum(const uint8_t *p, uint32_t n, uint32_t sum)
{
    for (; n > 1; p += 2, n -= 2)
        sum += (uint32_t)p[0] << 8 | p[1];
    if (n)
        sum += (uint32_t)p[0] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

static enum verdict through(struct middlebox_stage *s, struct pkt *p, struct pkt **out)
{
    enum verdict v = stage_enqueue(&s->base, p);
    *out = v == V_ACCEPT ? stage_dequeue(&s->base, 0) : NULL;
    return v;
}

static void test_middlebox(void)
{
    uint32_t rec, pay;
    struct pkt *p = mk_hello(1800, 1400, 40000), *out;
    CHECK(middlebox_client_hello(p->data, p->len, &rec, &pay) && rec == 1800 && pay == 1400, "read %u %u", rec, pay);

    /* off (the default): everything passes untouched */
    struct dir_config c = cfg_with(NULL);
    struct middlebox_stage s;
    middlebox_stage_ops.init(&s.base, &c, 0);
    CHECK(through(&s, p, &out) == V_ACCEPT && out == p && p->len == 1452, "off changed a packet");
    free_pkt(p);

    /* reset: a ClientHello spanning segments becomes a RST with valid checksums */
    c = cfg_with((const char *[]){"middlebox=reset", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    struct pkt *whole = mk_hello(500, 505, 40001);
    CHECK(through(&s, whole, &out) == V_ACCEPT && out->len == 557 && out->data[52] == 22, "a whole ClientHello was touched");
    free_pkt(whole);
    struct pkt *other = mk_hello(0, 700, 40002); /* not a TLS record */
    other->data[52] = 23;
    CHECK(through(&s, other, &out) == V_ACCEPT && out->len == 752, "a non-handshake record was touched");
    free_pkt(other);
    struct pkt *nodata = mkpkt(1500, 0, 0); /* the other tests' packets have no bytes */
    CHECK(through(&s, nodata, &out) == V_ACCEPT && out == nodata, "a packet without data");
    free(nodata);
    p = mk_hello(1800, 1400, 40000);
    CHECK(through(&s, p, &out) == V_ACCEPT && out == p, "reset dropped the packet");
    uint8_t *d = p->data, *t = d + 20;
    CHECK(p->len == 40 && d[2] == 0 && d[3] == 40, "RST length %u", p->len);
    CHECK((t[13] & 0x04) && (t[13] & 0x10) && !(t[13] & 0x08) && t[12] == 0x50, "RST flags %02x doff %02x", t[13], t[12]);
    CHECK(t[4] == 0 && t[5] == 0 && t[6] == 0x30 && t[7] == 0x39 && t[2] == 1 && t[3] == 0xbb, "seq or ports changed");
    CHECK(csum(d, 20, 0) == 0xffff, "IP checksum");
    CHECK(csum(t, 20, csum(d + 12, 8, 0) + 6 + 20) == 0xffff, "TCP checksum");
    CHECK(s.acted == 1, "acted %llu", (unsigned long long)s.acted);
    free_pkt(p);
    /* its retransmit passes: the server, having forgotten the connection, answers it with a RST */
    p = mk_hello(1800, 1400, 40000);
    CHECK(through(&s, p, &out) == V_ACCEPT && out->len == 1452 && s.acted == 1, "the retransmit was reset again");
    free_pkt(p);
    middlebox_stage_ops.restart(&s.base, &c, 0);
    p = mk_hello(1800, 1400, 40000);
    CHECK(through(&s, p, &out) == V_ACCEPT && out->len == 40, "a restart forgets the connections it reset");
    free_pkt(p);

    /* drop: the segment is gone (counted as lost by the pipeline) */
    c = cfg_with((const char *[]){"middlebox=drop", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    p = mk_hello(1800, 1400, 40003);
    CHECK(through(&s, p, &out) == V_DROP_LOSS && s.acted == 1, "drop did not drop");
    free_pkt(p);
    p = mk_hello(1800, 1400, 40003); /* and every retransmit of it */
    CHECK(through(&s, p, &out) == V_DROP_LOSS, "drop let a retransmit through");
    free_pkt(p);

    /* a size limit alone: a whole ClientHello over it is acted on, one under it and a split one are not */
    c = cfg_with((const char *[]){"middlebox=drop", "middlebox_split=0", "middlebox_max=1000", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    p = mk_hello(1200, 1205, 40004);
    CHECK(through(&s, p, &out) == V_DROP_LOSS, "over the limit passed");
    free_pkt(p);
    p = mk_hello(900, 300, 40005);
    CHECK(through(&s, p, &out) == V_ACCEPT && out->len == 352, "split under the limit without the split rule");
    free_pkt(p);

    /* in front of some destinations only: a ClientHello to 10.0.0.2 (mk_hello's) passes a middlebox for
     * 10.0.1.0/24 and meets one for 10.0.0.2 */
    c = cfg_with((const char *[]){"middlebox=drop", "middlebox_to=10.0.1.0/24", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    p = mk_hello(1800, 1400, 40006);
    CHECK(through(&s, p, &out) == V_ACCEPT && s.acted == 0, "a ClientHello to another network was acted on");
    free_pkt(p);
    c = cfg_with((const char *[]){"middlebox=drop", "middlebox_to=10.0.0.2", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    p = mk_hello(1800, 1400, 40007);
    CHECK(through(&s, p, &out) == V_DROP_LOSS && s.acted == 1, "a ClientHello to its address passed");
    free_pkt(p);

    /* drop-fragments: every IPv4 fragment, the first (MF) and the others (an offset), and nothing else */
    c = cfg_with((const char *[]){"middlebox=drop-fragments", NULL});
    middlebox_stage_ops.init(&s.base, &c, 0);
    p = mk_hello(1800, 1400, 40008); /* DF set: not a fragment, and the ClientHello rules are off */
    CHECK(through(&s, p, &out) == V_ACCEPT && out == p && s.acted == 0, "a whole packet was dropped");
    p->data[6] = 0x20; /* MF: the first fragment */
    CHECK(middlebox_ip_fragment(p->data, p->len) && through(&s, p, &out) == V_DROP_LOSS, "a first fragment passed");
    p->data[6] = 0x00;
    p->data[7] = 0xb9; /* offset 1480 bytes, the last fragment */
    CHECK(through(&s, p, &out) == V_DROP_LOSS && s.acted == 2, "a last fragment passed");
    free_pkt(p);
    middlebox_stage_ops.destroy(&s.base, count_and_free, &(int){0});

    struct dir_config cc[2];
    bool changed[2];
    char err[512];
    config_defaults(&cc[0]);
    config_defaults(&cc[1]);
    CHECK(config_apply(cc, changed, "middlebox=maybe", err, sizeof(err)) < 0 && strstr(err, "off drop reset drop-fragments"), "%s", err);
    CHECK(config_apply(cc, changed, "middlebox_max=70000", err, sizeof(err)) < 0, "max over 65535");
    CHECK(config_apply(cc, changed, "middlebox_to=10.0.0.300", err, sizeof(err)) < 0, "a bad address");
    CHECK(config_apply(cc, changed, "middlebox_to=10.0.0.0/33", err, sizeof(err)) < 0, "a bad prefix");
    CHECK(config_apply(cc, changed, "c2s.middlebox=reset", err, sizeof(err)) == 0 && cc[0].middlebox == MBOX_RESET &&
              cc[1].middlebox == MBOX_OFF, "c2s only");
    char buf[1024];
    config_json(&cc[0], buf, sizeof(buf));
    CHECK(strstr(buf, "\"middlebox\":\"reset\",\"middlebox_split\":true,\"middlebox_max\":0,\"middlebox_to\":\"0.0.0.0/0\""), "json %s", buf);

    /* in the pipeline: the middlebox comes first, a dropped ClientHello is counted as lost */
    static struct dir_counters cnt;
    memset(&cnt, 0, sizeof(cnt));
    struct pipeline pl;
    c = cfg_with((const char *[]){"middlebox=drop", NULL});
    pipeline_init(&pl, 0, &c, &cnt);
    pl.output = sink_out;
    pl.ctx = &(struct sink){0};
    struct pkt *q = pkt_get(&pl.pool, 1452);
    struct pkt *tmpl = mk_hello(1800, 1400, 40006);
    memcpy(q->data, tmpl->data, tmpl->len);
    q->len = tmpl->len;
    free_pkt(tmpl);
    pipeline_input(&pl, q, 0);
    CHECK(cnt_get(&cnt.lost) == 1 && cnt_get(&cnt.fwd_packets) == 0, "pipeline: lost %llu",
          (unsigned long long)cnt_get(&cnt.lost));
    pipeline_destroy(&pl);
}

/* ---- histogram and configuration --------------------------------------------------------- */

static void test_hist(void)
{
    static struct hist h;
    for (uint64_t v = 0; v < (1u << 20); v += 7)
        CHECK(hist_bucket_low(hist_index(v)) <= v && (hist_index(v) + 1 >= HIST_BUCKETS ||
                                                      hist_bucket_low(hist_index(v) + 1) > v),
              "bucket of %llu", (unsigned long long)v);
    for (uint64_t us = 1; us <= 1000; us++)
        hist_add(&h, us * 1000);
    double p50 = hist_quantile(&h, 0.5), p99 = hist_quantile(&h, 0.99);
    CHECK(fabs(p50 - 500e3) < 0.02 * 500e3 && fabs(p99 - 990e3) < 0.02 * 990e3, "p50 %.0f p99 %.0f", p50, p99);
    CHECK(cnt_get(&h.max) == 1000000, "max");
    hist_reset(&h);
    CHECK(hist_quantile(&h, 0.5) == 0 && cnt_get(&h.n) == 0, "reset");
}

static void test_config(void)
{
    struct dir_config c[2];
    bool changed[2] = {false, false};
    char err[512];
    config_defaults(&c[0]);
    config_defaults(&c[1]);
    CHECK(config_apply(c, changed, "s2c.delay_ns=5", err, sizeof(err)) == 0 && c[1].delay_ns == 5 &&
              c[0].delay_ns == 0 && changed[1] && !changed[0],
          "prefix applies to one direction");
    CHECK(config_apply(c, changed, "loss=0.25", err, sizeof(err)) == 0 && c[0].loss == 0.25 &&
              c[1].loss_model == LOSS_BERNOULLI,
          "no prefix applies to both");
    CHECK(config_apply(c, changed, "loss=1.5", err, sizeof(err)) < 0 && strstr(err, "loss"), "loss > 1: %s", err);
    CHECK(config_apply(c, changed, "delay_ns=-1", err, sizeof(err)) < 0, "negative delay");
    CHECK(config_apply(c, changed, "bogus=1", err, sizeof(err)) < 0 && strstr(err, "unknown key 'bogus'"),
          "unknown key: %s", err);
    CHECK(config_apply(c, changed, "rate_bps", err, sizeof(err)) < 0, "missing =");
    CHECK(c[0].loss == 0.25, "a rejected value leaves the old one");
    char buf[1024];
    config_json(&c[1], buf, sizeof(buf));
    CHECK(strstr(buf, "\"delay_ns\":5") && strstr(buf, "\"loss_model\":\"bernoulli\""), "json %s", buf);
}

int main(void)
{
    test_bernoulli();
    test_gemodel_order();
    test_gemodel_rate();
    test_rate();
    test_queue_limits();
    test_delay_constant();
    test_delay_jitter();
    test_pipeline_timing();
    test_pipeline_drops();
    test_destroy();
    test_hist();
    test_config();
    test_middlebox();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
