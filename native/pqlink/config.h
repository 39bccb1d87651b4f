/* Parameters of one direction of the link, and their key=value text form (CLI and control socket). */
#ifndef PQLINK_CONFIG_H
#define PQLINK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

enum loss_model { LOSS_NONE, LOSS_BERNOULLI, LOSS_GEMODEL };
enum aqm_kind { AQM_DROPTAIL, AQM_CODEL, AQM_PIE };
enum middlebox_action { MBOX_OFF, MBOX_DROP, MBOX_RESET, MBOX_DROP_FRAGMENTS };

struct dir_config {
    /* loss; Gilbert-Elliott with netem's meaning: p = P(good->bad), r = P(bad->good),
     * one_minus_h = loss probability in the bad state, one_minus_k = in the good state */
    enum loss_model loss_model;
    double loss;
    double ge_p, ge_r, ge_1h, ge_1k;
    /* the bottleneck: a fixed rate, or a delivery trace in its place; rate 0 = unlimited */
    uint64_t rate_bps;
    uint32_t overhead;
    const struct trace *trace; /* NULL = the fixed rate; loaded once, never freed (trace.h) */
    uint32_t trace_bytes;      /* bytes one trace opportunity delivers (mahimahi: 1500) */
    /* its queue: limits (0 = unbounded) and discipline */
    uint32_t queue_packets;
    uint64_t queue_bytes;
    enum aqm_kind aqm;
    int64_t codel_target_ns, codel_interval_ns;
    int64_t pie_target_ns, pie_tupdate_ns, pie_max_burst_ns;
    double pie_alpha, pie_beta;
    bool ecn; /* mark ECN-capable packets instead of dropping them (the limits still drop) */
    /* delay */
    int64_t delay_ns;
    int64_t jitter_ns;
    bool reorder; /* jitter may reorder packets (otherwise FIFO) */
    uint64_t seed;
    /* an ossified middlebox in front of the link (middlebox.h): what it does to a ClientHello that spans
     * more than one segment (middlebox_split) or whose record is longer than middlebox_max (0 = no limit) */
    enum middlebox_action middlebox;
    bool middlebox_split;
    uint32_t middlebox_max;
    /* the destinations it stands in front of: an IPv4 network (host byte order) and its mask; 0/0 = all
     * (one host of a local population behind it, the others reached directly) */
    uint32_t middlebox_to, middlebox_to_mask;
};

#define DIR_C2S 0
#define DIR_S2C 1
#define CONFIG_JSON_MAX 4096 /* config_json's longest object (a trace path escaped) */
extern const char *const dir_names[2]; /* "c2s", "s2c" */

void config_defaults(struct dir_config *c);

/* Applies one "key=value" or "c2s.key=value"/"s2c.key=value" to cfg[2] (both directions
 * without a prefix). changed[d] is set for each direction touched. Returns 0, or -1 with a
 * message in err. */
int config_apply(struct dir_config cfg[2], bool changed[2], const char *kv, char *err, size_t errlen);

/* Writes s as a quoted JSON string into buf; returns the length it needs (snprintf-like). */
int config_json_string(const char *s, char *buf, size_t len);

/* Writes the configuration as a JSON object into buf; returns the length (snprintf-like). */
int config_json(const struct dir_config *c, char *buf, size_t len);

#endif
