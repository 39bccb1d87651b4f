/* The queue in front of the bottleneck's service and its discipline: drop-tail (the packet and byte
 * limits, which bound the other two as well), CoDel (drops at dequeue, codel.h) or PIE (drops at
 * enqueue, pie.h). With ecn on, an ECN-capable packet the discipline would drop is marked CE and
 * sent instead (the limits always drop). Packets dropped at dequeue wait in `dropped` until the
 * stage hands them to the pipeline, which counts them. Clock-free: time comes in as arguments. */
#ifndef PQLINK_AQM_H
#define PQLINK_AQM_H

#include "codel.h"
#include "config.h"
#include "pie.h"
#include "stage.h"

struct aqm {
    struct pkt_fifo q;
    struct pkt_fifo dropped;
    enum aqm_kind kind;
    bool ecn;
    uint32_t limit_packets; /* 0 = unbounded */
    uint64_t limit_bytes;   /* 0 = unbounded */
    struct codel codel;
    struct pie pie;
};

extern const char *const aqm_names[3]; /* "droptail", "codel", "pie" */

void aqm_init(struct aqm *a, const struct dir_config *c, int dir);
/* New parameters; the controller keeps its state unless the discipline changes. */
void aqm_configure(struct aqm *a, const struct dir_config *c);
/* A measurement starts: PIE's random sequence from the seed. */
void aqm_restart(struct aqm *a, const struct dir_config *c, int dir);
/* held_packets/bytes: what the service holds outside the queue and counts against its limits. */
enum verdict aqm_enqueue(struct aqm *a, struct pkt *p, uint32_t held_packets, uint64_t held_bytes);
/* The next packet that arrived by now and that the discipline lets through, or NULL. */
struct pkt *aqm_dequeue(struct aqm *a, int64_t now);

/* Sets CE on an ECN-capable IPv4/IPv6 packet (fixing the IPv4 header checksum); false when the
 * packet is not ECN-capable. */
bool ecn_mark(struct pkt *p);

#endif
