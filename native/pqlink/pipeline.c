#include "pipeline.h"

#include <string.h>

/* The only place that knows which stages there are: every other step walks pl->stages. */
static void bind_stages(struct pipeline *pl)
{
    pl->middlebox.base.ops = &middlebox_stage_ops;
    pl->loss.base.ops = &loss_stage_ops;
    pl->rate.base.ops = &rate_stage_ops;
    pl->delay.base.ops = &delay_stage_ops;
    pl->stages[0] = &pl->middlebox.base;
    pl->stages[1] = &pl->loss.base;
    pl->stages[2] = &pl->rate.base;
    pl->stages[3] = &pl->delay.base;
}

int pipeline_init(struct pipeline *pl, int dir, const struct dir_config *c, struct dir_counters *cnt)
{
    memset(pl, 0, sizeof(*pl));
    pl->dir = dir;
    pl->cfg = *c;
    pl->cnt = cnt;
    pl->pool.limit = 1u << 20; /* about 1.5 GB of MTU-1500 packets at most */
    bind_stages(pl);
    for (int i = 0; i < PIPELINE_STAGES; i++)
        if (pl->stages[i]->ops->init(pl->stages[i], c, dir) < 0)
            return -1;
    return 0;
}

void pipeline_configure(struct pipeline *pl, const struct dir_config *c)
{
    if (pl->phase && pl->dir == DIR_C2S && c->seed != pl->cfg.seed)
        phase_reseed(pl->phase, c->seed);
    for (int i = 0; i < PIPELINE_STAGES; i++)
        pl->stages[i]->ops->configure(pl->stages[i], &pl->cfg, c, pl->dir);
    pl->cfg = *c;
}

static void drop(struct pipeline *pl, struct pkt *p, enum verdict why, int64_t now)
{
    cnt_add(why == V_DROP_LOSS ? &pl->cnt->lost : &pl->cnt->queue_drops, 1);
    if (why == V_DROP_AQM)
        cnt_add(&pl->cnt->aqm_drops, 1);
    if (pl->on_drop)
        pl->on_drop(pl->ctx, p, why, now);
    if (pl->flows)
        flows_note(pl->flows, pl->dir, why == V_DROP_LOSS ? FLOW_LOST : FLOW_QUEUE_DROP, p->data, p->len, p->seq,
                   now);
    cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) - 1);
    pkt_put(&pl->pool, p);
}

static void deliver(struct pipeline *pl, struct pkt *p, int64_t now)
{
    int64_t late = now - p->t;
    if (pl->output(pl->ctx, p, now) == 0) {
        cnt_add(&pl->cnt->fwd_packets, 1);
        cnt_add(&pl->cnt->fwd_bytes, p->len);
        hist_add(&pl->cnt->lateness, late > 0 ? (uint64_t)late : 0);
        hist_add(&pl->cnt->sojourn, (uint64_t)p->qdelay);
        cnt_add(&pl->cnt->sojourn_sum_ns, (uint64_t)p->qdelay);
        if (p->flags & PKT_CE)
            cnt_add(&pl->cnt->ecn_marks, 1);
        if (pl->flows)
            flows_delivered(pl->flows, pl->dir, p->data, p->len, p->seq, now, late);
    } else {
        cnt_add(&pl->cnt->write_errors, 1);
    }
    cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) - 1);
    pkt_put(&pl->pool, p);
}

static void pump_stages(struct pipeline *pl, int64_t now)
{
    for (int i = 0; i < PIPELINE_STAGES; i++) {
        struct stage *s = pl->stages[i];
        struct pkt *p;
        enum verdict why;
        while ((p = stage_dequeue(s, now))) {
            if (i + 1 < PIPELINE_STAGES) {
                enum verdict v = stage_enqueue(pl->stages[i + 1], p);
                if (v != V_ACCEPT)
                    drop(pl, p, v, now);
            } else {
                deliver(pl, p, now);
            }
        }
        if (s->ops->take_dropped)
            while ((p = s->ops->take_dropped(s, &why)))
                drop(pl, p, why, now);
    }
}

/* A new connection restarted the traces: this direction follows from the restart's time on. */
static void follow_phase(struct pipeline *pl, int64_t now)
{
    int64_t at;
    double u;
    if (!pl->phase || !phase_poll(pl->phase, &pl->phase_seen, &at, &u))
        return;
    if (at > now)
        at = now;
    pump_stages(pl, at); /* what was due before the restart went by the old phase */
    rate_trace_restart(&pl->rate, at, u);
}

void pipeline_pump(struct pipeline *pl, int64_t now)
{
    follow_phase(pl, now);
    pump_stages(pl, now);
    for (int i = 0; i < PIPELINE_STAGES; i++) {
        const struct stage *s = pl->stages[i];
        if (s->ops->peaks) {
            uint64_t packets, bytes;
            s->ops->peaks(s, &packets, &bytes);
            cnt_max(&pl->cnt->peak_queue_packets, packets);
            cnt_max(&pl->cnt->peak_queue_bytes, bytes);
        }
    }
}

void pipeline_input(struct pipeline *pl, struct pkt *p, int64_t now)
{
    pipeline_pump(pl, now); /* the queue must not count packets that have already left */
    p->arrival = p->t = now;
    p->seq = pl->next_seq++;
    p->qdelay = 0;
    p->flags = 0;
    cnt_add(&pl->cnt->rx_packets, 1);
    cnt_add(&pl->cnt->rx_bytes, p->len);
    cnt_max(&pl->cnt->max_packet_bytes, p->len);
    cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) + 1);
    if (pl->flows) /* before the stages: a capture at the sender shows the packet even if we drop it */
        flows_note(pl->flows, pl->dir, FLOW_ARRIVAL, p->data, p->len, p->seq, now);
    /* a new connection restarts the traces, itself included */
    if (pl->phase && pl->dir == DIR_C2S && phase_note(pl->phase, p->data, p->len, now))
        follow_phase(pl, now);
    enum verdict v = stage_enqueue(pl->stages[0], p);
    if (v != V_ACCEPT)
        drop(pl, p, v, now);
    pipeline_pump(pl, now);
}

int64_t pipeline_next_deadline(const struct pipeline *pl)
{
    int64_t next = NEVER_DEADLINE;
    for (int i = 0; i < PIPELINE_STAGES; i++) {
        int64_t d = stage_next_deadline(pl->stages[i]);
        if (d < next)
            next = d;
    }
    return next;
}

void pipeline_reset_counters(struct pipeline *pl)
{
    struct dir_counters *c = pl->cnt;
    counter_t *plain[] = {&c->rx_packets, &c->rx_bytes, &c->fwd_packets, &c->fwd_bytes, &c->lost,
                          &c->queue_drops, &c->aqm_drops, &c->ecn_marks, &c->pool_drops, &c->write_errors,
                          &c->peak_queue_packets, &c->peak_queue_bytes, &c->max_packet_bytes, &c->sojourn_sum_ns};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        cnt_set(plain[i], 0);
    hist_reset(&c->lateness);
    hist_reset(&c->sojourn);
    if (pl->phase && pl->dir == DIR_C2S) /* the k-th connection from here meets the k-th offset */
        phase_reseed(pl->phase, pl->cfg.seed);
    /* A reset starts a measurement: the random sequences restart from the seed too, so every
     * measurement with the same seed meets the same loss pattern from its first packet (paired
     * comparisons across algorithms), even when the link was not reconfigured in between. */
    for (int i = 0; i < PIPELINE_STAGES; i++)
        pl->stages[i]->ops->restart(pl->stages[i], &pl->cfg, pl->dir);
}

static void put_back(void *ctx, struct pkt *p) { pkt_put(ctx, p); }

void pipeline_destroy(struct pipeline *pl)
{
    for (int i = 0; i < PIPELINE_STAGES; i++)
        pl->stages[i]->ops->destroy(pl->stages[i], put_back, &pl->pool);
    pkt_pool_destroy(&pl->pool);
}
