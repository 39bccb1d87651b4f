/* Delay stage: constant delay plus optional uniform jitter in [-jitter, +jitter] (netem's default
 * distribution). Packets leave in arrival order unless reordering is enabled; a min-heap on the
 * deadline serves both cases. */
#ifndef PQLINK_DELAY_H
#define PQLINK_DELAY_H

#include <stdbool.h>

#include "config.h"
#include "rng.h"
#include "stage.h"
#include "util.h"

struct delay_entry {
    int64_t deadline;
    uint64_t order; /* ties leave in arrival order */
    struct pkt *p;
};

struct delay_stage {
    struct stage base;
    struct delay_entry *heap;
    size_t n, cap;
    uint64_t next_order;
    int64_t last_deadline; /* FIFO mode: no packet leaves before the one ahead of it */
    int64_t delay_ns, jitter_ns;
    bool reorder;
    struct rng rng;
    uint64_t seed;
};

extern const struct stage_ops delay_stage_ops;

/* Returns 0, or -1 without memory. */
int delay_init(struct delay_stage *s, const struct dir_config *c, int dir);
/* Restarts the jitter's random sequence from the seed. */
void delay_restart(struct delay_stage *s, const struct dir_config *c, int dir);
void delay_configure(struct delay_stage *s, const struct dir_config *c, int dir);
/* Hands every held packet to fn (for cleanup), then frees the heap. */
void delay_destroy(struct delay_stage *s, pkt_sink_fn fn, void *ctx);

#endif
