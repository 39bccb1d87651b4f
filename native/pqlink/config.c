#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dir_names[2] = {"c2s", "s2c"};

void config_defaults(struct dir_config *c)
{
    memset(c, 0, sizeof(*c));
    c->loss_model = LOSS_NONE;
    c->ge_r = 1.0; /* iproute2's defaults for "gemodel p": r = 100 %, 1-h = 100 %, 1-k = 0 */
    c->ge_1h = 1.0;
    c->queue_packets = 1000;
    c->seed = 1;
}

static int parse_prob(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < 0 || d > 1)
        return -1;
    *out = d;
    return 0;
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*v == '-')
        return -1;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || n > max)
        return -1;
    *out = n;
    return 0;
}

static int set_key(struct dir_config *c, const char *key, const char *v)
{
    uint64_t n;
    double d;
    if (!strcmp(key, "loss")) {
        if (parse_prob(v, &d))
            return -1;
        c->loss = d;
        c->loss_model = d > 0 ? LOSS_BERNOULLI : LOSS_NONE;
    } else if (!strcmp(key, "loss_model")) {
        if (!strcmp(v, "none"))
            c->loss_model = LOSS_NONE;
        else if (!strcmp(v, "bernoulli"))
            c->loss_model = LOSS_BERNOULLI;
        else if (!strcmp(v, "gemodel"))
            c->loss_model = LOSS_GEMODEL;
        else
            return -1;
    } else if (!strncmp(key, "ge_", 3)) {
        double *dst = !strcmp(key, "ge_p")    ? &c->ge_p
                      : !strcmp(key, "ge_r")  ? &c->ge_r
                      : !strcmp(key, "ge_1h") ? &c->ge_1h
                      : !strcmp(key, "ge_1k") ? &c->ge_1k
                                              : NULL;
        if (!dst)
            return -2;
        if (parse_prob(v, &d))
            return -1;
        *dst = d;
        c->loss_model = LOSS_GEMODEL;
    } else if (!strcmp(key, "rate_bps")) {
        if (parse_u64(v, UINT64_MAX / 16, &n))
            return -1;
        c->rate_bps = n;
    } else if (!strcmp(key, "overhead")) {
        if (parse_u64(v, 65535, &n))
            return -1;
        c->overhead = (uint32_t)n;
    } else if (!strcmp(key, "queue_packets")) {
        if (parse_u64(v, UINT32_MAX, &n))
            return -1;
        c->queue_packets = (uint32_t)n;
    } else if (!strcmp(key, "queue_bytes")) {
        if (parse_u64(v, UINT64_MAX / 2, &n))
            return -1;
        c->queue_bytes = n;
    } else if (!strcmp(key, "delay_ns")) {
        if (parse_u64(v, 3600 * 1000000000ULL, &n))
            return -1;
        c->delay_ns = (int64_t)n;
    } else if (!strcmp(key, "jitter_ns")) {
        if (parse_u64(v, 3600 * 1000000000ULL, &n))
            return -1;
        c->jitter_ns = (int64_t)n;
    } else if (!strcmp(key, "reorder")) {
        if (strcmp(v, "0") && strcmp(v, "1"))
            return -1;
        c->reorder = v[0] == '1';
    } else if (!strcmp(key, "seed")) {
        if (parse_u64(v, UINT64_MAX, &n))
            return -1;
        c->seed = n;
    } else {
        return -2;
    }
    return 0;
}

int config_apply(struct dir_config cfg[2], bool changed[2], const char *kv, char *err, size_t errlen)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
        snprintf(err, errlen, "'%s' is not key=value", kv);
        return -1;
    }
    char key[64];
    size_t klen = (size_t)(eq - kv);
    if (klen >= sizeof(key)) {
        snprintf(err, errlen, "key too long in '%s'", kv);
        return -1;
    }
    memcpy(key, kv, klen);
    key[klen] = 0;
    const char *k = key;
    int first = 0, last = 1;
    if (!strncmp(key, "c2s.", 4) || !strncmp(key, "s2c.", 4)) {
        first = last = key[0] == 's' ? DIR_S2C : DIR_C2S;
        k = key + 4;
    }
    for (int d = first; d <= last; d++) {
        struct dir_config tmp = cfg[d];
        int rc = set_key(&tmp, k, eq + 1);
        if (rc == -2) {
            snprintf(err, errlen,
                     "unknown key '%s' (allowed: loss loss_model ge_p ge_r ge_1h ge_1k rate_bps overhead "
                     "queue_packets queue_bytes delay_ns jitter_ns reorder seed, optionally prefixed c2s. or s2c.)",
                     k);
            return -1;
        }
        if (rc < 0) {
            snprintf(err, errlen, "bad value '%s' for %s", eq + 1, k);
            return -1;
        }
        cfg[d] = tmp;
        changed[d] = true;
    }
    return 0;
}

int config_json(const struct dir_config *c, char *buf, size_t len)
{
    static const char *const models[] = {"none", "bernoulli", "gemodel"};
    return snprintf(buf, len,
                    "{\"loss_model\":\"%s\",\"loss\":%.9g,\"ge_p\":%.9g,\"ge_r\":%.9g,\"ge_1h\":%.9g,"
                    "\"ge_1k\":%.9g,\"rate_bps\":%llu,\"overhead\":%u,\"queue_packets\":%u,"
                    "\"queue_bytes\":%llu,\"delay_ns\":%lld,\"jitter_ns\":%lld,\"reorder\":%s,\"seed\":%llu}",
                    models[c->loss_model], c->loss, c->ge_p, c->ge_r, c->ge_1h, c->ge_1k,
                    (unsigned long long)c->rate_bps, c->overhead, c->queue_packets,
                    (unsigned long long)c->queue_bytes, (long long)c->delay_ns, (long long)c->jitter_ns,
                    c->reorder ? "true" : "false", (unsigned long long)c->seed);
}
