/* Where in their traces the two directions are. Each new client connection (a client->server TCP
 * SYN, or a client QUIC Initial, that is not a retransmission) restarts both directions' traces at
 * the next offset of a sequence seeded from the link's seed: the k-th connection of every
 * measurement with the same seed meets the same capacity pattern, whatever the algorithm (paired
 * comparisons). The offset is a fraction u of each direction's period (trace_offset_ns). A reset
 * restarts the sequence.
 *
 * Written by the client->server thread only (phase_note, phase_reseed), read by both through a
 * sequence lock (phase_poll). Clock-free: the SYN's arrival time comes in as an argument. */
#ifndef PQLINK_PHASE_H
#define PQLINK_PHASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "util.h"

#define PHASE_RECENT 64 /* SYNs and Initials remembered to tell a retransmitted one from a new connection */

struct trace_phase {
    atomic_bool active;     /* some direction has a trace: look for SYNs and Initials */
    _Atomic uint64_t seq;   /* odd while being written */
    _Atomic uint64_t gen;   /* restarts since the start (never reset) */
    _Atomic int64_t at;     /* when the latest restart happened */
    _Atomic uint64_t u_bits; /* its fraction of the period (double bits) */
    /* the record since the last reset */
    counter_t restarts;
    _Atomic uint64_t first_u_bits, last_u_bits;
    /* the writer's own */
    struct rng rng;
    uint64_t recent[PHASE_RECENT];
    unsigned next_recent;
};

void phase_init(struct trace_phase *ph, uint64_t seed);
/* Restarts the offset sequence from seed and clears the record and the remembered SYNs and Initials. */
void phase_reseed(struct trace_phase *ph, uint64_t seed);
/* A client->server packet arrived at now; restarts the phase if it opens a new connection.
 * Returns true when it did. */
bool phase_note(struct trace_phase *ph, const uint8_t *pkt, size_t len, int64_t now);
/* Restarts directly (tests, and phase_note). */
void phase_restart(struct trace_phase *ph, int64_t now);
/* If a restart newer than *seen happened, stores its time and fraction, updates *seen, returns true. */
bool phase_poll(struct trace_phase *ph, uint64_t *seen, int64_t *at, double *u);

static inline double phase_bits_to_u(uint64_t b)
{
    union { uint64_t b; double d; } x = {.b = b};
    return x.d;
}

#endif
