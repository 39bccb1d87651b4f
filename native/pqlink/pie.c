#include "pie.h"

#define MEAN_PKTSIZE 1500
#define IDLE_UPDATES 1000 /* an idle queue this many updates long has forgotten everything */

void pie_init(struct pie *p, int64_t target, int64_t tupdate, int64_t max_burst, double alpha, double beta)
{
    struct rng keep = p->rng; /* seeded by the caller */
    *p = (struct pie){.target = target, .tupdate = tupdate, .max_burst = max_burst, .alpha = alpha, .beta = beta,
                      .burst_left = max_burst, .next_update = PIE_NO_UPDATE, .last_now = INT64_MIN, .rng = keep};
}

static int64_t queue_delay(const struct pkt_fifo *q, int64_t now)
{
    return q->head && q->head->t <= now ? now - q->head->t : 0;
}

void pie_update(struct pie *p, const struct pkt_fifo *q, int64_t now)
{
    int64_t qdelay = queue_delay(q, now);
    double step = p->alpha * (double)(qdelay - p->target) / 1e9 + p->beta * (double)(qdelay - p->qdelay_old) / 1e9;
    /* small probabilities move in small steps, or the controller would overshoot light congestion */
    if (p->prob < 0.000001)
        step /= 2048;
    else if (p->prob < 0.00001)
        step /= 512;
    else if (p->prob < 0.0001)
        step /= 128;
    else if (p->prob < 0.001)
        step /= 32;
    else if (p->prob < 0.01)
        step /= 8;
    else if (p->prob < 0.1)
        step /= 2;
    else if (step > 0.02)
        step = 0.02; /* no big jumps once dropping heavily */
    p->prob += step;
    if (qdelay == 0 && p->qdelay_old == 0)
        p->prob *= 0.98; /* the queue is idle: forget the congestion */
    if (p->prob < 0)
        p->prob = 0;
    if (p->prob > 1)
        p->prob = 1;
    p->burst_left = p->burst_left > p->tupdate ? p->burst_left - p->tupdate : 0;
    if (p->prob == 0 && qdelay < p->target / 2 && p->qdelay_old < p->target / 2)
        p->burst_left = p->max_burst;
    p->qdelay_old = qdelay;
}

void pie_advance(struct pie *p, const struct pkt_fifo *q, int64_t now)
{
    if (now < p->last_now)
        now = p->last_now; /* arrival stamps may step back a little; the controller's time does not */
    p->last_now = now;
    if (p->next_update == PIE_NO_UPDATE) {
        p->next_update = now + p->tupdate;
        return;
    }
    if (!q->head && now - p->next_update > IDLE_UPDATES * p->tupdate) {
        p->prob = 0;
        p->qdelay_old = 0;
        p->burst_left = p->max_burst;
        p->next_update += (now - p->next_update) / p->tupdate * p->tupdate;
    }
    /* the queue has not changed since the last event, so each missed update sees it as it is */
    while (p->next_update <= now) {
        pie_update(p, q, p->next_update);
        p->next_update += p->tupdate;
    }
}

bool pie_drop_early(struct pie *p, const struct pkt_fifo *q)
{
    if (p->burst_left > 0)
        return false;
    /* light load or a nearly empty queue: stay work-conserving */
    if ((p->qdelay_old < p->target / 2 && p->prob < 0.2) || q->bytes <= 2 * MEAN_PKTSIZE)
        return false;
    return rng_uniform(&p->rng) < p->prob;
}
