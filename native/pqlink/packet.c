#include "packet.h"

#include <stdlib.h>

struct pkt *pkt_get(struct pkt_pool *pool, uint32_t cap)
{
    if (pool->limit && pool->live >= pool->limit)
        return NULL;
    struct pkt *p = pool->free;
    if (p) {
        pool->free = p->next;
    } else {
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
    }
    if (pkt_reserve(p, cap, 0) < 0) {
        p->next = pool->free;
        pool->free = p;
        return NULL;
    }
    p->next = NULL;
    p->len = 0;
    pool->live++;
    return p;
}

int pkt_reserve(struct pkt *p, uint32_t cap, uint32_t keep)
{
    if (p->cap >= cap)
        return 0;
    uint8_t *d = malloc(cap);
    if (!d)
        return -1;
    for (uint32_t i = 0; i < keep && i < p->cap; i++)
        d[i] = p->data[i];
    free(p->data);
    p->data = d;
    p->cap = cap;
    return 0;
}

void pkt_put(struct pkt_pool *pool, struct pkt *p)
{
    p->next = pool->free;
    pool->free = p;
    pool->live--;
}

void pkt_pool_destroy(struct pkt_pool *pool)
{
    while (pool->free) {
        struct pkt *p = pool->free;
        pool->free = p->next;
        free(p->data);
        free(p);
    }
}
