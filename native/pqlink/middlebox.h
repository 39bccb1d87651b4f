/* An ossified middlebox: a stage that reads the first bytes of each client->server TCP segment and
 * kills the connection when a TLS ClientHello does not fit one segment (its record is longer than the
 * segment's payload) or is larger than a size, as deployed middleboxes did when post-quantum key
 * shares made ClientHellos span two segments. It either drops the segment (the client meets silence)
 * or turns it into a RST to the server (the server aborts; the client's next segment is answered with
 * a RST, so the client sees a reset). IPv4 only; anything else passes untouched. */
#ifndef PQLINK_MIDDLEBOX_H
#define PQLINK_MIDDLEBOX_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "stage.h"
#include "util.h"

#define MIDDLEBOX_KILLED 64 /* connections remembered after a reset, so their retransmits pass */

struct middlebox_killed {
    uint32_t saddr, daddr;
    uint16_t sport, dport;
};

struct middlebox_stage {
    struct stage base;
    struct pkt_fifo passed; /* accepted packets wait here for the next stage (zero time) */
    enum middlebox_action action;
    bool split;         /* act on a ClientHello longer than its first segment */
    uint32_t max_bytes; /* act on a ClientHello record longer than this; 0 = no limit */
    uint32_t to, to_mask; /* act only on segments to this network (host byte order); 0/0 = all */
    uint64_t acted;     /* ClientHellos acted on since the last restart */
    struct middlebox_killed killed[MIDDLEBOX_KILLED];
    unsigned killed_next, killed_n;
};

extern const struct stage_ops middlebox_stage_ops;

/* What the middlebox sees in an IPv4 packet: 1 when it opens a TLS ClientHello record, with the
 * record's length (header excluded) and the TCP payload's length; 0 otherwise. */
int middlebox_client_hello(const uint8_t *data, uint32_t len, uint32_t *record_len, uint32_t *payload_len);

/* 1 when an IPv4 packet is a fragment: more fragments follow it (MF) or it is not the first (an offset). */
bool middlebox_ip_fragment(const uint8_t *data, uint32_t len);

/* Rewrites an IPv4 TCP segment in place into a RST with the same addresses, ports and sequence
 * number and no payload (checksums recomputed); returns its new length. */
uint32_t middlebox_to_rst(uint8_t *data, uint32_t len);

#endif
