#include "rate.h"

int64_t rate_ser_ns(const struct rate_stage *s, uint32_t len)
{
    if (!s->rate_bps)
        return 0;
    /* rounding to the nearest ns keeps the error below 0.5 ns per packet */
    double bits = (double)((uint64_t)len + s->overhead) * 8.0;
    return (int64_t)(bits * 1e9 / (double)s->rate_bps + 0.5);
}

static int64_t head_departure(const struct rate_stage *s)
{
    const struct pkt *h = s->q.head;
    if (!h)
        return NEVER_DEADLINE;
    if (!s->rate_bps)
        return h->t;
    int64_t start = h->t > s->busy_until ? h->t : s->busy_until;
    return start + rate_ser_ns(s, h->len);
}

static enum verdict rate_enqueue(struct stage *base, struct pkt *p)
{
    struct rate_stage *s = (struct rate_stage *)base;
    if (s->rate_bps) {
        if (s->limit_packets && s->q.packets >= s->limit_packets)
            return V_DROP_QUEUE;
        if (s->limit_bytes && s->q.bytes + p->len > s->limit_bytes)
            return V_DROP_QUEUE;
    }
    fifo_push(&s->q, p);
    if (s->q.packets > s->peak_packets)
        s->peak_packets = s->q.packets;
    if (s->q.bytes > s->peak_bytes)
        s->peak_bytes = s->q.bytes;
    return V_ACCEPT;
}

static struct pkt *rate_dequeue(struct stage *base, int64_t now)
{
    struct rate_stage *s = (struct rate_stage *)base;
    int64_t dep = head_departure(s);
    if (dep > now)
        return NULL;
    struct pkt *p = fifo_pop(&s->q);
    if (s->rate_bps)
        s->busy_until = dep;
    p->t = dep; /* ideal time, so lateness in this stage does not shift the next one */
    return p;
}

static int64_t rate_next_deadline(const struct stage *base)
{
    return head_departure((const struct rate_stage *)base);
}

void rate_configure(struct rate_stage *s, const struct dir_config *c)
{
    s->rate_bps = c->rate_bps;
    s->overhead = c->overhead;
    s->limit_packets = c->queue_packets;
    s->limit_bytes = c->queue_bytes;
}

void rate_init(struct rate_stage *s, const struct dir_config *c)
{
    *s = (struct rate_stage){.base = {&rate_stage_ops}, .busy_until = INT64_MIN};
    rate_configure(s, c);
}

/* ---- the stage interface ---------------------------------------------------------------------- */

static int init_op(struct stage *base, const struct dir_config *c, int dir)
{
    rate_init((struct rate_stage *)base, c);
    return 0;
}

static void configure_op(struct stage *base, const struct dir_config *old, const struct dir_config *c, int dir)
{
    rate_configure((struct rate_stage *)base, c);
}

/* Peaks restart from what the queue holds now (packets in flight stay). */
static void restart_op(struct stage *base, const struct dir_config *c, int dir)
{
    struct rate_stage *s = (struct rate_stage *)base;
    s->peak_packets = s->q.packets;
    s->peak_bytes = s->q.bytes;
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
    struct pkt *p;
    while ((p = fifo_pop(&s->q)))
        sink(ctx, p);
}

const struct stage_ops rate_stage_ops = {
    .name = "rate",
    .init = init_op,
    .configure = configure_op,
    .restart = restart_op,
    .enqueue = rate_enqueue,
    .dequeue = rate_dequeue,
    .next_deadline = rate_next_deadline,
    .peaks = peaks_op,
    .destroy = destroy_op,
};
