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
    c->trace_bytes = 1500;
    c->aqm = AQM_DROPTAIL;
    c->codel_target_ns = 5000000; /* RFC 8289 */
    c->codel_interval_ns = 100000000;
    c->pie_target_ns = 15000000; /* RFC 8033 */
    c->pie_tupdate_ns = 15000000;
    c->pie_max_burst_ns = 150000000;
    c->pie_alpha = 0.125;
    c->pie_beta = 1.25;
    c->middlebox_split = true;
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

/* "any" (0/0) or A.B.C.D[/N]: a network in host byte order and its mask */
static int parse_prefix(const char *v, uint32_t *net, uint32_t *mask)
{
    if (!strcmp(v, "any")) {
        *net = *mask = 0;
        return 0;
    }
    unsigned a, b, c, d, n = 32;
    char tail;
    int got = sscanf(v, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &n, &tail);
    if ((got != 4 && got != 5) || a > 255 || b > 255 || c > 255 || d > 255 || n > 32)
        return -1;
    if (got == 4 && strchr(v, '/'))
        return -1;
    *mask = n ? 0xffffffffu << (32 - n) : 0;
    *net = (a << 24 | b << 16 | c << 8 | d) & *mask;
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

/* A duration in ns, at least min, at most an hour. */
static int parse_ns(const char *v, int64_t min, int64_t *out)
{
    uint64_t n;
    if (parse_u64(v, 3600 * 1000000000ULL, &n) || (int64_t)n < min)
        return -1;
    *out = (int64_t)n;
    return 0;
}

static int parse_gain(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < 0 || d > 1000)
        return -1;
    *out = d;
    return 0;
}

/* Returns 0, -1 (bad value), -2 (unknown key) or -3 (bad value, message in err). */
static int set_key(struct dir_config *c, const char *key, const char *v, char *err, size_t errlen)
{
    uint64_t n;
    double d;
    if (!strcmp(key, "trace")) {
        if (!*v || !strcmp(v, "none")) {
            c->trace = NULL;
            return 0;
        }
        const struct trace *t = trace_get(v, err, errlen);
        if (!t)
            return -3;
        c->trace = t;
    } else if (!strcmp(key, "trace_bytes")) {
        if (parse_u64(v, 1u << 20, &n) || !n)
            return -1;
        c->trace_bytes = (uint32_t)n;
    } else if (!strcmp(key, "aqm")) {
        if (!strcmp(v, "droptail"))
            c->aqm = AQM_DROPTAIL;
        else if (!strcmp(v, "codel"))
            c->aqm = AQM_CODEL;
        else if (!strcmp(v, "pie"))
            c->aqm = AQM_PIE;
        else {
            snprintf(err, errlen, "unknown aqm '%s' (allowed: droptail codel pie)", v);
            return -3;
        }
    } else if (!strcmp(key, "codel_target_ns")) {
        return parse_ns(v, 1, &c->codel_target_ns);
    } else if (!strcmp(key, "codel_interval_ns")) {
        return parse_ns(v, 1, &c->codel_interval_ns);
    } else if (!strcmp(key, "pie_target_ns")) {
        return parse_ns(v, 1, &c->pie_target_ns);
    } else if (!strcmp(key, "pie_tupdate_ns")) {
        return parse_ns(v, 1000, &c->pie_tupdate_ns); /* at least 1 us: updates run in a loop */
    } else if (!strcmp(key, "pie_max_burst_ns")) {
        return parse_ns(v, 0, &c->pie_max_burst_ns);
    } else if (!strcmp(key, "pie_alpha")) {
        return parse_gain(v, &c->pie_alpha);
    } else if (!strcmp(key, "pie_beta")) {
        return parse_gain(v, &c->pie_beta);
    } else if (!strcmp(key, "ecn")) {
        if (strcmp(v, "0") && strcmp(v, "1"))
            return -1;
        c->ecn = v[0] == '1';
    } else if (!strcmp(key, "loss")) {
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
    } else if (!strcmp(key, "middlebox")) {
        if (!strcmp(v, "off"))
            c->middlebox = MBOX_OFF;
        else if (!strcmp(v, "drop"))
            c->middlebox = MBOX_DROP;
        else if (!strcmp(v, "reset"))
            c->middlebox = MBOX_RESET;
        else if (!strcmp(v, "drop-fragments"))
            c->middlebox = MBOX_DROP_FRAGMENTS;
        else {
            snprintf(err, errlen, "unknown middlebox '%s' (allowed: off drop reset drop-fragments)", v);
            return -3;
        }
    } else if (!strcmp(key, "middlebox_split")) {
        if (strcmp(v, "0") && strcmp(v, "1"))
            return -1;
        c->middlebox_split = v[0] == '1';
    } else if (!strcmp(key, "middlebox_max")) {
        if (parse_u64(v, 65535, &n))
            return -1;
        c->middlebox_max = (uint32_t)n;
    } else if (!strcmp(key, "middlebox_to")) {
        if (parse_prefix(v, &c->middlebox_to, &c->middlebox_to_mask))
            return -1;
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
        int rc = set_key(&tmp, k, eq + 1, err, errlen);
        if (rc == -2) {
            snprintf(err, errlen,
                     "unknown key '%s' (allowed: loss loss_model ge_p ge_r ge_1h ge_1k rate_bps overhead "
                     "trace trace_bytes queue_packets queue_bytes aqm codel_target_ns codel_interval_ns "
                     "pie_target_ns pie_tupdate_ns pie_max_burst_ns pie_alpha pie_beta ecn "
                     "delay_ns jitter_ns reorder seed middlebox middlebox_split middlebox_max middlebox_to, optionally prefixed c2s. or s2c.)",
                     k);
            return -1;
        }
        if (rc == -3)
            return -1;
        if (rc < 0) {
            snprintf(err, errlen, "bad value '%s' for %s", eq + 1, k);
            return -1;
        }
        cfg[d] = tmp;
        changed[d] = true;
    }
    return 0;
}

int config_json_string(const char *s, char *buf, size_t len)
{
    size_t n = 0;
    int need = 2;
    if (len)
        buf[n++] = '"';
    for (; *s; s++) {
        char esc[8];
        int k;
        if (*s == '"' || *s == '\\')
            k = snprintf(esc, sizeof(esc), "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            k = snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)*s);
        else
            k = snprintf(esc, sizeof(esc), "%c", *s);
        need += k;
        for (int i = 0; i < k && n + 1 < len; i++)
            buf[n++] = esc[i];
    }
    if (n + 1 < len)
        buf[n++] = '"';
    if (len)
        buf[n < len ? n : len - 1] = 0;
    return need;
}

int config_json(const struct dir_config *c, char *buf, size_t len)
{
    static const char *const models[] = {"none", "bernoulli", "gemodel"};
    static const char *const aqms[] = {"droptail", "codel", "pie"};
    static const char *const boxes[] = {"off", "drop", "reset", "drop-fragments"};
    char trace[2 * TRACE_PATH_MAX + 8] = "null";
    if (c->trace)
        config_json_string(c->trace->path, trace, sizeof(trace));
    return snprintf(buf, len,
                    "{\"loss_model\":\"%s\",\"loss\":%.9g,\"ge_p\":%.9g,\"ge_r\":%.9g,\"ge_1h\":%.9g,"
                    "\"ge_1k\":%.9g,\"rate_bps\":%llu,\"overhead\":%u,\"trace\":%s,\"trace_bytes\":%u,"
                    "\"queue_packets\":%u,\"queue_bytes\":%llu,\"aqm\":\"%s\",\"codel_target_ns\":%lld,"
                    "\"codel_interval_ns\":%lld,\"pie_target_ns\":%lld,\"pie_tupdate_ns\":%lld,"
                    "\"pie_max_burst_ns\":%lld,\"pie_alpha\":%.9g,\"pie_beta\":%.9g,\"ecn\":%s,"
                    "\"delay_ns\":%lld,\"jitter_ns\":%lld,\"reorder\":%s,\"seed\":%llu,"
                    "\"middlebox\":\"%s\",\"middlebox_split\":%s,\"middlebox_max\":%u,"
                    "\"middlebox_to\":\"%u.%u.%u.%u/%d\"}",
                    models[c->loss_model], c->loss, c->ge_p, c->ge_r, c->ge_1h, c->ge_1k,
                    (unsigned long long)c->rate_bps, c->overhead, trace, c->trace_bytes, c->queue_packets,
                    (unsigned long long)c->queue_bytes, aqms[c->aqm], (long long)c->codel_target_ns,
                    (long long)c->codel_interval_ns, (long long)c->pie_target_ns, (long long)c->pie_tupdate_ns,
                    (long long)c->pie_max_burst_ns, c->pie_alpha, c->pie_beta, c->ecn ? "true" : "false",
                    (long long)c->delay_ns, (long long)c->jitter_ns, c->reorder ? "true" : "false",
                    (unsigned long long)c->seed, boxes[c->middlebox], c->middlebox_split ? "true" : "false",
                    c->middlebox_max, c->middlebox_to >> 24, c->middlebox_to >> 16 & 255, c->middlebox_to >> 8 & 255,
                    c->middlebox_to & 255, __builtin_popcount(c->middlebox_to_mask));
}
