#define _GNU_SOURCE
#include "trace.h"
#include "h3.h"

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

const char *const phase_names[PH_COUNT] = {
    "start", "tcp_connected", "client_hello_sent", "server_hello_received", "handshake_packet_received",
    "server_finished_received", "handshake_done", "first_byte", "last_byte",
};

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void trace_reset(struct trace *tr) {
    memset(tr, 0, sizeof *tr);
    tr->q.resp_stream = -1;
}

/* SHA-256("HelloRetryRequest"): the random of a ServerHello that is a HelloRetryRequest (RFC 8446 4.1.3) */
static const unsigned char hrr_random[32] = {
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C};

/* each thread's own file: a page load's further connections are timed in threads of their own */
static __thread int schedstat_fd = -2;

uint64_t cpu_wait_total_ns(void) {
    /* "run_ns wait_ns slices": opened once per thread, re-read from offset 0 (a few microseconds, outside any
     * phase's timestamp) */
    int fd = schedstat_fd;
    if (fd == -2)
        fd = schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    char buf[96];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return UINT64_MAX;
    buf[n] = 0;
    unsigned long long run, wait;
    return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? (uint64_t)wait : UINT64_MAX;
}

void cpu_wait_release(void) {
    if (schedstat_fd >= 0)
        close(schedstat_fd);
    schedstat_fd = -2;
}

/* Notes a ClientHello's size and its key shares (RFC 8446 4.2.8). A malformed message (which OpenSSL
 * would not send) just ends the walk. */
static void client_hello_shares(struct trace *tr, const unsigned char *p, size_t len) {
    int h = tr->hellos++;
    if (h >= TRACE_MAX_HELLOS)
        return;
    tr->hello_bytes[h] = (uint32_t)len;
    tr->hello_shares[h] = 0;
    /* type (1), length (3), legacy_version (2), random (32), then session id, suites, compression */
    size_t off = 38;
    if (off + 1 > len)
        return;
    off += 1 + p[off];
    if (off + 2 > len)
        return;
    off += 2 + (p[off] << 8 | p[off + 1]);
    if (off + 1 > len)
        return;
    off += 1 + p[off];
    if (off + 2 > len)
        return;
    size_t end = off + 2 + (p[off] << 8 | p[off + 1]);
    off += 2;
    if (end > len)
        end = len;
    while (off + 4 <= end) {
        unsigned ext = p[off] << 8 | p[off + 1];
        size_t elen = p[off + 2] << 8 | p[off + 3];
        off += 4;
        if (off + elen > end)
            return;
        if (ext == 51 /* key_share */ && elen >= 2) {
            size_t s = off + 2, send = off + 2 + (p[off] << 8 | p[off + 1]);
            if (send > off + elen)
                send = off + elen;
            while (s + 4 <= send && tr->hello_shares[h] < TRACE_MAX_SHARES) {
                int k = tr->hello_shares[h]++;
                tr->share_group[h][k] = (uint16_t)(p[s] << 8 | p[s + 1]);
                tr->share_bytes[h][k] = (uint16_t)(p[s + 2] << 8 | p[s + 3]);
                s += 4 + tr->share_bytes[h][k];
            }
            return;
        }
        off += elen;
    }
}

/* ---- QUIC (RFC 9000): what the datagrams, packet headers and frame headers OpenSSL reports say ---- */

#define QUIC_LONG_HEADER 0x80
#define QUIC_TYPE_INITIAL 0
#define QUIC_TYPE_HANDSHAKE 2
#define QUIC_TYPE_RETRY 3
#define QUIC_FRAME_CRYPTO 0x06

/* The long-header type of the packet starting at p (its two type bits are not header-protected), -1 for
 * a short header or a Version Negotiation packet. */
static int quic_long_type(const unsigned char *p, size_t len) {
    if (len < 5 || !(p[0] & QUIC_LONG_HEADER))
        return -1;
    if (!(p[1] | p[2] | p[3] | p[4]))
        return -1; /* version 0: Version Negotiation */
    return (p[0] >> 4) & 3;
}

/* The packet types a datagram (protected, as on the wire) holds, QUIC_KIND_* bits: walks its coalesced
 * long-header packets by their Length fields; a short-header packet is always the last. */
uint8_t quic_kinds(const unsigned char *p, size_t len) {
    static const uint8_t long_kinds[4] = {QUIC_KIND_INITIAL, QUIC_KIND_ZERO_RTT, QUIC_KIND_HANDSHAKE, QUIC_KIND_RETRY};
    uint8_t kinds = 0;
    size_t off = 0;
    while (off < len) {
        const unsigned char *h = p + off;
        size_t left = len - off;
        if (!(h[0] & QUIC_LONG_HEADER))
            return kinds | QUIC_KIND_SHORT;
        if (left < 5)
            return kinds | QUIC_KIND_UNPARSED;
        if (!(h[1] | h[2] | h[3] | h[4]))
            return kinds | QUIC_KIND_VERSION_NEGOTIATION;
        int t = (h[0] >> 4) & 3;
        kinds |= long_kinds[t];
        if (t == QUIC_TYPE_RETRY)
            return kinds; /* no Length: runs to the datagram's end */
        size_t k = 5; /* first byte, version */
        for (int cid = 0; cid < 2; cid++) { /* destination, then source connection ID */
            if (k >= left)
                return kinds | QUIC_KIND_UNPARSED;
            k += 1 + h[k];
        }
        uint64_t v;
        size_t n;
        if (t == QUIC_TYPE_INITIAL) { /* token */
            if (k >= left || !(n = quic_varint(h + k, left - k, &v)))
                return kinds | QUIC_KIND_UNPARSED;
            k += n + v;
        }
        if (k >= left || !(n = quic_varint(h + k, left - k, &v)) || v > left - k - n)
            return kinds | QUIC_KIND_UNPARSED; /* Length: packet number and payload */
        off += k + n + v;
    }
    return kinds;
}

static void quic_datagram(struct trace *tr, int write_p, const unsigned char *p, size_t len) {
    struct quic_counts *q = &tr->q;
    uint8_t kinds = quic_kinds(p, len);
    if (write_p) {
        if (!q->datagrams_sent++) {
            tr->t[PH_CLIENT_HELLO_SENT] = now_ns(); /* the first Initial left */
            q->initial_size = (uint32_t)len;
        }
        if (!q->finished_sent && q->sent_kinds_n < QUIC_MAX_KINDS)
            q->sent_kinds[q->sent_kinds_n++] = kinds; /* up to the Finished's datagram */
        if (q->finished_framed && !q->finished_sent && (kinds & QUIC_KIND_HANDSHAKE)) {
            tr->t[PH_HANDSHAKE_DONE] = now_ns();
            q->finished_sent = 1;
            q->finished_offset = q->bytes_sent;
        }
        q->bytes_sent += len;
        return;
    }
    q->rx[q->rx_n++ % QUIC_RX_RING] = (struct quic_rx_datagram){p, len, q->bytes_received};
    if (!q->finished_sent && q->received_kinds_n < QUIC_MAX_KINDS)
        q->received_kinds[q->received_kinds_n++] = kinds; /* what came before the client's Finished left */
    q->datagrams_received++;
    q->bytes_received += len;
    int t = quic_long_type(p, len);
    if (t >= 0 && !q->version)
        q->version = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (t == QUIC_TYPE_RETRY)
        q->retry = 1;
}

/* A received packet's header, unprotected, while it is processed: which datagram it came in (the newest
 * that holds it: a buffer is reused only once its datagram is done). */
static void quic_packet_in(struct trace *tr, const unsigned char *p, size_t len) {
    struct quic_counts *q = &tr->q;
    if (quic_long_type(p, len) == QUIC_TYPE_HANDSHAKE && !tr->t[PH_HANDSHAKE_PACKET_RECEIVED])
        tr->t[PH_HANDSHAKE_PACKET_RECEIVED] = now_ns();
    q->rx_current_valid = 0;
    unsigned n = q->rx_n < QUIC_RX_RING ? q->rx_n : QUIC_RX_RING;
    for (unsigned k = 1; k <= n; k++) {
        struct quic_rx_datagram *d = &q->rx[(q->rx_n - k) % QUIC_RX_RING];
        if (p >= d->p && p < d->p + d->len) {
            q->rx_current = d->offset;
            q->rx_current_valid = 1;
            return;
        }
    }
}

/* A frame's header (STREAM and CRYPTO frames: without their data). */
static void quic_frame(struct trace *tr, int write_p, const unsigned char *p, size_t len) {
    struct quic_counts *q = &tr->q;
    if (len < 1)
        return;
    if (write_p) {
        if (p[0] == QUIC_FRAME_CRYPTO && q->finished_written)
            q->finished_framed = 1;
        return;
    }
    uint64_t id;
    if ((p[0] & 0xf8) == 0x08 && q->resp_stream >= 0 && !q->resp_done && quic_varint(p + 1, len - 1, &id) &&
        id == (uint64_t)q->resp_stream && q->rx_current_valid) {
        q->resp_offset = q->rx_current;
        q->resp_offset_valid = 1;
    }
}

static void quic_msg(struct trace *tr, int write_p, int content_type, const unsigned char *p, size_t len) {
    switch (content_type) {
    case SSL3_RT_QUIC_DATAGRAM:
        quic_datagram(tr, write_p, p, len);
        break;
    case SSL3_RT_QUIC_PACKET:
        if (!write_p)
            quic_packet_in(tr, p, len);
        break;
    case SSL3_RT_QUIC_FRAME_HEADER:
    case SSL3_RT_QUIC_FRAME_FULL:
        quic_frame(tr, write_p, p, len);
        break;
    }
}

/* Runs inside the timed region for every handshake message and record header (and, over QUIC, every
 * datagram, packet and frame): only a timestamp and a few additions. */
void trace_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl, void *arg) {
    struct trace *tr = arg;
    const unsigned char *p = buf;
    if (content_type >= SSL3_RT_QUIC_DATAGRAM) {
        quic_msg(tr, write_p, content_type, p, len);
        return;
    }
    if (content_type == SSL3_RT_HEADER) {
        if (write_p) {
            tr->records_out++;
            if (len >= 5) { /* type (1), version (2), length (2) */
                tr->last_record_start = tr->record_bytes_out;
                tr->record_bytes_out += 5u + (p[3] << 8 | p[4]);
            }
        } else
            tr->records_in++;
        return;
    }
    if (content_type != SSL3_RT_HANDSHAKE || len < 1)
        return;
    unsigned type = p[0];
    if (write_p) {
        tr->sent_bytes[type] += (uint32_t)len;
        tr->sent_count[type]++;
        /* OpenSSL calls back for a message once it is written: its record (one) is the last one */
        if (type == SSL3_MT_FINISHED && !tr->finished_offset)
            tr->finished_offset = tr->last_record_start;
        if (type == SSL3_MT_FINISHED)
            tr->q.finished_written = 1; /* QUIC: its datagram is still to be built */
        if (type == SSL3_MT_CLIENT_HELLO) {
            if (!tr->t[PH_CLIENT_HELLO_SENT] && !tr->quic)
                tr->t[PH_CLIENT_HELLO_SENT] = now_ns();
            client_hello_shares(tr, p, len); /* after the timestamp: a walk over the extensions */
        }
    } else {
        tr->recv_bytes[type] += (uint32_t)len;
        tr->recv_count[type]++;
        if (type == SSL3_MT_SERVER_HELLO) {
            tr->t[PH_SERVER_HELLO_RECEIVED] = now_ns(); /* the last one, after a HelloRetryRequest */
            /* type (1), length (3), legacy_version (2), then the random */
            if (len >= 38 && !memcmp(p + 6, hrr_random, sizeof hrr_random)) {
                tr->hrr = 1;
                tr->t_hrr = tr->t[PH_SERVER_HELLO_RECEIVED];
            }
        }
        else if (type == SSL3_MT_COMPRESSED_CERTIFICATE && len >= 9) {
            /* type (1), length (3), algorithm (2), uncompressed_length (3) */
            tr->cert_comp_alg = p[4] << 8 | p[5];
            tr->cert_comp_uncompressed = (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8];
        }
        else if (type == SSL3_MT_FINISHED && !tr->t[PH_SERVER_FINISHED_RECEIVED])
            tr->t[PH_SERVER_FINISHED_RECEIVED] = now_ns();
    }
}

void tcp_counts_read(int fd, struct tcp_counts *out) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(out, 0, sizeof *out);
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return;
    out->valid = 1;
    out->bytes_sent = ti.tcpi_bytes_sent;
    out->bytes_received = ti.tcpi_bytes_received;
    out->segs_out = ti.tcpi_segs_out;
    out->segs_in = ti.tcpi_segs_in;
    out->total_retrans = ti.tcpi_total_retrans;
    out->rtt_us = ti.tcpi_rtt;
    out->snd_cwnd = ti.tcpi_snd_cwnd;
}
