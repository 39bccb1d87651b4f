#include "loss.h"

const char *const verdict_names[3] = {"ok", "loss", "queue"};

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

static const struct stage_ops loss_ops = {"loss", loss_enqueue, loss_dequeue, loss_next_deadline};

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
    *s = (struct loss_stage){.base = {&loss_ops}};
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
