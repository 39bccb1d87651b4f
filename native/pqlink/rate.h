/* Rate limiter with a bounded FIFO queue: each packet is serialised at the configured rate
 * (its length plus a per-packet overhead), one after another; arrivals that find the queue full
 * are dropped (tail drop). The packet being serialised counts as queued, as in netem and tbf. */
#ifndef PQLINK_RATE_H
#define PQLINK_RATE_H

#include "config.h"
#include "stage.h"
#include "util.h"

struct rate_stage {
    struct stage base;
    struct pkt_fifo q;
    uint64_t rate_bps; /* 0 = unlimited: packets pass without delay or queueing */
    uint32_t overhead;
    uint32_t limit_packets; /* 0 = unbounded */
    uint64_t limit_bytes;   /* 0 = unbounded */
    int64_t busy_until;     /* when the last dequeued packet finished serialisation */
    uint32_t peak_packets;
    uint64_t peak_bytes;
};

extern const struct stage_ops rate_stage_ops;

void rate_init(struct rate_stage *s, const struct dir_config *c);
/* New parameters apply from the packet at the head on (already finished ones keep their times). */
void rate_configure(struct rate_stage *s, const struct dir_config *c);
/* Serialisation time of len bytes at the current rate, in ns. */
int64_t rate_ser_ns(const struct rate_stage *s, uint32_t len);

#endif
