/*
 * test_quic_server: a tiny HTTP/3 server on OpenSSL 3.5's QUIC server API, for pqtimer's QUIC tests only
 * (tests/test_pqtimer_quic.py). One UDP socket, non-blocking, any number of connections; every request is
 * answered with 200 and --body zero bytes (a path of "/404": 404, no body). It opens its own HTTP/3
 * control stream (SETTINGS) as a real server does, and ignores the client's.
 *
 *   test_quic_server --host ADDR --port N --cert CHAIN.pem --key KEY.pem [--groups G1:G2]
 *                    [--retry on|off] [--body BYTES]
 *
 * Prints "ready" once it listens. Exit 2 bad options, 3 setup failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define MAX_CONNS 256
#define MAX_STREAMS 16

struct stream {
    SSL *s;
    int uni;                /* the client's own unidirectional stream (control, QPACK): read and ignored */
    int request_done;       /* the client ended the request */
    unsigned char head[64]; /* the response's HEADERS frame and DATA frame header */
    size_t head_n, sent;    /* bytes of head + body written */
    uint64_t body;          /* body bytes to send */
    char request[4096];
    size_t request_n;
};

struct conn {
    SSL *c;
    int ready; /* handshake done, control stream opened */
    SSL *control;
    struct stream st[MAX_STREAMS];
};

static struct conn conns[MAX_CONNS];
static uint64_t g_body = 1024;

static void die(const char *what) {
    fprintf(stderr, "test_quic_server: %s: ", what);
    ERR_print_errors_fp(stderr);
    fputc('\n', stderr);
    exit(3);
}

static size_t varint(unsigned char *out, uint64_t v) {
    size_t n = v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
    for (size_t i = 0; i < n; i++)
        out[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    out[0] |= (unsigned char)((n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3) << 6);
    return n;
}

static int select_h3(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                     unsigned int inlen, void *arg) {
    static const unsigned char h3[] = {2, 'h', '3'};
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, h3, sizeof h3, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The request's path from its HEADERS frame, as pqtimer encodes it: only to tell "/404" apart. */
static int asks_404(const struct stream *s) {
    static const char needle[] = "/404";
    return memmem(s->request, s->request_n, needle, sizeof needle - 1) != NULL;
}

static void prepare_response(struct stream *s) {
    int missing = asks_404(s);
    s->body = missing ? 0 : g_body;
    unsigned char *p = s->head;
    /* HEADERS: QPACK prefix (no dynamic table), then :status as a static-table entry (25: 200, 27: 404) */
    *p++ = 0x01;
    *p++ = 3;
    *p++ = 0;
    *p++ = 0;
    *p++ = 0xC0 | (missing ? 27 : 25);
    if (s->body) {
        *p++ = 0x00; /* DATA */
        p += varint(p, s->body);
    }
    s->head_n = (size_t)(p - s->head);
    s->sent = 0;
}

/* Pushes what the response still has to send; 1 once all went and the stream is ended. */
static int send_response(struct stream *s) {
    static unsigned char zeros[16384];
    uint64_t total = s->head_n + s->body;
    while (s->sent < total) {
        const unsigned char *p;
        size_t n;
        if (s->sent < s->head_n) {
            p = s->head + s->sent;
            n = s->head_n - s->sent;
        } else {
            p = zeros;
            uint64_t left = total - s->sent;
            n = left < sizeof zeros ? (size_t)left : sizeof zeros;
        }
        size_t w = 0;
        if (!SSL_write_ex(s->s, p, n, &w))
            return 0;
        s->sent += w;
    }
    return SSL_stream_conclude(s->s, 0);
}

static void serve_stream(struct stream *s) {
    for (;;) {
        char buf[4096];
        size_t got = 0;
        if (SSL_read_ex(s->s, buf, sizeof buf, &got)) {
            if (!s->uni && s->request_n + got <= sizeof s->request) {
                memcpy(s->request + s->request_n, buf, got);
                s->request_n += got;
            }
            continue;
        }
        if (SSL_get_error(s->s, 0) == SSL_ERROR_ZERO_RETURN && !s->uni && !s->request_done) {
            s->request_done = 1;
            prepare_response(s);
        }
        break;
    }
    ERR_clear_error();
    if (s->request_done && s->sent <= s->head_n + s->body && send_response(s)) {
        SSL_free(s->s); /* all sent and ended: OpenSSL keeps the stream until the client has it */
        memset(s, 0, sizeof *s);
    }
    ERR_clear_error();
}

static void serve_conn(struct conn *c) {
    if (!c->ready) {
        int r = SSL_do_handshake(c->c);
        if (r != 1) {
            ERR_clear_error();
            return;
        }
        c->control = SSL_new_stream(c->c, SSL_STREAM_FLAG_UNI | SSL_STREAM_FLAG_NO_BLOCK);
        static const unsigned char settings[] = {0x00 /* control stream */, 0x04, 0x00 /* empty SETTINGS */};
        size_t w;
        if (c->control)
            SSL_write_ex(c->control, settings, sizeof settings, &w);
        c->ready = 1;
    }
    SSL *in;
    while ((in = SSL_accept_stream(c->c, SSL_ACCEPT_STREAM_NO_BLOCK)) != NULL) {
        struct stream *slot = NULL;
        for (int k = 0; k < MAX_STREAMS && !slot; k++)
            if (!c->st[k].s)
                slot = &c->st[k];
        if (!slot) {
            SSL_free(in);
            continue;
        }
        memset(slot, 0, sizeof *slot);
        slot->s = in;
        slot->uni = SSL_get_stream_type(in) == SSL_STREAM_TYPE_READ;
    }
    for (int k = 0; k < MAX_STREAMS; k++)
        if (c->st[k].s)
            serve_stream(&c->st[k]);
    ERR_clear_error();
}

static void drop_conn(struct conn *c) {
    for (int k = 0; k < MAX_STREAMS; k++)
        SSL_free(c->st[k].s);
    SSL_free(c->control);
    SSL_free(c->c);
    memset(c, 0, sizeof *c);
}

static void usage(const char *field, const char *msg) {
    fprintf(stderr, "test_quic_server: %s: %s\n", field, msg);
    exit(2);
}

int main(int argc, char **argv) {
    const char *host = NULL, *cert = NULL, *key = NULL, *groups = NULL;
    int port = 0, retry = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--cert")) cert = v;
        else if (!strcmp(a, "--key")) key = v;
        else if (!strcmp(a, "--groups")) groups = v;
        else if (!strcmp(a, "--body")) g_body = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--retry")) retry = !strcmp(v, "on");
        else usage(a, "unknown option");
    }
    if (!host || port <= 0 || port > 65535 || !cert || !key)
        usage("--host, --port, --cert, --key", "required");

    SSL_CTX *ctx = SSL_CTX_new(OSSL_QUIC_server_method());
    if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) <= 0 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) <= 0)
        die("certificate");
    if (groups && !SSL_CTX_set1_groups_list(ctx, groups))
        die("--groups");
    SSL_CTX_set_alpn_select_cb(ctx, select_h3, NULL);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        usage("--host", "must be an IPv4 address");
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "test_quic_server: bind: %s\n", strerror(errno));
        return 3;
    }
    SSL *listener = SSL_new_listener(ctx, retry ? 0 : SSL_LISTENER_FLAG_NO_VALIDATE);
    BIO *bio = BIO_new_dgram(fd, BIO_CLOSE);
    if (!listener || !bio)
        die("listener");
    SSL_set_bio(listener, bio, bio);
    if (!SSL_set_blocking_mode(listener, 0) || !SSL_listen(listener))
        die("listen");
    printf("ready\n");
    fflush(stdout);

    for (;;) {
        SSL *c;
        while ((c = SSL_accept_connection(listener, SSL_ACCEPT_CONNECTION_NO_BLOCK)) != NULL) {
            struct conn *slot = NULL;
            for (int k = 0; k < MAX_CONNS && !slot; k++)
                if (!conns[k].c)
                    slot = &conns[k];
            if (!slot || !SSL_set_blocking_mode(c, 0) ||
                !SSL_set_default_stream_mode(c, SSL_DEFAULT_STREAM_MODE_NONE) ||
                !SSL_set_incoming_stream_policy(c, SSL_INCOMING_STREAM_POLICY_ACCEPT, 0)) {
                SSL_free(c);
                continue;
            }
            slot->c = c;
        }
        for (int k = 0; k < MAX_CONNS; k++) {
            if (!conns[k].c)
                continue;
            SSL_CONN_CLOSE_INFO ci;
            if (SSL_get_conn_close_info(conns[k].c, &ci, sizeof ci))
                drop_conn(&conns[k]); /* closed by the client or by an error: nothing more to serve */
            else
                serve_conn(&conns[k]);
        }
        ERR_clear_error();
        struct timeval tv;
        int infinite = 1;
        int ms = 100;
        if (SSL_get_event_timeout(listener, &tv, &infinite) && !infinite) {
            long t = tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
            ms = t < ms ? (int)t : ms;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN | (SSL_net_write_desired(listener) ? POLLOUT : 0)};
        poll(&p, 1, ms);
        SSL_handle_events(listener);
    }
}
