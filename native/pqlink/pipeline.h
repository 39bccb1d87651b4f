/* One direction of the link: middlebox (off by default) -> loss -> bottleneck (queue + fixed rate or trace, rate.h) -> delay ->
 * output, with its counters and, optionally, the wire recorder (flows.h) told about every arrival,
 * delivery and drop, and the trace phase (phase.h) shared with the other direction. Time is passed
 * in, so the whole pipeline runs on a virtual clock in tests. */
#ifndef PQLINK_PIPELINE_H
#define PQLINK_PIPELINE_H

#include "config.h"
#include "delay.h"
#include "flows.h"
#include "hist.h"
#include "loss.h"
#include "middlebox.h"
#include "phase.h"
#include "rate.h"

struct dir_counters {
    counter_t rx_packets, rx_bytes;        /* read from the input device */
    counter_t fwd_packets, fwd_bytes;      /* written to the output device */
    counter_t lost, queue_drops;           /* dropped by the loss stage / the queue (limit or discipline) */
    counter_t aqm_drops, ecn_marks;        /* of those, by CoDel/PIE; packets marked CE instead */
    counter_t pool_drops, write_errors;    /* no memory / write() failed */
    counter_t peak_queue_packets, peak_queue_bytes;
    counter_t max_packet_bytes;            /* largest packet that crossed the link */
    counter_t in_flight;                   /* held by the stages right now */
    struct hist lateness;                  /* output time - ideal output time, ns */
    struct hist sojourn;                   /* time delivered packets waited in the bottleneck's queue, ns */
    counter_t sojourn_sum_ns;              /* for the mean */
};

#define PIPELINE_STAGES 4

struct pipeline {
    int dir;
    uint64_t next_seq; /* never reset, so drop logs stay comparable */
    struct dir_config cfg;
    struct middlebox_stage middlebox;
    struct loss_stage loss;
    struct rate_stage rate;
    struct delay_stage delay;
    struct stage *stages[PIPELINE_STAGES]; /* the four above, in packet order */
    struct pkt_pool pool;
    struct dir_counters *cnt;
    /* Writes a packet that is due; returns 0, or -1 when the write failed. */
    int (*output)(void *ctx, struct pkt *p, int64_t now);
    /* Told about every drop (for the drop log); may be NULL. */
    void (*on_drop)(void *ctx, const struct pkt *p, enum verdict why, int64_t now);
    void *ctx;
    struct flow_table *flows; /* the wire recorder, shared by both directions; NULL = off */
    struct trace_phase *phase; /* shared by both directions; NULL = traces never restart */
    uint64_t phase_seen;       /* the last restart this direction applied */
};

/* cnt must stay valid while the pipeline lives. Returns 0, or -1 without memory. */
int pipeline_init(struct pipeline *pl, int dir, const struct dir_config *c, struct dir_counters *cnt);
void pipeline_configure(struct pipeline *pl, const struct dir_config *c);
/* A packet read at time now (sets arrival, t and seq). Releases due packets first. */
void pipeline_input(struct pipeline *pl, struct pkt *p, int64_t now);
/* Moves every packet due at now through the stages and out. */
void pipeline_pump(struct pipeline *pl, int64_t now);
int64_t pipeline_next_deadline(const struct pipeline *pl);
/* Zeroes the counters and the peaks (packets in flight stay) and restarts the random sequences
 * from the seed: a measurement starts. */
void pipeline_reset_counters(struct pipeline *pl);
void pipeline_destroy(struct pipeline *pl);

#endif
