#include "rate.h"

int64_t rate_ser_ns(const struct rate_stage *s, uint32_t len)
{
    if (!s->rate_bps)
        return 0;
    /* rounding to the nearest ns keeps the error below 0.5 ns per packet */
    double bits = (double)((uint64_t)len + s->overhead) * 8.0;
    return (int64_t)(bits * 1e9 / (double)s->rate_bps + 0.5);
}

static bool unlimited(const struct rate_stage *s) { return !s->trace && !s->rate_bps; }

static void start_service(struct rate_stage *s, struct pkt *p, int64_t at)
{
    s->svc = p;
    s->svc_start = at;
    p->qdelay = at > p->t ? at - p->t : 0;
    if (s->trace)
        s->svc_left = p->len + s->overhead;
    else
        s->svc_done = at + rate_ser_ns(s, p->len);
}

static void finish_service(struct rate_stage *s, int64_t at)
{
    struct pkt *p = s->svc;
    s->svc = NULL;
    p->t = at; /* ideal time, so lateness in this stage does not shift the next one */
    fifo_push(&s->done, p);
}

/* Fixed rate: the next event by now (a packet finishes, or the next one starts). False when none. */
static bool rate_step(struct rate_stage *s, int64_t now)
{
    if (s->svc) {
        if (s->svc_done > now)
            return false;
        s->busy_until = s->svc_done;
        finish_service(s, s->svc_done);
        return true;
    }
    const struct pkt *h = s->q.q.head;
    if (!h)
        return false;
    int64_t start = h->t > s->busy_until ? h->t : s->busy_until;
    if (start > now)
        return false;
    uint32_t before = s->q.q.packets;
    struct pkt *p = aqm_dequeue(&s->q, start);
    if (p) {
        start_service(s, p, start);
        return true;
    }
    return s->q.q.packets != before; /* the discipline dropped some: look at the new head */
}

static void anchor(struct rate_stage *s, int64_t at, int64_t offset, int64_t from)
{
    s->anchored = true;
    s->epoch = at - offset;
    s->offset_ns = offset;
    s->pos = trace_seek(s->trace, s->epoch, from);
}

/* Trace: the next opportunity by now, used by as many bytes as are waiting. False when none. */
static bool trace_step(struct rate_stage *s, int64_t now)
{
    const struct trace *t = s->trace;
    const struct pkt *h = s->q.q.head;
    if (!s->svc && !h)
        return false;
    if (!s->anchored) { /* offset 0 from the first packet until a phase restart */
        int64_t at = s->svc ? s->svc_start : h->t;
        anchor(s, at, 0, at);
    }
    if (!s->svc && trace_time(t, s->epoch, s->pos) < h->t) /* the opportunities in between went unused */
        s->pos = trace_seek(t, s->epoch, h->t);
    int64_t o = trace_time(t, s->epoch, s->pos);
    if (o > now)
        return false;
    uint32_t credit = s->trace_bytes;
    while (credit) {
        if (!s->svc) {
            struct pkt *p = aqm_dequeue(&s->q, o);
            if (!p)
                break;
            start_service(s, p, o);
        }
        uint32_t take = credit < s->svc_left ? credit : s->svc_left;
        credit -= take;
        s->svc_left -= take;
        if (!s->svc_left)
            finish_service(s, o);
    }
    s->last_opp = o;
    trace_advance(t, &s->pos);
    return true;
}

void rate_trace_restart(struct rate_stage *s, int64_t at, double u)
{
    if (!s->trace)
        return;
    /* never back in time: opportunities already used stay used */
    int64_t from = s->last_opp != INT64_MIN && s->last_opp >= at ? s->last_opp + 1 : at;
    anchor(s, at, trace_offset_ns(s->trace, u), from);
}

static void note_peaks(struct rate_stage *s)
{
    uint32_t packets = s->q.q.packets + (s->svc ? 1 : 0);
    uint64_t bytes = s->q.q.bytes + (s->svc ? s->svc->len : 0);
    if (packets > s->peak_packets)
        s->peak_packets = packets;
    if (bytes > s->peak_bytes)
        s->peak_bytes = bytes;
}

static enum verdict rate_enqueue(struct stage *base, struct pkt *p)
{
    struct rate_stage *s = (struct rate_stage *)base;
    if (unlimited(s)) {
        p->qdelay = 0;
        fifo_push(&s->done, p);
        return V_ACCEPT;
    }
    enum verdict v = aqm_enqueue(&s->q, p, s->svc ? 1 : 0, s->svc ? s->svc->len : 0);
    if (v == V_ACCEPT)
        note_peaks(s);
    return v;
}

static struct pkt *rate_dequeue(struct stage *base, int64_t now)
{
    struct rate_stage *s = (struct rate_stage *)base;
    for (;;) {
        if (s->done.head)
            return s->done.head->t <= now ? fifo_pop(&s->done) : NULL;
        bool moved = s->trace ? trace_step(s, now) : s->rate_bps ? rate_step(s, now) : false;
        if (!moved)
            return NULL;
    }
}

static struct pkt *rate_take_dropped(struct stage *base, enum verdict *why)
{
    struct rate_stage *s = (struct rate_stage *)base;
    *why = V_DROP_AQM;
    return fifo_pop(&s->q.dropped);
}

/* The earliest the next packet can leave: exact unless the discipline drops it first. */
static int64_t rate_next_deadline(const struct stage *base)
{
    const struct rate_stage *s = (const struct rate_stage *)base;
    if (s->done.head)
        return s->done.head->t;
    const struct pkt *h = s->q.q.head;
    const struct trace *t = s->trace;
    if (t) {
        if (!s->anchored && (s->svc || h))
            return (s->svc ? s->svc_start : h->t) + t->t_ns[0];
        if (s->svc)
            return trace_time(t, s->epoch, s->pos);
        if (!h)
            return NEVER_DEADLINE;
        int64_t o = trace_time(t, s->epoch, s->pos);
        return o >= h->t ? o : trace_time(t, s->epoch, trace_seek(t, s->epoch, h->t));
    }
    if (s->svc)
        return s->svc_done;
    if (!h)
        return NEVER_DEADLINE;
    int64_t start = h->t > s->busy_until ? h->t : s->busy_until;
    return start + rate_ser_ns(s, h->len);
}

void rate_configure(struct rate_stage *s, const struct dir_config *c)
{
    const struct trace *old = s->trace;
    s->rate_bps = c->rate_bps;
    s->overhead = c->overhead;
    s->trace = c->trace;
    s->trace_bytes = c->trace_bytes ? c->trace_bytes : 1500;
    aqm_configure(&s->q, c);
    if (unlimited(s)) { /* what waited leaves now, in order */
        if (s->svc)
            fifo_push(&s->done, s->svc);
        s->svc = NULL;
        struct pkt *p;
        while ((p = fifo_pop(&s->q.q)))
            fifo_push(&s->done, p);
        return;
    }
    if (s->svc && !old != !s->trace) { /* the packet in service changes its kind of service */
        if (s->trace)
            s->svc_left = s->svc->len + s->overhead;
        else
            s->svc_done = s->svc_start + rate_ser_ns(s, s->svc->len);
    }
    if (s->trace && s->trace != old && s->anchored) /* a new trace runs on from the same epoch */
        s->pos = trace_seek(s->trace, s->epoch, s->last_opp != INT64_MIN ? s->last_opp + 1 : s->epoch);
    if (!s->trace && old && s->last_opp > s->busy_until)
        s->busy_until = s->last_opp;
}

void rate_init(struct rate_stage *s, const struct dir_config *c, int dir)
{
    *s = (struct rate_stage){.base = {&rate_stage_ops}, .busy_until = INT64_MIN, .last_opp = INT64_MIN};
    aqm_init(&s->q, c, dir);
    rate_configure(s, c);
}

/* ---- the stage interface ---------------------------------------------------------------------- */

static int init_op(struct stage *base, const struct dir_config *c, int dir)
{
    rate_init((struct rate_stage *)base, c, dir);
    return 0;
}

static void configure_op(struct stage *base, const struct dir_config *old, const struct dir_config *c, int dir)
{
    rate_configure((struct rate_stage *)base, c);
}

/* Peaks restart from what the queue holds now (packets in flight stay); PIE's draws from the seed. */
static void restart_op(struct stage *base, const struct dir_config *c, int dir)
{
    struct rate_stage *s = (struct rate_stage *)base;
    s->peak_packets = 0;
    s->peak_bytes = 0;
    note_peaks(s);
    aqm_restart(&s->q, c, dir);
}

static void peaks_op(const struct stage *base, uint64_t *packets, uint64_t *bytes)
{
    const struct rate_stage *s = (const struct rate_stage *)base;
    *packets = s->peak_packets;
    *bytes = s->peak_bytes;
}

static void destroy_op(struct stage *base, pkt_sink_fn sink, void *ctx)
{
    struct rate_stage *s = (struct rate_stage *)base;
    struct pkt_fifo *lists[] = {&s->done, &s->q.q, &s->q.dropped};
    if (s->svc)
        sink(ctx, s->svc);
    s->svc = NULL;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        struct pkt *p;
        while ((p = fifo_pop(lists[i])))
            sink(ctx, p);
    }
}

const struct stage_ops rate_stage_ops = {
    .name = "rate",
    .init = init_op,
    .configure = configure_op,
    .restart = restart_op,
    .enqueue = rate_enqueue,
    .dequeue = rate_dequeue,
    .take_dropped = rate_take_dropped,
    .next_deadline = rate_next_deadline,
    .peaks = peaks_op,
    .destroy = destroy_op,
};
