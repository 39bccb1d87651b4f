/* Loss stage: Bernoulli or Gilbert-Elliott (netem's gemodel), decided on arrival. */
#ifndef PQLINK_LOSS_H
#define PQLINK_LOSS_H

#include <stdbool.h>

#include "config.h"
#include "rng.h"
#include "stage.h"
#include "util.h"

struct loss_stage {
    struct stage base;
    struct pkt_fifo passed; /* accepted packets wait here for the next stage (zero time) */
    struct rng rng;
    enum loss_model model;
    double loss, ge_p, ge_r, ge_1h, ge_1k;
    bool bad; /* Gilbert-Elliott state */
};

extern const struct stage_ops loss_stage_ops;

void loss_init(struct loss_stage *s, const struct dir_config *c, int dir);
/* Restarts the random sequence (and the Gilbert-Elliott state) from the seed. */
void loss_restart(struct loss_stage *s, const struct dir_config *c, int dir);
/* Takes the new parameters; a new seed (or model) restarts the random sequence and the state. */
void loss_configure(struct loss_stage *s, const struct dir_config *old, const struct dir_config *c, int dir);
/* One loss decision (true = drop); exposed for tests. */
bool loss_decide(struct loss_stage *s);

#endif
