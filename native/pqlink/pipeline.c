#include "pipeline.h"

#include <string.h>

int pipeline_init(struct pipeline *pl, int dir, const struct dir_config *c, struct dir_counters *cnt)
{
    memset(pl, 0, sizeof(*pl));
    pl->dir = dir;
    pl->cfg = *c;
    pl->cnt = cnt;
    pl->pool.limit = 1u << 20; /* about 1.5 GB of MTU-1500 packets at most */
    loss_init(&pl->loss, c, dir);
    rate_init(&pl->rate, c);
    if (delay_init(&pl->delay, c, dir) < 0)
        return -1;
    pl->stages[0] = &pl->loss.base;
    pl->stages[1] = &pl->rate.base;
    pl->stages[2] = &pl->delay.base;
    return 0;
}

void pipeline_configure(struct pipeline *pl, const struct dir_config *c)
{
    loss_configure(&pl->loss, &pl->cfg, c, pl->dir);
    rate_configure(&pl->rate, c);
    delay_configure(&pl->delay, c, pl->dir);
    pl->cfg = *c;
}

static void drop(struct pipeline *pl, struct pkt *p, enum verdict why, int64_t now)
{
    cnt_add(why == V_DROP_LOSS ? &pl->cnt->lost : &pl->cnt->queue_drops, 1);
    if (pl->on_drop)
        pl->on_drop(pl->ctx, p, why, now);
    cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) - 1);
    pkt_put(&pl->pool, p);
}

void pipeline_pump(struct pipeline *pl, int64_t now)
{
    for (int i = 0; i < 3; i++) {
        struct pkt *p;
        while ((p = stage_dequeue(pl->stages[i], now))) {
            if (i < 2) {
                enum verdict v = stage_enqueue(pl->stages[i + 1], p);
                if (v != V_ACCEPT)
                    drop(pl, p, v, now);
                continue;
            }
            int64_t late = now - p->t;
            if (pl->output(pl->ctx, p, now) == 0) {
                cnt_add(&pl->cnt->fwd_packets, 1);
                cnt_add(&pl->cnt->fwd_bytes, p->len);
                hist_add(&pl->cnt->lateness, late > 0 ? (uint64_t)late : 0);
            } else {
                cnt_add(&pl->cnt->write_errors, 1);
            }
            cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) - 1);
            pkt_put(&pl->pool, p);
        }
    }
    cnt_max(&pl->cnt->peak_queue_packets, pl->rate.peak_packets);
    cnt_max(&pl->cnt->peak_queue_bytes, pl->rate.peak_bytes);
}

void pipeline_input(struct pipeline *pl, struct pkt *p, int64_t now)
{
    pipeline_pump(pl, now); /* the queue must not count packets that have already left */
    p->arrival = p->t = now;
    p->seq = pl->next_seq++;
    cnt_add(&pl->cnt->rx_packets, 1);
    cnt_add(&pl->cnt->rx_bytes, p->len);
    cnt_max(&pl->cnt->max_packet_bytes, p->len);
    cnt_set(&pl->cnt->in_flight, cnt_get(&pl->cnt->in_flight) + 1);
    enum verdict v = stage_enqueue(pl->stages[0], p);
    if (v != V_ACCEPT)
        drop(pl, p, v, now);
    pipeline_pump(pl, now);
}

int64_t pipeline_next_deadline(const struct pipeline *pl)
{
    int64_t next = NEVER_DEADLINE;
    for (int i = 0; i < 3; i++) {
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
                          &c->queue_drops, &c->pool_drops, &c->write_errors, &c->peak_queue_packets,
                          &c->peak_queue_bytes, &c->max_packet_bytes};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        cnt_set(plain[i], 0);
    hist_reset(&c->lateness);
    pl->rate.peak_packets = pl->rate.q.packets;
    pl->rate.peak_bytes = pl->rate.q.bytes;
    /* A reset starts a measurement: the random sequences restart from the seed too, so every
     * measurement with the same seed meets the same loss pattern from its first packet (paired
     * comparisons across algorithms), even when the link was not reconfigured in between. */
    loss_restart(&pl->loss, &pl->cfg, pl->dir);
    delay_restart(&pl->delay, &pl->cfg, pl->dir);
}

static void put_back(void *ctx, struct pkt *p) { pkt_put(ctx, p); }

void pipeline_destroy(struct pipeline *pl)
{
    struct pkt *p;
    while ((p = fifo_pop(&pl->loss.passed)))
        pkt_put(&pl->pool, p);
    while ((p = fifo_pop(&pl->rate.q)))
        pkt_put(&pl->pool, p);
    delay_destroy(&pl->delay, put_back, &pl->pool);
    pkt_pool_destroy(&pl->pool);
}
