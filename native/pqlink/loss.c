#include "loss.h"

const char *const verdict_names[4] = {"ok", "loss", "queue", "aqm"};

/* The RNG stream of the loss decisions; jitter uses another so the loss pattern of a seed does
 * not depend on the delay settings. */
#define LOSS_STREAM(dir) ((uint64_t)(dir) * 2 + 1)

bool loss_decide(struct loss_stage *s)
{
    switch (s->model) {
    case LOSS_NONE:
        return false;
    case LOSS_BERNOULLI:
        return rng_uniform(&s->rng) < s->loss;
    case LOSS_GEMODEL:
        /* netem's order: first the state transition, then the loss decision with the loss
         * probability of the state the packet arrived in (two independent draws). */
        if (!s->bad) {
            if (rng_uniform(&s->rng) < s->ge_p)
                s->bad = true;
            return rng_uniform(&s->rng) < s->ge_1k;
        }
        if (rng_uniform(&s->rng) < s->ge_r)
            s->bad = false;
        return rng_uniform(&s->rng) < s->ge_1h;
    }
    return false;
}

static enum verdict loss_enqueue(struct stage *base, struct pkt *p)
{
    struct loss_stage *s = (struct loss_stage *)base;
    if (loss_decide(s))
        return V_DROP_LOSS;
    fifo_push(&s->passed, p);
    return V_ACCEPT;
}

static struct pkt *loss_dequeue(struct stage *base, int64_t now)
{
    struct loss_stage *s = (struct loss_stage *)base;
    (void)now;
    return fifo_pop(&s->passed); /* no time passes in this stage */
}

static int64_t loss_next_deadline(const struct stage *base)
{
    const struct loss_stage *s = (const struct loss_stage *)base;
    return s->passed.head ? s->passed.head->t : NEVER_DEADLINE;
}

static void take(struct loss_stage *s, const struct dir_config *c)
{
    s->model = c->loss_model;
    s->loss = c->loss;
    s->ge_p = c->ge_p;
    s->ge_r = c->ge_r;
    s->ge_1h = c->ge_1h;
    s->ge_1k = c->ge_1k;
}

void loss_init(struct loss_stage *s, const struct dir_config *c, int dir)
{
    *s = (struct loss_stage){.base = {&loss_stage_ops}};
    take(s, c);
    loss_restart(s, c, dir);
}

void loss_restart(struct loss_stage *s, const struct dir_config *c, int dir)
{
    rng_seed(&s->rng, c->seed, LOSS_STREAM(dir));
    s->bad = false;
}

void loss_configure(struct loss_stage *s, const struct dir_config *old, const struct dir_config *c, int dir)
{
    take(s, c);
    if (old->seed != c->seed || old->loss_model != c->loss_model)
        loss_restart(s, c, dir);
}

/* ---- the stage interface ---------------------------------------------------------------------- */

static int init_op(struct stage *base, const struct dir_config *c, int dir)
{
    loss_init((struct loss_stage *)base, c, dir);
    return 0;
}

static void configure_op(struct stage *base, const struct dir_config *old, const struct dir_config *c, int dir)
{
    loss_configure((struct loss_stage *)base, old, c, dir);
}

static void restart_op(struct stage *base, const struct dir_config *c, int dir)
{
    loss_restart((struct loss_stage *)base, c, dir);
}

static void destroy_op(struct stage *base, pkt_sink_fn sink, void *ctx)
{
    struct loss_stage *s = (struct loss_stage *)base;
    struct pkt *p;
    while ((p = fifo_pop(&s->passed)))
        sink(ctx, p);
}

const struct stage_ops loss_stage_ops = {
    .name = "loss",
    .init = init_op,
    .configure = configure_op,
    .restart = restart_op,
    .enqueue = loss_enqueue,
    .dequeue = loss_dequeue,
    .next_deadline = loss_next_deadline,
    .peaks = NULL, /* accepted packets pass at once: nothing queues here */
    .destroy = destroy_op,
};
