#include "codel.h"

#include <math.h>

void codel_init(struct codel *c, int64_t target, int64_t interval)
{
    *c = (struct codel){.target = target, .interval = interval, .maxpacket = 1500};
}

static int64_t control_law(const struct codel *c, int64_t t, uint32_t count)
{
    return t + (int64_t)((double)c->interval / sqrt((double)count));
}

/* The head packet if it had arrived by now, and whether the sojourn rule allows dropping it. */
static struct pkt *take_head(struct codel *c, struct pkt_fifo *q, int64_t now, bool *ok_to_drop)
{
    *ok_to_drop = false;
    if (!q->head || q->head->t > now) {
        c->above = false;
        return NULL;
    }
    struct pkt *p = fifo_pop(q);
    if (p->len > c->maxpacket)
        c->maxpacket = p->len;
    int64_t sojourn = now - p->t;
    /* a queue of at most one packet cannot be shortened by dropping: the link is merely busy */
    if (sojourn < c->target || q->bytes <= c->maxpacket) {
        c->above = false;
    } else if (!c->above) {
        c->above = true;
        c->first_above = now + c->interval;
    } else if (now >= c->first_above) {
        *ok_to_drop = true;
    }
    return p;
}

struct pkt *codel_dequeue(struct codel *c, struct pkt_fifo *q, int64_t now, bool (*drop)(void *ctx, struct pkt *p),
                          void *ctx)
{
    bool ok;
    struct pkt *p = take_head(c, q, now, &ok);
    if (!p) {
        c->dropping = false;
        return NULL;
    }
    if (c->dropping) {
        if (!ok)
            c->dropping = false; /* below target again */
        while (c->dropping && now >= c->drop_next) {
            c->count++;
            if (!drop(ctx, p)) { /* marked instead: it goes out, the next signal follows the law */
                c->drop_next = control_law(c, c->drop_next, c->count);
                return p;
            }
            p = take_head(c, q, now, &ok);
            if (!ok)
                c->dropping = false;
            else
                c->drop_next = control_law(c, c->drop_next, c->count);
        }
        return p;
    }
    if (ok) {
        if (drop(ctx, p))
            p = take_head(c, q, now, &ok);
        c->dropping = true;
        /* back soon after leaving the dropping state: resume near the drop rate that worked */
        uint32_t delta = c->count - c->lastcount;
        c->count = delta > 1 && now - c->drop_next < 16 * c->interval ? delta : 1;
        c->drop_next = control_law(c, now, c->count);
        c->lastcount = c->count;
    }
    return p;
}
