#define _GNU_SOURCE
#include "quic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include "h3.h"

static const unsigned char alpn_h3[] = {2, 'h', '3'};

static void quic_release(SSL *conn);

static const char *quic_refusal(const struct options *o) {
    if (o->mode == MODE_RESUME || o->mode == MODE_RESUME_PAGE || o->mode == MODE_EARLY)
        return "--mode: pqtimer does not resume QUIC connections yet (modes handshake, page and requests only)";
    if (o->initial_size && o->initial_size != QUIC_OPENSSL_INITIAL_SIZE)
        return "--initial-size: OpenSSL 3.5's QUIC client cannot set the size of its Initial datagrams; it always "
               "sends 1200 bytes of UDP payload (measure other sizes with another QUIC client)";
    return NULL;
}

/* ---- waiting on the connection ------------------------------------------------------------ */

/* The connection's control stream (HTTP/3), kept open until the connection is released: closing a
 * critical stream is a connection error for the server. One connection is open at a time. */
static SSL *g_control;

struct quic_io {
    SSL *conn;
    int fd;
    uint64_t deadline;
    struct outcome *out;
};

/* Waits for a datagram, for the socket to take one if OpenSSL has some to send, for OpenSSL's next timer
 * (loss detection, ACK delay) or for the deadline, then lets OpenSSL handle what is due. 0 at the deadline. */
static int quic_wait(struct quic_io *io) {
    uint64_t now = now_ns();
    if (now >= io->deadline)
        return 0;
    uint64_t wait = io->deadline - now;
    struct timeval tv;
    int infinite = 1;
    if (SSL_get_event_timeout(io->conn, &tv, &infinite) && !infinite) {
        uint64_t t = (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
        if (t < wait)
            wait = t;
    }
    struct pollfd p = {.fd = io->fd, .events = POLLIN | (SSL_net_write_desired(io->conn) ? POLLOUT : 0)};
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u)};
    if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR)
        return 0;
    SSL_handle_events(io->conn);
    return 1;
}

/* A system error OpenSSL recorded with this errno (the socket's: an ICMP port unreachable reads back as
 * ECONNREFUSED on the connected socket). */
static int err_has_sys(int errnum) {
    unsigned long code;
    for (int k = 0; (code = ERR_peek_error_all(NULL, NULL, NULL, NULL, NULL)) != 0 && k < 64; k++) {
        if (ERR_GET_LIB(code) == ERR_LIB_SYS && ERR_GET_REASON(code) == errnum)
            return 1;
        ERR_get_error();
    }
    return 0;
}

/* Names why an operation on the connection (or one of its streams) failed. */
static void quic_failure(struct quic_io *io, SSL *obj, int ret, const char *during) {
    int e = SSL_get_error(obj, ret);
    long verify = SSL_get_verify_result(io->conn);
    unsigned long code = ERR_peek_last_error();
    char buf[160] = "";
    if (code)
        ERR_error_string_n(code, buf, sizeof buf);
    SSL_CONN_CLOSE_INFO ci;
    int closed = SSL_get_conn_close_info(io->conn, &ci, sizeof ci);
    if (verify != X509_V_OK)
        set_error(io->out, "cert_verify", "certificate verification failed: %s", X509_verify_cert_error_string(verify));
    else if (err_has_sys(ECONNREFUSED))
        set_error(io->out, "connect_refused", "%s: the server's host refused the datagram (ICMP port unreachable)",
                  during);
    else if (closed && (ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT) && ci.error_code >= 0x100 && ci.error_code < 0x200)
        set_error(io->out, "tls_error", "%s: %s TLS alert %s%s%.*s", during,
                  ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL ? "sent" : "received",
                  SSL_alert_desc_string_long((int)(ci.error_code - 0x100)), ci.reason_len ? ": " : "",
                  (int)ci.reason_len, ci.reason ? ci.reason : "");
    else if (closed && !(ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL))
        set_error(io->out, "closed", "%s: the server closed the connection (%s error 0x%llx%s%.*s)", during,
                  ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT ? "transport" : "application",
                  (unsigned long long)ci.error_code, ci.reason_len ? ": " : "", (int)ci.reason_len,
                  ci.reason ? ci.reason : "");
    else if (closed)
        set_error(io->out, "quic_error", "%s: the connection failed (transport error 0x%llx%s%.*s)%s%s", during,
                  (unsigned long long)ci.error_code, ci.reason_len ? ": " : "", (int)ci.reason_len,
                  ci.reason ? ci.reason : "", buf[0] ? ": " : "", buf);
    else if (e == SSL_ERROR_SSL && SSL_get_stream_read_state(obj) == SSL_STREAM_STATE_RESET_REMOTE)
        set_error(io->out, "http_error", "%s: the server reset the request stream", during);
    else
        set_error(io->out, "quic_error", "%s: %s", during, buf[0] ? buf : "SSL error");
    ERR_clear_error();
}

/* After an SSL call on obj returned ret without completing: 1 when it should be called again (it waited
 * for what the call needs), 0 when the sample failed (recorded). */
static int quic_again(struct quic_io *io, SSL *obj, int ret, const char *during) {
    int e = SSL_get_error(obj, ret);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        quic_failure(io, obj, ret, during);
        return 0;
    }
    if (!quic_wait(io)) {
        set_error(io->out, "timeout", "%s did not complete within the timeout", during);
        return 0;
    }
    return 1;
}

static int write_all(struct quic_io *io, SSL *stream, const unsigned char *p, size_t n, const char *during) {
    while (n) {
        size_t w = 0;
        int r = SSL_write_ex(stream, p, n, &w);
        if (r) {
            p += w;
            n -= w;
        } else if (!quic_again(io, stream, r, during))
            return 0;
    }
    return 1;
}

/* ---- HTTP/3 ------------------------------------------------------------------------------- */

static SSL *open_stream(struct quic_io *io, uint64_t flags, const char *what) {
    SSL *s = SSL_new_stream(io->conn, flags | SSL_STREAM_FLAG_NO_BLOCK);
    if (!s) {
        char buf[160] = "";
        ERR_error_string_n(ERR_peek_last_error(), buf, sizeof buf);
        set_error(io->out, "quic_error", "cannot open the %s stream: %s", what, buf[0] ? buf : "no stream credit");
        ERR_clear_error();
    }
    return s;
}

static int h3_open_control(struct quic_io *io) {
    g_control = open_stream(io, SSL_STREAM_FLAG_UNI, "HTTP/3 control");
    if (!g_control)
        return 0;
    unsigned char pre[8];
    return write_all(io, g_control, pre, h3_control_preface(pre, sizeof pre), "sending HTTP/3 SETTINGS");
}

/* One GET on its own request stream; the first and last byte of the response as over TCP. */
static int h3_get(struct quic_io *io, const struct options *o, struct trace *tr, int first) {
    unsigned char req[2048];
    size_t n = h3_get_request(req, sizeof req, o->servername ? o->servername : o->host, o->path);
    if (!n) {
        set_error(io->out, "http_error", "the request for %s does not fit in one HEADERS frame", o->path);
        return 0;
    }
    SSL *s = open_stream(io, 0, "HTTP/3 request");
    if (!s)
        return 0;
    tr->q.resp_stream = (int64_t)SSL_get_stream_id(s);
    tr->q.resp_done = 0;
    tr->q.resp_offset_valid = 0;
    int ok = write_all(io, s, req, n, "sending the HTTP/3 request");
    while (ok) {
        int r = SSL_stream_conclude(s, 0);
        if (r)
            break;
        ok = quic_again(io, s, r, "ending the HTTP/3 request");
    }
    static struct h3_response resp;
    h3_response_init(&resp);
    static unsigned char buf[1 << 16];
    while (ok) {
        size_t got = 0;
        int r = SSL_read_ex(s, buf, sizeof buf, &got);
        if (r) {
            if (first && !tr->t[PH_FIRST_BYTE])
                tr->t[PH_FIRST_BYTE] = now_ns();
            if (!h3_response_feed(&resp, buf, got)) {
                set_error(io->out, "http_error", "%s", resp.error);
                ok = 0;
            }
        } else if (SSL_get_error(s, r) == SSL_ERROR_ZERO_RETURN) {
            break; /* the stream's end: the response is complete */
        } else {
            ok = quic_again(io, s, r, "reading the HTTP/3 response");
        }
    }
    tr->q.resp_done = 1;
    SSL_free(s);
    if (!ok)
        return 0;
    if (!h3_response_complete(&resp)) {
        set_error(io->out, "http_error", "the response stream ended %s",
                  resp.status ? "inside a frame" : "without a response");
        return 0;
    }
    tr->http_status = resp.status;
    tr->body_bytes += resp.body;
    tr->requests_done++;
    if (resp.status != 200) {
        set_error(io->out, "http_status", "HTTP status %d", resp.status);
        return 0;
    }
    return 1;
}

/* ---- one sample ----------------------------------------------------------------------------- */

static int udp_socket(const struct options *o, struct outcome *out) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    inet_pton(AF_INET, o->host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_error(out, "socket", "socket: %s", strerror(errno));
        return -1;
    }
    /* Connected: the kernel picks the local port now, and an ICMP port unreachable comes back as an error.
     * No UDP_SEGMENT (GSO): OpenSSL sends each datagram on its own (sendmmsg), one packet each. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        set_error(out, "connect_error", "connect (UDP): %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static SSL *new_connection(SSL_CTX *ctx, const struct options *o, int fd, struct trace *tr, struct outcome *out) {
    SSL *conn = SSL_new(ctx);
    BIO *bio = conn ? BIO_new_dgram(fd, BIO_NOCLOSE) : NULL;
    BIO_ADDR *peer = BIO_ADDR_new();
    struct in_addr ip;
    inet_pton(AF_INET, o->host, &ip);
    int ok = conn && bio && peer && BIO_ADDR_rawmake(peer, AF_INET, &ip, sizeof ip, htons((uint16_t)o->port)) &&
             SSL_set_blocking_mode(conn, 0) && SSL_set_default_stream_mode(conn, SSL_DEFAULT_STREAM_MODE_NONE) &&
             /* the server's control and QPACK streams are accepted and left unread */
             SSL_set_incoming_stream_policy(conn, SSL_INCOMING_STREAM_POLICY_ACCEPT, 0) &&
             SSL_set_alpn_protos(conn, alpn_h3, sizeof alpn_h3) == 0;
    if (ok) {
        SSL_set_bio(conn, bio, bio); /* the connection owns the BIO now */
        bio = NULL;
        ok = SSL_set1_initial_peer_addr(conn, peer);
    }
    BIO_ADDR_free(peer);
    BIO_free(bio);
    if (!ok) {
        char buf[160] = "";
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        set_error(out, "quic_error", "cannot set up the QUIC connection: %s", buf);
        SSL_free(conn);
        return NULL;
    }
    SSL_set_msg_callback(conn, trace_msg_cb);
    SSL_set_msg_callback_arg(conn, tr);
    if (o->servername) {
        SSL_set_tlsext_host_name(conn, o->servername);
        if (o->cafile)
            SSL_set1_host(conn, o->servername);
    }
    return conn;
}

/* Like the TCP path's: a failure is recorded in out, never retried. No resumption here (refused). */
static void quic_run_sample(SSL_CTX *ctx, struct options *o, SSL_SESSION *resume, struct trace *tr,
                            struct outcome *out, SSL **kept) {
    (void)resume;
    trace_reset(tr);
    tr->quic = 1;
    uint64_t wait0 = cpu_wait_total_ns();
    uint64_t start = now_ns();
    tr->t[PH_START] = start;
    struct quic_io io = {.deadline = start + (uint64_t)o->timeout_ms * 1000000u, .out = out};
    io.fd = udp_socket(o, out);
    if (io.fd < 0) {
        cpu_wait_since(tr, wait0);
        return;
    }
    io.conn = new_connection(ctx, o, io.fd, tr, out);
    int ok = io.conn != NULL;
    while (ok) {
        int r = SSL_connect(io.conn);
        if (r == 1)
            break;
        ok = quic_again(&io, io.conn, r, "QUIC handshake");
    }
    if (ok) {
        if (!tr->t[PH_HANDSHAKE_DONE]) /* the Finished's datagram was not told apart: the handshake's end */
            tr->t[PH_HANDSHAKE_DONE] = now_ns();
        cpu_wait_since(tr, wait0);
        if (o->requests > 0)
            ok = h3_open_control(&io);
        for (int i = 0; ok && i < o->requests; i++)
            ok = h3_get(&io, o, tr, i == 0);
        if (ok && tr->requests_done)
            tr->t[PH_LAST_BYTE] = now_ns();
    } else {
        cpu_wait_since(tr, wait0);
    }
    tr->local_port = local_port(io.fd);
    if (io.conn)
        read_peer(io.conn, tr);
    if (kept && io.conn && !out->error_class) {
        *kept = io.conn; /* the caller reads the negotiated group and signature, then releases it */
        return;
    }
    if (io.conn)
        quic_release(io.conn);
    else
        close(io.fd);
}

/* An immediate CONNECTION_CLOSE, then frees the connection. */
static void quic_release(SSL *conn) {
    int fd = -1;
    BIO *bio = SSL_get_rbio(conn);
    if (bio)
        BIO_get_fd(bio, &fd);
    /* a CONNECTION_CLOSE now, not waited for: the server frees its state, we do not linger */
    SSL_shutdown_ex(conn, SSL_SHUTDOWN_FLAG_RAPID | SSL_SHUTDOWN_FLAG_NO_BLOCK, NULL, 0);
    SSL_handle_events(conn);
    SSL_free(g_control);
    g_control = NULL;
    SSL_free(conn);
    ERR_clear_error();
    if (fd >= 0)
        close(fd);
}

/* ---- output ------------------------------------------------------------------------------- */

static void print_kinds(const uint8_t *kinds, unsigned n) {
    static const char names[] = "I0HR1V?"; /* QUIC_KIND_* bits in order */
    putchar('[');
    for (unsigned i = 0; i < n; i++) {
        printf("%s\"", i ? ", " : "");
        int first = 1;
        for (int b = 0; b < 7; b++)
            if (kinds[i] & (1u << b)) {
                printf("%s%c", first ? "" : "+", names[b]);
                first = 0;
            }
        putchar('"');
    }
    putchar(']');
}

/* The sample's QUIC fields: `, "transport": "quic", "quic": {…}, "wire_milestone": …`. */
static void quic_print(const struct options *o, const struct trace *tr) {
    const struct quic_counts *q = &tr->q;
    printf(", \"transport\": \"quic\", \"quic\": {\"datagrams_sent\": %u, \"datagrams_received\": %u, "
           "\"bytes_sent\": %llu, \"bytes_received\": %llu, \"initial_size\": ",
           q->datagrams_sent, q->datagrams_received, (unsigned long long)q->bytes_sent,
           (unsigned long long)q->bytes_received);
    q->datagrams_sent ? (void)printf("%u", q->initial_size) : (void)printf("null");
    printf(", \"retry\": %s, \"version\": ", q->retry ? "true" : "false");
    /* as quicgo prints it: 0x00000001 is RFC 9000's */
    q->version ? (void)printf("\"0x%08x\"", q->version) : (void)printf("null");
    /* OpenSSL sends each datagram on its own (no UDP_SEGMENT anywhere in it): never segmentation offload */
    printf(", \"gso\": false, \"sent_kinds\": ");
    print_kinds(q->sent_kinds, q->sent_kinds_n);
    printf(", \"received_kinds\": ");
    print_kinds(q->received_kinds, q->received_kinds_n);
    printf("}");
    /* Where the sample's time ends on the wire: the datagram that carried the client's Finished, or the one
     * that completed the (last) response, by the payload bytes that went that way before it. */
    if (o->requests > 0 && tr->requests_done && q->resp_offset_valid)
        printf(", \"wire_milestone\": {\"dir\": \"s2c\", \"offset\": %llu, \"edge\": \"first\"}",
               (unsigned long long)q->resp_offset);
    else if (o->requests == 0 && q->finished_sent)
        printf(", \"wire_milestone\": {\"dir\": \"c2s\", \"offset\": %llu, \"edge\": \"first\"}",
               (unsigned long long)q->finished_offset);
}

const struct transport_ops quic_transport = {
    .name = "quic",
    .method = OSSL_QUIC_client_method,
    .refusal = quic_refusal,
    .run_sample = quic_run_sample,
    .release = quic_release,
    .print = quic_print,
};
