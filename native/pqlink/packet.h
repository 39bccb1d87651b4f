/* A packet in flight and the per-direction pool that recycles them. */
#ifndef PQLINK_PACKET_H
#define PQLINK_PACKET_H

#include <stddef.h>
#include <stdint.h>

struct pkt {
    struct pkt *next;  /* intrusive FIFO link, used by the stage that holds the packet */
    int64_t arrival;   /* when it was read from the TUN device */
    int64_t t;         /* ideal time it left the previous stage (the next stage's arrival time) */
    uint64_t seq;      /* index among all packets read in this direction (drop log, tests) */
    int64_t qdelay;    /* time it waited in the bottleneck's queue (its sojourn time), ns */
    uint32_t flags;    /* PKT_* */
    uint32_t len;      /* bytes of IP packet */
    uint32_t cap;      /* bytes allocated at data */
    uint8_t *data;
};

#define PKT_CE 1u /* the queue marked it Congestion Experienced instead of dropping it */

/* Free list of packets; buffers grow to the largest packet seen and are then reused. */
struct pkt_pool {
    struct pkt *free;
    size_t live;  /* packets handed out and not yet returned */
    size_t limit; /* refuse to hand out more than this (memory bound); 0 = no limit */
};

/* Returns a packet whose buffer holds at least cap bytes, or NULL when the pool is at its limit. */
struct pkt *pkt_get(struct pkt_pool *pool, uint32_t cap);
/* Makes sure p can hold cap bytes (keeps the first keep bytes). Returns 0, or -1 without memory. */
int pkt_reserve(struct pkt *p, uint32_t cap, uint32_t keep);
void pkt_put(struct pkt_pool *pool, struct pkt *p);
void pkt_pool_destroy(struct pkt_pool *pool);

/* FIFO of packets linked through pkt->next. */
struct pkt_fifo {
    struct pkt *head, *tail;
    uint32_t packets;
    uint64_t bytes;
};

static inline void fifo_push(struct pkt_fifo *f, struct pkt *p)
{
    p->next = NULL;
    if (f->tail)
        f->tail->next = p;
    else
        f->head = p;
    f->tail = p;
    f->packets++;
    f->bytes += p->len;
}

static inline struct pkt *fifo_pop(struct pkt_fifo *f)
{
    struct pkt *p = f->head;
    if (!p)
        return NULL;
    f->head = p->next;
    if (!f->head)
        f->tail = NULL;
    f->packets--;
    f->bytes -= p->len;
    p->next = NULL;
    return p;
}

#endif
