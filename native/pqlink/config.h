/* Parameters of one direction of the link, and their key=value text form (CLI and control socket). */
#ifndef PQLINK_CONFIG_H
#define PQLINK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum loss_model { LOSS_NONE, LOSS_BERNOULLI, LOSS_GEMODEL };

struct dir_config {
    /* loss; Gilbert-Elliott with netem's meaning: p = P(good->bad), r = P(bad->good),
     * one_minus_h = loss probability in the bad state, one_minus_k = in the good state */
    enum loss_model loss_model;
    double loss;
    double ge_p, ge_r, ge_1h, ge_1k;
    /* rate limiter and its queue; rate 0 = unlimited, limits 0 = unbounded */
    uint64_t rate_bps;
    uint32_t overhead;
    uint32_t queue_packets;
    uint64_t queue_bytes;
    /* delay */
    int64_t delay_ns;
    int64_t jitter_ns;
    bool reorder; /* jitter may reorder packets (otherwise FIFO) */
    uint64_t seed;
};

#define DIR_C2S 0
#define DIR_S2C 1
extern const char *const dir_names[2]; /* "c2s", "s2c" */

void config_defaults(struct dir_config *c);

/* Applies one "key=value" or "c2s.key=value"/"s2c.key=value" to cfg[2] (both directions
 * without a prefix). changed[d] is set for each direction touched. Returns 0, or -1 with a
 * message in err. */
int config_apply(struct dir_config cfg[2], bool changed[2], const char *kv, char *err, size_t errlen);

/* Writes the configuration as a JSON object into buf; returns the length (snprintf-like). */
int config_json(const struct dir_config *c, char *buf, size_t len);

#endif
