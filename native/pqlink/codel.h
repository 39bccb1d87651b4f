/* CoDel (RFC 8289): drops at dequeue when packets have spent longer than `target` in the queue for
 * at least `interval`; while that lasts, the next drop comes interval/sqrt(count) after the last,
 * so the drop rate rises until the sojourn time falls below target again. Written from the RFC's
 * description; state only, the queue and the drop action belong to the caller (aqm.c). */
#ifndef PQLINK_CODEL_H
#define PQLINK_CODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "packet.h"

struct codel {
    int64_t target, interval;
    uint32_t maxpacket;   /* largest packet seen: a queue holding at most this is never dropped from */
    bool above;           /* the sojourn time has been above target since first_above - interval */
    int64_t first_above;  /* when dropping becomes allowed, if it stays above */
    bool dropping;        /* in the dropping state */
    int64_t drop_next;    /* next drop while dropping */
    uint32_t count, lastcount;
};

void codel_init(struct codel *c, int64_t target, int64_t interval);
/* Drops (or, where drop returns false, ECN-marks) what the control law says and returns the packet
 * to send at time now, or NULL when nothing that arrived by now is left. drop takes ownership of a
 * packet it returns true for. */
struct pkt *codel_dequeue(struct codel *c, struct pkt_fifo *q, int64_t now, bool (*drop)(void *ctx, struct pkt *p),
                          void *ctx);

#endif
