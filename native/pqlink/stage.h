/* The one interface every emulator stage implements (after mahimahi's queues):
 * enqueue a packet, dequeue the packet that is due, and say when the next one will be due; plus
 * the life cycle the pipeline drives for every stage alike (init, configure, restart, destroy).
 * Stages never read a clock: time comes in as arguments, so they run on a virtual clock in tests. */
#ifndef PQLINK_STAGE_H
#define PQLINK_STAGE_H

#include "config.h"
#include "packet.h"

/* V_DROP_QUEUE: the queue's limit; V_DROP_AQM: its discipline (CoDel, PIE) */
enum verdict { V_ACCEPT = 0, V_DROP_LOSS, V_DROP_QUEUE, V_DROP_AQM };
extern const char *const verdict_names[4]; /* "ok", "loss", "queue", "aqm" */

/* Where a stage hands the packets it still holds when it is destroyed. */
typedef void (*pkt_sink_fn)(void *ctx, struct pkt *p);

struct stage;
struct stage_ops {
    const char *name;
    /* Sets the stage up from c for direction dir. Returns 0, or -1 without memory. */
    int (*init)(struct stage *s, const struct dir_config *c, int dir);
    /* Takes new parameters (old = the ones in use until now). */
    void (*configure)(struct stage *s, const struct dir_config *old, const struct dir_config *c, int dir);
    /* A measurement starts: random sequences from the seed, peaks from what is held now. */
    void (*restart)(struct stage *s, const struct dir_config *c, int dir);
    /* Takes ownership of p unless it returns a drop verdict. p->t is the packet's arrival time. */
    enum verdict (*enqueue)(struct stage *s, struct pkt *p);
    /* The next packet due at or before now, with p->t set to the ideal time it left; or NULL. */
    struct pkt *(*dequeue)(struct stage *s, int64_t now);
    /* A packet the stage dropped on its own while dequeuing (CoDel drops at dequeue), with why;
     * NULL when there is none. NULL op = the stage never does. */
    struct pkt *(*take_dropped)(struct stage *s, enum verdict *why);
    /* When the next packet will be due (at the earliest); NEVER when the stage is empty. */
    int64_t (*next_deadline)(const struct stage *s);
    /* The most packets and bytes it queued at once since the last restart; NULL when it has no queue. */
    void (*peaks)(const struct stage *s, uint64_t *packets, uint64_t *bytes);
    /* Hands every packet it holds to sink, then frees what it allocated. */
    void (*destroy)(struct stage *s, pkt_sink_fn sink, void *ctx);
};

struct stage {
    const struct stage_ops *ops;
};

static inline enum verdict stage_enqueue(struct stage *s, struct pkt *p) { return s->ops->enqueue(s, p); }
static inline struct pkt *stage_dequeue(struct stage *s, int64_t now) { return s->ops->dequeue(s, now); }
static inline int64_t stage_next_deadline(const struct stage *s) { return s->ops->next_deadline(s); }

#endif
