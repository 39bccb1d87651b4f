/* PIE (RFC 8033): drops arriving packets at random with a probability a PI controller updates every
 * tupdate from the queueing delay (alpha on its distance from target, beta on its trend), with the
 * RFC's scaling of the step at small probabilities, the 2 % cap on steps above 10 %, the decay when
 * the queue is idle, and a burst allowance (max_burst) during which nothing is dropped early.
 * Written from the RFC's description. The queueing delay is taken from timestamps (which the RFC
 * allows instead of a departure-rate estimate): the time the packet at the head has waited. */
#ifndef PQLINK_PIE_H
#define PQLINK_PIE_H

#include <stdbool.h>
#include <stdint.h>

#include "packet.h"
#include "rng.h"

#define PIE_NO_UPDATE INT64_MIN

struct pie {
    int64_t target, tupdate, max_burst;
    double alpha, beta; /* per second of delay */
    double prob;
    int64_t qdelay_old;
    int64_t burst_left;
    int64_t next_update; /* PIE_NO_UPDATE until the first packet */
    int64_t last_now;
    struct rng rng;
};

void pie_init(struct pie *p, int64_t target, int64_t tupdate, int64_t max_burst, double alpha, double beta);
/* Runs the controller's updates due up to now against the queue q as it is. */
void pie_advance(struct pie *p, const struct pkt_fifo *q, int64_t now);
/* The random early drop decision for a packet arriving at now (after pie_advance). */
bool pie_drop_early(struct pie *p, const struct pkt_fifo *q);
/* One update at time now (exposed for tests). */
void pie_update(struct pie *p, const struct pkt_fifo *q, int64_t now);

#endif
