/* pqtimer over TCP (the default transport): a TCP connect, OpenSSL's TLS client on the socket, HTTP/1.1 for
 * the page modes, resumption and 0-RTT early data. */
#define _GNU_SOURCE
#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

int wait_fd(int fd, short events, uint64_t deadline) {
    uint64_t now = now_ns();
    if (now >= deadline)
        return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int ms = (int)((deadline - now + 999999) / 1000000);
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

int tcp_dial(const char *host, int port, uint64_t deadline, struct outcome *out) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_error(out, "socket", "socket: %s", strerror(errno));
        return -1;
    }
    /* As browsers do: without it Nagle holds the first request until the client Finished is
     * acknowledged, adding a round trip that is not TLS's. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        set_error(out, errno == ECONNREFUSED ? "connect_refused" : "connect_error", "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!wait_fd(fd, POLLOUT, deadline)) {
        set_error(out, "connect_timeout", "TCP connect did not complete within the timeout");
        close(fd);
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
        set_error(out, err == ECONNREFUSED ? "connect_refused" : "connect_error", "connect: %s", strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

void ssl_failure(SSL *ssl, int ret, struct outcome *out, const char *during) {
    int e = SSL_get_error(ssl, ret);
    long verify = SSL_get_verify_result(ssl);
    unsigned long code = ERR_peek_last_error();
    char buf[160] = "";
    if (code)
        ERR_error_string_n(code, buf, sizeof buf);
    if (verify != X509_V_OK)
        set_error(out, "cert_verify", "certificate verification failed: %s", X509_verify_cert_error_string(verify));
    /* OpenSSL 3 reports a peer gone mid-handshake (no close_notify) as an SSL error, not a syscall one */
    else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !code) ||
             (ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING))
        set_error(out, "closed", "%s: the server closed the connection%s%s", during, errno ? ": " : "",
                  errno ? strerror(errno) : "");
    else
        set_error(out, "tls_error", "%s: %s", during, buf[0] ? buf : "SSL error");
    ERR_clear_error();
}

/* Drives a non-blocking SSL call until it completes, fails or the deadline passes. */
#define SSL_LOOP(call, ssl, fd, deadline, out, during, what)                          \
    for (;;) {                                                                         \
        int r_ = (call);                                                               \
        if (r_ > 0) {                                                                  \
            what = r_;                                                                 \
            break;                                                                     \
        }                                                                              \
        int e_ = SSL_get_error(ssl, r_);                                               \
        short ev_ = e_ == SSL_ERROR_WANT_READ ? POLLIN : e_ == SSL_ERROR_WANT_WRITE ? POLLOUT : 0; \
        if (!ev_) {                                                                    \
            ssl_failure(ssl, r_, out, during);                                         \
            what = -1;                                                                 \
            break;                                                                     \
        }                                                                              \
        if (!wait_fd(fd, ev_, deadline)) {                                             \
            set_error(out, "timeout", "%s did not complete within the timeout", during); \
            what = -1;                                                                 \
            break;                                                                     \
        }                                                                              \
    }

static int http_request(struct options *o, char *req, size_t size) {
    return snprintf(req, size, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: keep-alive\r\n\r\n", o->path,
                    o->servername ? o->servername : o->host);
}

/* One HTTP/1.1 GET on the connection; records the first and last byte of the response. sent: the
 * request already went (as early data). */
static int http_get(SSL *ssl, int fd, struct options *o, struct trace *tr, uint64_t deadline, struct outcome *out,
                    int first, int sent) {
    char req[512];
    int n = http_request(o, req, sizeof req);
    int w = 0;
    if (!sent)
        SSL_LOOP(SSL_write(ssl, req, n), ssl, fd, deadline, out, "sending the HTTP request", w);
    if (w < 0)
        return 0;
    static char buf[1 << 16];
    size_t have = 0, header_end = 0;
    long long content_length = -1;
    uint64_t body = 0;
    for (;;) {
        int r = 0;
        SSL_LOOP(SSL_read(ssl, buf + have, (int)(sizeof buf - 1 - have)), ssl, fd, deadline, out,
                 "reading the HTTP response", r);
        if (r < 0)
            return 0;
        if (first && !tr->t[PH_FIRST_BYTE])
            tr->t[PH_FIRST_BYTE] = now_ns();
        if (!header_end) {
            have += (size_t)r;
            buf[have] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            if (!end) {
                if (have >= sizeof buf - 1) {
                    set_error(out, "http_error", "response headers too long");
                    return 0;
                }
                continue;
            }
            header_end = (size_t)(end - buf) + 4;
            if (sscanf(buf, "HTTP/1.%*d %d", &tr->http_status) != 1) {
                set_error(out, "http_error", "not an HTTP response");
                return 0;
            }
            char *cl = strcasestr(buf, "\r\nContent-Length:");
            if (!cl || cl > end) {
                set_error(out, "http_error", "response without Content-Length");
                return 0;
            }
            content_length = atoll(cl + 17);
            body = have - header_end;
            have = 0;
        } else {
            body += (uint64_t)r;
        }
        if (header_end && (long long)body >= content_length)
            break;
    }
    tr->body_bytes += body;
    tr->requests_done++;
    if (tr->http_status != 200) {
        set_error(out, "http_status", "HTTP status %d", tr->http_status);
        return 0;
    }
    return 1;
}

static void tcp_run_sample(SSL_CTX *ctx, struct options *o, SSL_SESSION *resume, struct trace *tr,
                           struct outcome *out, SSL **kept) {
    trace_reset(tr);
    uint64_t wait0 = cpu_wait_total_ns();
    uint64_t start = now_ns();
    uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000u;
    tr->t[PH_START] = start;
    int fd = tcp_dial(o->host, o->port, deadline, out);
    if (fd < 0) {
        cpu_wait_since(tr, wait0);
        return;
    }
    tr->t[PH_TCP_CONNECTED] = now_ns();
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_msg_callback(ssl, trace_msg_cb);
    SSL_set_msg_callback_arg(ssl, tr);
    if (o->servername) {
        SSL_set_tlsext_host_name(ssl, o->servername);
        if (o->cafile)
            SSL_set1_host(ssl, o->servername); /* checked as part of verification, enforced or recorded */
    }
    if (resume)
        SSL_set_session(ssl, resume);
    int ok = 0, early = 0;
    if (resume && o->mode == MODE_EARLY) {
        /* The ClientHello and the request (0-RTT) leave together; SSL_connect then completes the handshake. */
        char req[512];
        int n = http_request(o, req, sizeof req);
        size_t written = 0;
        SSL_LOOP(SSL_write_early_data(ssl, req, (size_t)n, &written), ssl, fd, deadline, out,
                 "sending the HTTP request as early data", ok);
        if (ok > 0 && written != (size_t)n) {
            set_error(out, "early_data", "only %zu of %d request bytes went as early data", written, n);
            ok = -1;
        }
    }
    if (ok >= 0)
        SSL_LOOP(SSL_connect(ssl), ssl, fd, deadline, out, "TLS handshake", ok);
    if (ok > 0) {
        tr->t[PH_HANDSHAKE_DONE] = now_ns();
        cpu_wait_since(tr, wait0);
        tcp_counts_read(fd, &tr->tcp_handshake);
        if (resume && !SSL_session_reused(ssl))
            set_error(out, "not_resumed", "the server did not accept the session ticket");
        /* Accepted early data carried the first request; a rejected one is sent again now (1-RTT). */
        if (o->mode == MODE_EARLY)
            tr->early_data = SSL_get_early_data_status(ssl) + 1;
        early = o->mode == MODE_EARLY && SSL_get_early_data_status(ssl) == SSL_EARLY_DATA_ACCEPTED;
        for (int i = 0; ok > 0 && !out->error_class && i < o->requests; i++)
            ok = http_get(ssl, fd, o, tr, deadline, out, i == 0, i == 0 && early);
        if (tr->requests_done && !out->error_class)
            tr->t[PH_LAST_BYTE] = now_ns();
    }
    if (ok <= 0)
        cpu_wait_since(tr, wait0);
    tcp_counts_read(fd, &tr->tcp_end);
    tr->local_port = local_port(fd);
    read_peer(ssl, tr);
    if (kept && !out->error_class) {
        *kept = ssl; /* the caller needs it a little longer (to receive a ticket) */
        return;
    }
    if (ok > 0)
        SSL_shutdown(ssl); /* a polite close_notify; not waited for */
    SSL_free(ssl);
    close(fd);
}


static void tcp_release(SSL *ssl) {
    SSL_shutdown(ssl);
    close(SSL_get_fd(ssl));
    SSL_free(ssl);
}

static void tcp_print(const struct options *o, const struct trace *tr) {
    /* After a HelloRetryRequest the Finished leads the client's third flight, not its second (what the
     * handshake modes' milestone says): the sample names it by the bytes sent before it. */
    if (tr->hrr && tr->finished_offset && (o->mode == MODE_HANDSHAKE || o->mode == MODE_RESUME))
        printf(", \"wire_milestone\": {\"dir\": \"c2s\", \"offset\": %llu, \"edge\": \"first\"}",
               (unsigned long long)tr->finished_offset);
}

static const char *tcp_refusal(const struct options *o) {
    (void)o;
    return NULL; /* every mode and option */
}

const struct transport_ops tcp_transport = {
    .name = "tcp",
    .method = TLS_client_method,
    .refusal = tcp_refusal,
    .run_sample = tcp_run_sample,
    .release = tcp_release,
    .print = tcp_print,
};
