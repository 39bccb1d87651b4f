/* Per-sample record: phase timestamps and handshake message sizes, filled by OpenSSL's message
 * callback and the sample loop, printed as one JSON line. */
#ifndef PQTIMER_TRACE_H
#define PQTIMER_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include <openssl/ssl.h>

/* Phases in the order they happen; each a CLOCK_MONOTONIC_RAW time in ns, 0 = did not happen. */
enum phase {
    PH_START,                    /* before socket() and connect() */
    PH_TCP_CONNECTED,            /* connect() completed (TCP only) */
    PH_CLIENT_HELLO_SENT,        /* ClientHello handed to the record layer; QUIC: first Initial datagram sent */
    PH_SERVER_HELLO_RECEIVED,    /* ServerHello processed */
    PH_HANDSHAKE_PACKET_RECEIVED, /* QUIC: the server's first Handshake packet processed */
    PH_SERVER_FINISHED_RECEIVED, /* server Finished processed */
    PH_HANDSHAKE_DONE,           /* SSL_connect() returned success; QUIC: the datagram with the client's Finished sent */
    PH_FIRST_BYTE,               /* first byte of the (first) HTTP response */
    PH_LAST_BYTE,                /* last byte of the (last) HTTP response */
    PH_COUNT
};

extern const char *const phase_names[PH_COUNT];

/* Handshake message types we account for, by TLS HandshakeType value. */
#define TRACE_MSG_TYPES 256
#define TRACE_MAX_HELLOS 2 /* a second ClientHello answers a HelloRetryRequest; there is no third */
#define TRACE_MAX_SHARES 8

struct tcp_counts {
    int valid;
    uint64_t bytes_sent, bytes_received;
    uint32_t segs_out, segs_in, total_retrans, rtt_us, snd_cwnd;
};

#define QUIC_RX_RING 64
#define QUIC_MAX_KINDS 64

/* Packet types a datagram holds, one bit each (printed as quicgo does: I, 0, H, R, 1, V, ?). */
#define QUIC_KIND_INITIAL 0x01
#define QUIC_KIND_ZERO_RTT 0x02
#define QUIC_KIND_HANDSHAKE 0x04
#define QUIC_KIND_RETRY 0x08
#define QUIC_KIND_SHORT 0x10            /* a 1-RTT packet */
#define QUIC_KIND_VERSION_NEGOTIATION 0x20
#define QUIC_KIND_UNPARSED 0x40         /* bytes that do not walk as QUIC packets */

struct quic_rx_datagram {
    const unsigned char *p; /* OpenSSL's buffer, valid while its packets are processed */
    size_t len;
    uint64_t offset;        /* payload bytes received before it */
};

/* QUIC, from OpenSSL's message callback (datagrams, packet headers, frame headers): UDP payload counts,
 * the first Initial, Retry, version, and where the client's Finished and the response's end were. */
struct quic_counts {
    uint32_t datagrams_sent, datagrams_received;
    uint64_t bytes_sent, bytes_received; /* UDP payload */
    uint32_t initial_size;               /* the first datagram the client sent */
    int retry;                           /* a Retry packet arrived */
    uint32_t version;                    /* of the server's first long-header packet; 0 = none seen */
    /* The client's Finished: handed to QUIC (TLS message callback), then framed (a CRYPTO frame built),
     * then sent in a datagram carrying a Handshake packet: bytes sent before that datagram. */
    int finished_written, finished_framed, finished_sent;
    uint64_t finished_offset;
    /* The packet types of each datagram until the client's Finished left (received: before it left). */
    uint8_t sent_kinds[QUIC_MAX_KINDS], received_kinds[QUIC_MAX_KINDS];
    unsigned sent_kinds_n, received_kinds_n;
    /* Received datagrams, newest last, so a packet being processed finds the datagram it came in. */
    struct quic_rx_datagram rx[QUIC_RX_RING];
    unsigned rx_n;
    uint64_t rx_current; int rx_current_valid; /* offset of the datagram being processed */
    /* The response stream (page modes): the datagram holding the last of its frames processed before the
     * application saw its end; -1 = no stream watched. */
    int64_t resp_stream;
    int resp_done;
    uint64_t resp_offset; int resp_offset_valid;
};

struct trace {
    uint64_t t[PH_COUNT];
    int quic;               /* the sample runs over QUIC: the phases come from datagrams, not the TLS layer */
    struct quic_counts q;
    uint32_t sent_bytes[TRACE_MSG_TYPES];  /* handshake message bytes we sent, by type */
    uint32_t recv_bytes[TRACE_MSG_TYPES];  /* … and received */
    uint32_t sent_count[TRACE_MSG_TYPES];
    uint32_t recv_count[TRACE_MSG_TYPES];
    uint32_t records_in, records_out;      /* TLS records seen (headers) */
    struct tcp_counts tcp_handshake;       /* TCP_INFO when the handshake completed */
    struct tcp_counts tcp_end;             /* TCP_INFO at the end of the sample */
    int http_status;
    uint64_t body_bytes;
    int requests_done;
    int local_port; /* the connected socket's local TCP port (joins the sample to the emulator's
                       record of its connection); 0 = no socket was connected */
    /* Time this thread waited on a run queue for a CPU (the kernel's schedstat) from the start to the
     * handshake's completion, or to the end of a failed sample; UINT64_MAX = unknown. */
    uint64_t cpu_wait_ns;
    int hrr; /* the server sent a HelloRetryRequest (a ServerHello with RFC 8446's special random) */
    uint64_t t_hrr;  /* when the HelloRetryRequest was processed (CLOCK_MONOTONIC_RAW ns), 0 = none */
    /* Each ClientHello sent (two after a HelloRetryRequest): its size (handshake header included) and the
     * key shares it carried (TLS group code point, key_exchange bytes). hellos counts them all. */
    int hellos;
    uint32_t hello_bytes[TRACE_MAX_HELLOS];
    int hello_shares[TRACE_MAX_HELLOS];
    uint16_t share_group[TRACE_MAX_HELLOS][TRACE_MAX_SHARES];
    uint16_t share_bytes[TRACE_MAX_HELLOS][TRACE_MAX_SHARES];
    /* A CompressedCertificate (RFC 8879) received: its algorithm (1 zlib, 2 brotli, 3 zstd; 0 = none) and
     * the length of the Certificate message it stands for (body only, as the message says). */
    int cert_comp_alg;
    uint32_t cert_comp_uncompressed;
    /* TCP payload the client had sent (TLS records, headers included) when its Finished went out, so the
     * wire record can find the Finished after a HelloRetryRequest (one more client flight) */
    uint64_t record_bytes_out, last_record_start, finished_offset;
    int early_data; /* mode early: SSL_get_early_data_status() + 1 once the handshake completed; 0 = unknown */
    /* Read after the timed phases, before the connection is freed: DER size of each certificate the
     * server sent, leaf first (chain_n = how many; more than TRACE_MAX_CHAIN are counted, not sized),
     * the algorithm that signed each, and the verification result (verify_valid = 0 when no certificate arrived). */
    int chain_n;
    uint32_t chain_der[16];
    char chain_sig[16][48]; /* the algorithm each certificate is signed with (its issuer's), as OpenSSL names it */
    int verify_valid;
    long verify;
};
#define TRACE_MAX_CHAIN 16

uint64_t now_ns(void);
/* QUIC_KIND_* bits of the packets a datagram holds (as on the wire: only unprotected header bits read). */
uint8_t quic_kinds(const unsigned char *p, size_t len);
void trace_reset(struct trace *tr);
/* SSL_set_msg_callback target; arg is the struct trace. */
void trace_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl, void *arg);
void tcp_counts_read(int fd, struct tcp_counts *out);
/* This thread's total run-queue wait so far in ns (/proc/thread-self/schedstat), UINT64_MAX when the
 * kernel does not say. */
uint64_t cpu_wait_total_ns(void);
/* Closes the calling thread's schedstat file (a thread that ends) */
void cpu_wait_release(void);

#endif
