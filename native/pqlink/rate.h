/* The bottleneck: a queue (aqm.h: drop-tail, CoDel or PIE, with packet and byte limits) in front
 * of a service that is either a fixed rate (each packet serialised as len + overhead bytes, one
 * after another) or a delivery trace (trace.h) in its place. The packet in service counts against
 * the queue's limits, as in netem and tbf.
 *
 * Trace service, as in mahimahi: at each opportunity up to trace_bytes (1500) bytes leave; a packet
 * leaves at the opportunity that delivers its last byte, so one opportunity can carry several
 * small packets and a packet larger than trace_bytes (not possible at MTU 1500) takes several.
 * Bytes of an opportunity that the queue cannot use are lost (the link was there, idle). The trace
 * is anchored at the first packet (offset 0) until a phase restart (rate_trace_restart) moves it.
 *
 * Every packet's sojourn time (waiting in the queue before its service began) is left in p->qdelay. */
#ifndef PQLINK_RATE_H
#define PQLINK_RATE_H

#include "aqm.h"
#include "config.h"
#include "stage.h"
#include "trace.h"
#include "util.h"

struct rate_stage {
    struct stage base;
    struct aqm q;          /* waiting packets and their discipline */
    struct pkt_fifo done;  /* served, to leave at their p->t */
    struct pkt *svc;       /* in service: left the queue at svc_start */
    int64_t svc_start;
    int64_t svc_done;      /* fixed rate: when its serialisation ends */
    uint32_t svc_left;     /* trace: bytes still to deliver */
    int64_t busy_until;    /* fixed rate: when the last packet finished */
    uint64_t rate_bps;     /* 0 (and no trace) = unlimited: packets pass without delay or queueing */
    uint32_t overhead;
    const struct trace *trace;
    uint32_t trace_bytes;
    bool anchored;         /* the trace has an epoch */
    int64_t epoch;         /* when the trace's time 0 was (or would have been) */
    struct trace_pos pos;  /* the next opportunity not used yet */
    int64_t last_opp;      /* time of the last opportunity used */
    int64_t offset_ns;     /* the latest phase restart's offset into the trace */
    uint32_t peak_packets;
    uint64_t peak_bytes;
};

extern const struct stage_ops rate_stage_ops;

void rate_init(struct rate_stage *s, const struct dir_config *c, int dir);
/* New parameters apply from the next packet that starts service (the one in service keeps its time). */
void rate_configure(struct rate_stage *s, const struct dir_config *c);
/* Serialisation time of len bytes at the current rate, in ns. */
int64_t rate_ser_ns(const struct rate_stage *s, uint32_t len);
/* A new connection at time at: the trace continues from fraction u of its period (nothing without a trace). */
void rate_trace_restart(struct rate_stage *s, int64_t at, double u);

#endif
