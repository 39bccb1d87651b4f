#include "aqm.h"

const char *const aqm_names[3] = {"droptail", "codel", "pie"};

#define PIE_STREAM(dir) ((uint64_t)(dir) * 2 + 101) /* apart from loss and jitter (loss.c, delay.c) */
#define PIE_MARK_MAX 0.1 /* RFC 8033: mark rather than drop only while the probability is moderate */

bool ecn_mark(struct pkt *p)
{
    uint8_t *d = p->data;
    if (!d || p->len < 20)
        return false;
    if (d[0] >> 4 == 4) {
        uint8_t tos = d[1];
        if (!(tos & 3))
            return false;
        if ((tos & 3) != 3) {
            /* incremental checksum update (RFC 1624) for the 16-bit word holding the TOS byte */
            uint16_t old = (uint16_t)(d[0] << 8 | tos), new = (uint16_t)(d[0] << 8 | (tos | 3));
            uint32_t sum = (uint16_t)~(d[10] << 8 | d[11]);
            sum += (uint16_t)~old;
            sum += new;
            while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);
            uint16_t csum = (uint16_t)~sum;
            d[1] = tos | 3;
            d[10] = (uint8_t)(csum >> 8);
            d[11] = (uint8_t)csum;
        }
        p->flags |= PKT_CE;
        return true;
    }
    if (d[0] >> 4 == 6 && p->len >= 40) {
        if (!(d[1] & 0x30))
            return false;
        d[1] |= 0x30; /* the traffic class's ECN bits straddle bytes 0 and 1; no header checksum */
        p->flags |= PKT_CE;
        return true;
    }
    return false;
}

static void set_params(struct aqm *a, const struct dir_config *c)
{
    a->ecn = c->ecn;
    a->limit_packets = c->queue_packets;
    a->limit_bytes = c->queue_bytes;
    a->codel.target = c->codel_target_ns;
    a->codel.interval = c->codel_interval_ns;
    a->pie.target = c->pie_target_ns;
    a->pie.tupdate = c->pie_tupdate_ns;
    a->pie.max_burst = c->pie_max_burst_ns;
    a->pie.alpha = c->pie_alpha;
    a->pie.beta = c->pie_beta;
}

static void start_discipline(struct aqm *a, const struct dir_config *c)
{
    a->kind = c->aqm;
    codel_init(&a->codel, c->codel_target_ns, c->codel_interval_ns);
    pie_init(&a->pie, c->pie_target_ns, c->pie_tupdate_ns, c->pie_max_burst_ns, c->pie_alpha, c->pie_beta);
}

void aqm_init(struct aqm *a, const struct dir_config *c, int dir)
{
    *a = (struct aqm){0};
    rng_seed(&a->pie.rng, c->seed, PIE_STREAM(dir));
    start_discipline(a, c);
    set_params(a, c);
}

void aqm_configure(struct aqm *a, const struct dir_config *c)
{
    if (c->aqm != a->kind)
        start_discipline(a, c);
    set_params(a, c);
}

void aqm_restart(struct aqm *a, const struct dir_config *c, int dir)
{
    rng_seed(&a->pie.rng, c->seed, PIE_STREAM(dir));
}

enum verdict aqm_enqueue(struct aqm *a, struct pkt *p, uint32_t held_packets, uint64_t held_bytes)
{
    if (a->limit_packets && a->q.packets + held_packets >= a->limit_packets)
        return V_DROP_QUEUE;
    if (a->limit_bytes && a->q.bytes + held_bytes + p->len > a->limit_bytes)
        return V_DROP_QUEUE;
    if (a->kind == AQM_PIE) {
        pie_advance(&a->pie, &a->q, p->t);
        if (pie_drop_early(&a->pie, &a->q) && !(a->ecn && a->pie.prob <= PIE_MARK_MAX && ecn_mark(p)))
            return V_DROP_AQM;
    }
    fifo_push(&a->q, p);
    return V_ACCEPT;
}

/* CoDel's drop action: an ECN-capable packet is marked and sent instead (returns false). */
static bool drop_or_mark(void *ctx, struct pkt *p)
{
    struct aqm *a = ctx;
    if (a->ecn && ecn_mark(p))
        return false;
    fifo_push(&a->dropped, p);
    return true;
}

struct pkt *aqm_dequeue(struct aqm *a, int64_t now)
{
    switch (a->kind) {
    case AQM_CODEL:
        return codel_dequeue(&a->codel, &a->q, now, drop_or_mark, a);
    case AQM_PIE:
        pie_advance(&a->pie, &a->q, now);
        break;
    case AQM_DROPTAIL:
        break;
    }
    return a->q.head && a->q.head->t <= now ? fifo_pop(&a->q) : NULL;
}
