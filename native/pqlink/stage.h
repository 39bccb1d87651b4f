/* The one interface every emulator stage implements (after mahimahi's queues):
 * enqueue a packet, dequeue the packet that is due, and say when the next one will be due.
 * Stages never read a clock: time comes in as arguments, so they run on a virtual clock in tests. */
#ifndef PQLINK_STAGE_H
#define PQLINK_STAGE_H

#include "packet.h"

enum verdict { V_ACCEPT = 0, V_DROP_LOSS, V_DROP_QUEUE };
extern const char *const verdict_names[3]; /* "ok", "loss", "queue" */

struct stage;
struct stage_ops {
    const char *name;
    /* Takes ownership of p unless it returns a drop verdict. p->t is the packet's arrival time. */
    enum verdict (*enqueue)(struct stage *s, struct pkt *p);
    /* The next packet due at or before now, with p->t set to the ideal time it left; or NULL. */
    struct pkt *(*dequeue)(struct stage *s, int64_t now);
    /* When the next packet will be due; NEVER when the stage is empty. */
    int64_t (*next_deadline)(const struct stage *s);
};

struct stage {
    const struct stage_ops *ops;
};

static inline enum verdict stage_enqueue(struct stage *s, struct pkt *p) { return s->ops->enqueue(s, p); }
static inline struct pkt *stage_dequeue(struct stage *s, int64_t now) { return s->ops->dequeue(s, now); }
static inline int64_t stage_next_deadline(const struct stage *s) { return s->ops->next_deadline(s); }

#endif
