/* Lateness histogram: log-linear buckets (64 per power of two, ~1.6 % resolution) over ns,
 * one writer, readable at any time by another thread. */
#ifndef PQLINK_HIST_H
#define PQLINK_HIST_H

#include <stdint.h>

#include "util.h"

#define HIST_SUB 64
#define HIST_BUCKETS (HIST_SUB + 58 * HIST_SUB)

struct hist {
    counter_t bucket[HIST_BUCKETS];
    counter_t n;
    counter_t max;
};

void hist_add(struct hist *h, uint64_t v);
void hist_reset(struct hist *h);
/* Value (ns) at quantile q in [0, 1]; 0 when empty. Reports the middle of the bucket. */
double hist_quantile(const struct hist *h, double q);
/* Exposed for tests. */
unsigned hist_index(uint64_t v);
uint64_t hist_bucket_low(unsigned idx);

#endif
