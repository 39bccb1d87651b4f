/* The wire recorder: per connection (TCP or UDP over IPv4 or IPv6), the milestones a packet
 * capture at the CLIENT side of the link would show — when it opened, the SYN, SYN-ACK and first
 * FIN/RST, per direction its packets, bytes, retransmissions and our drops, and its flights; for
 * UDP also its first datagrams one by one (time, size, and for the client's what the link did).
 *
 * The client is the source of c2s packets. A c2s packet is seen at the client when it is read
 * from the client's TUN (its arrival into the link, whether or not we drop it later); an s2c
 * packet when it is written into the client's TUN (delivered; s2c packets we drop never reach
 * the client and count only as lost or queue drops). Retransmissions are counted where the
 * sender's behaviour shows, at the arrival into the link, in both directions.
 *
 * One table shared by both forwarding threads, guarded by one mutex (tiny critical sections).
 * It never reads a clock: times come in as arguments, so it runs on a virtual clock in tests. */
#ifndef PQLINK_FLOWS_H
#define PQLINK_FLOWS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FLOW_FLIGHTS 16          /* flights kept per connection; later ones are only counted */
#define FLOW_NO_TIME INT64_MIN   /* a milestone that did not happen (JSON null) */
#define FLOW_MAX_CAPACITY (1u << 22)
#define FLOW_DGRAMS 256          /* datagrams listed per UDP connection; later ones are only counted */
#define FLOW_DGRAM_CHUNK 32      /* listed in chunks of this many, from a pool the table shares */

enum flow_event {
    FLOW_ARRIVAL,    /* read from the input device (either direction) */
    FLOW_DELIVERY,   /* written to the output device */
    FLOW_LOST,       /* dropped by the loss stage */
    FLOW_QUEUE_DROP, /* dropped by the bottleneck's queue (its limit, CoDel or PIE) */
};

/* What became of a listed datagram. s2c ones are listed when delivered (the others never reach
 * the client); c2s ones when they arrive, in flight until the link delivers or drops them. */
enum dgram_fate { DGRAM_IN_FLIGHT, DGRAM_DELIVERED, DGRAM_LOST, DGRAM_QUEUE_DROP };

struct flow_dgram {
    int64_t t_ns;   /* at the client side */
    uint32_t id;    /* the link's number for the packet in its direction (low bits): settles a c2s fate */
    uint16_t bytes; /* UDP payload */
    uint8_t dir, fate;
};

/* A connection, from the client's side; zero-filled before use so it compares with memcmp. */
struct flow_key {
    uint8_t family; /* 4 or 6 */
    uint8_t proto;  /* IPPROTO_TCP or IPPROTO_UDP */
    uint16_t client_port, server_port;
    uint16_t pad;
    uint8_t client[16], server[16]; /* network order; IPv4 in the first 4 bytes */
};

/* What the recorder needs from one packet (flow_parse). */
struct flow_pkt {
    struct flow_key key;
    uint32_t ip_len;  /* bytes of IP packet */
    uint32_t payload; /* TCP or UDP payload bytes */
    uint32_t seq;     /* TCP only, like the flags */
    bool syn, ack, fin, rst, psh;
    /* UDP carrying a QUIC Initial packet (long header): the client's first datagram of a
     * connection, its retransmissions, and its Initials until the handshake moves on */
    bool quic_initial;
    uint64_t quic_scid; /* a signature of its source connection ID (length and bytes), never 0 */
};

struct flow_side {
    int64_t first_ns, last_ns; /* seen at the client side; FLOW_NO_TIME when none */
    uint64_t packets, bytes, payload_bytes;
    uint64_t retrans, lost, queue_drops;
    uint64_t late_max_ns; /* the latest the link released one of this side's packets after its deadline */
    /* TCP sequence tracking, at arrival into the link */
    uint32_t isn;      /* sequence number of this side's SYN */
    uint32_t seq_high; /* highest sequence end (seq + payload + SYN + FIN) seen so far */
    bool syn_seen, seq_valid;
};

/* A maximal run of payload-carrying packets in one direction; consecutive flights alternate. */
struct flight {
    int64_t first_ns, last_ns;
    uint64_t bytes; /* payload bytes */
    uint32_t packets;
    uint32_t pushes; /* TCP segments with PSH: the sender's kernel sets it where a write ends, so it
                        shows how the sender's library flushed the flight */
    uint8_t dir;
};

struct flow {
    struct flow_key key;
    int64_t open_ns, syn_ns, synack_ns, fin_ns;
    struct flow_side side[2]; /* indexed by direction: DIR_C2S, DIR_S2C */
    struct flight flights[FLOW_FLIGHTS];
    uint32_t nflights;
    uint64_t flights_overflow;
    int8_t flight_dir; /* direction of the flight in progress; -1 before the first */
    bool retired;      /* an earlier connection on the same addresses and ports */
    /* UDP: the first FLOW_DGRAMS datagrams at the client side, in chunks of the table's pool */
    uint16_t ndgrams;
    uint16_t dgram_unsettled; /* no c2s datagram listed before this index is still in flight */
    uint32_t dgram_chunks[FLOW_DGRAMS / FLOW_DGRAM_CHUNK];
    uint64_t dgrams_overflow; /* datagrams not listed: past FLOW_DGRAMS, or the pool was used up */
    uint64_t quic_scid;       /* the client's QUIC source connection ID (signature); 0 = none seen */
};

struct flow_table {
    pthread_mutex_t lock;
    size_t capacity;     /* connections recorded at most; 0 = recorder off */
    struct flow *flows;  /* in the order they opened */
    size_t used;
    /* Open addressing over flows and the keys of connections turned away when full, so each of
     * those is counted once: 0 = empty, i + 1 = flows[i], SPILL | (i + 1) = spill[i]. */
    uint32_t *index;
    size_t mask;
    struct flow_key *spill;
    size_t spill_capacity, spill_used;
    /* the datagram lists' pool: chunks of FLOW_DGRAM_CHUNK, handed out in order until a reset */
    struct flow_dgram *dgrams;
    size_t dgram_chunks, dgram_chunks_used;
    uint64_t untracked_flows, untracked_packets;
};

struct flows_summary {
    uint64_t flows, untracked_flows, untracked_packets;
};

/* capacity 0 leaves the recorder off (every call is then a no-op). Returns 0, or -1 without memory. */
int flows_init(struct flow_table *t, size_t capacity);
void flows_destroy(struct flow_table *t);
/* Forgets every connection and zeroes the untracked counters. */
void flows_reset(struct flow_table *t);
/* One packet of direction dir (DIR_C2S/DIR_S2C) met event ev at time now. id is the link's number
 * for the packet in its direction (pkt->seq), the same at every event of one packet. */
void flows_note(struct flow_table *t, int dir, enum flow_event ev, const uint8_t *pkt, size_t len, uint64_t id,
                int64_t now);
/* A packet the link wrote out `late` ns after its deadline (FLOW_DELIVERY with the link's own lateness,
 * so a slow sample can tell the emulator's delay from the endpoints'). */
void flows_delivered(struct flow_table *t, int dir, const uint8_t *pkt, size_t len, uint64_t id, int64_t now,
                     int64_t late);
/* Writes one JSON object per connection to f and fills sum. Returns 0, or -1 if a write failed. */
int flows_write_json(struct flow_table *t, FILE *f, struct flows_summary *sum);
/* Creates or truncates path (mode 0600) and writes the connections into it. Returns 0, or -1 with
 * a message naming the failed operation in err. */
int flows_write_file(struct flow_table *t, const char *path, struct flows_summary *sum, char *err, size_t errlen);

/* Parses a TCP or UDP packet of direction dir into the connection's key (client = the source of
 * c2s packets), and whether a UDP one carries a QUIC Initial. Returns 0, or -1 for anything else:
 * other protocols, fragments, IPv6 extension headers other than hop-by-hop, routing and destination
 * options, truncated headers. */
int flow_parse(const uint8_t *pkt, size_t len, int dir, struct flow_pkt *out);

#endif
