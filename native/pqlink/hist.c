#include "hist.h"

unsigned hist_index(uint64_t v)
{
    if (v < HIST_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* e >= 6 */
    unsigned sub = (unsigned)(v >> (e - 6)) & (HIST_SUB - 1);
    return HIST_SUB + (e - 6) * HIST_SUB + sub;
}

uint64_t hist_bucket_low(unsigned idx)
{
    if (idx < HIST_SUB)
        return idx;
    unsigned e = (idx - HIST_SUB) / HIST_SUB + 6, sub = (idx - HIST_SUB) % HIST_SUB;
    return (uint64_t)(HIST_SUB + sub) << (e - 6);
}

void hist_add(struct hist *h, uint64_t v)
{
    cnt_add(&h->bucket[hist_index(v)], 1);
    cnt_add(&h->n, 1);
    cnt_max(&h->max, v);
}

void hist_reset(struct hist *h)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        cnt_set(&h->bucket[i], 0);
    cnt_set(&h->n, 0);
    cnt_set(&h->max, 0);
}

double hist_quantile(const struct hist *h, double q)
{
    uint64_t n = cnt_get(&h->n);
    if (!n)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)(n - 1)) + 1, seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += cnt_get(&h->bucket[i]);
        if (seen >= rank) {
            uint64_t lo = hist_bucket_low(i), hi = i + 1 < HIST_BUCKETS ? hist_bucket_low(i + 1) : lo;
            double mid = lo + (hi - lo - 1) / 2.0;
            double mx = (double)cnt_get(&h->max);
            return mid < mx ? mid : mx;
        }
    }
    return (double)cnt_get(&h->max);
}
