#include "delay.h"

#include <stdlib.h>

#define JITTER_STREAM(dir) ((uint64_t)(dir) * 2 + 2)

static bool before(const struct delay_entry *a, const struct delay_entry *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->order < b->order);
}

static void sift_up(struct delay_entry *h, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&h[i], &h[parent]))
            break;
        struct delay_entry t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

static void sift_down(struct delay_entry *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m]))
            m = l;
        if (r < n && before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        struct delay_entry t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static enum verdict delay_enqueue(struct stage *base, struct pkt *p)
{
    struct delay_stage *s = (struct delay_stage *)base;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        struct delay_entry *h = realloc(s->heap, cap * sizeof(*h));
        if (!h)
            return V_DROP_QUEUE; /* out of memory: counted as a queue drop */
        s->heap = h;
        s->cap = cap;
    }
    int64_t d = s->delay_ns;
    if (s->jitter_ns > 0) {
        /* uniform integer in [-jitter, +jitter] */
        uint64_t span = 2 * (uint64_t)s->jitter_ns + 1;
        d += (int64_t)(rng_next(&s->rng) % span) - s->jitter_ns;
        if (d < 0)
            d = 0;
    }
    int64_t deadline = p->t + d;
    if (!s->reorder && deadline < s->last_deadline)
        deadline = s->last_deadline;
    if (deadline > s->last_deadline)
        s->last_deadline = deadline;
    s->heap[s->n] = (struct delay_entry){deadline, s->next_order++, p};
    sift_up(s->heap, s->n++);
    return V_ACCEPT;
}

static struct pkt *delay_dequeue(struct stage *base, int64_t now)
{
    struct delay_stage *s = (struct delay_stage *)base;
    if (!s->n || s->heap[0].deadline > now)
        return NULL;
    struct pkt *p = s->heap[0].p;
    p->t = s->heap[0].deadline;
    s->heap[0] = s->heap[--s->n];
    sift_down(s->heap, s->n, 0);
    return p;
}

static int64_t delay_next_deadline(const struct stage *base)
{
    const struct delay_stage *s = (const struct delay_stage *)base;
    return s->n ? s->heap[0].deadline : NEVER_DEADLINE;
}

void delay_restart(struct delay_stage *s, const struct dir_config *c, int dir)
{
    rng_seed(&s->rng, c->seed, JITTER_STREAM(dir));
    s->seed = c->seed;
}

void delay_configure(struct delay_stage *s, const struct dir_config *c, int dir)
{
    s->delay_ns = c->delay_ns;
    s->jitter_ns = c->jitter_ns;
    s->reorder = c->reorder;
    if (c->seed != s->seed)
        delay_restart(s, c, dir);
}

int delay_init(struct delay_stage *s, const struct dir_config *c, int dir)
{
    *s = (struct delay_stage){.base = {&delay_stage_ops}, .last_deadline = INT64_MIN};
    delay_restart(s, c, dir);
    delay_configure(s, c, dir);
    return 0;
}

void delay_destroy(struct delay_stage *s, pkt_sink_fn fn, void *ctx)
{
    for (size_t i = 0; i < s->n; i++)
        fn(ctx, s->heap[i].p);
    free(s->heap);
    s->heap = NULL;
    s->n = s->cap = 0;
}

/* ---- the stage interface ---------------------------------------------------------------------- */

static int init_op(struct stage *base, const struct dir_config *c, int dir)
{
    return delay_init((struct delay_stage *)base, c, dir);
}

static void configure_op(struct stage *base, const struct dir_config *old, const struct dir_config *c, int dir)
{
    delay_configure((struct delay_stage *)base, c, dir);
}

static void restart_op(struct stage *base, const struct dir_config *c, int dir)
{
    delay_restart((struct delay_stage *)base, c, dir);
}

static void destroy_op(struct stage *base, pkt_sink_fn sink, void *ctx)
{
    delay_destroy((struct delay_stage *)base, sink, ctx);
}

const struct stage_ops delay_stage_ops = {
    .name = "delay",
    .init = init_op,
    .configure = configure_op,
    .restart = restart_op,
    .enqueue = delay_enqueue,
    .dequeue = delay_dequeue,
    .next_deadline = delay_next_deadline,
    .peaks = NULL, /* a delay line, not a queue: what it holds is in flight, not waiting */
    .destroy = destroy_op,
};
