/* A page load over several origins (see page.h): one connection per origin, the further ones in threads of their
 * own once the document's first bytes arrived, each connection's milestones and each request's times kept. */
#define _GNU_SOURCE
#include "page.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http1.h"
#include "tcp.h"
#include "trace.h"

struct resource {
    char addr[INET_ADDRSTRLEN];
    char name[256];
    char path[1024];
    /* filled per sample */
    int conn;
    uint64_t sent, first, last; /* CLOCK_MONOTONIC_RAW ns; 0 = did not happen */
};

struct conn {
    const char *addr, *name;
    int res[PAGE_MAX_RESOURCES + 1]; /* its resources in the order they are asked for */
    int n;
    struct trace own, *tr; /* the document's connection uses the sample's trace */
    struct outcome own_out, *out;
    struct http1_response resp[PAGE_MAX_RESOURCES + 1];
    SSL *ssl;
    int fd, handshake_ok, local_port, threaded;
    uint64_t request_sent;
    /* its thread's wait for a CPU from its start to its last response (UINT64_MAX: the kernel does not say):
     * a milestone it took late by that much was held up in the client, not on the wire */
    uint64_t cpu_wait_ns;
    char group[64], sigalg[64];
    pthread_t thread;
};

/* res[0] is the document (--host, --servername, --path); res[1..n_res] the --resource ones */
static struct resource res[PAGE_MAX_RESOURCES + 1];
static int n_res;
static struct conn conns[PAGE_MAX_CONNS];
static int n_conns;
static struct {
    SSL_CTX *ctx;
    const struct options *o;
    uint64_t deadline;
    int64_t mono_minus_raw;
    int spawned;
} run;

const char *page_add_resource(const char *arg) {
    if (n_res >= PAGE_MAX_RESOURCES)
        return "too many resources";
    const char *c1 = strchr(arg, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c1 || !c2 || c2[1] != '/')
        return "must be ADDR,NAME,PATH (the path starting with /)";
    struct resource *r = &res[n_res + 1];
    size_t la = (size_t)(c1 - arg), ln = (size_t)(c2 - c1 - 1);
    if (la >= sizeof r->addr || ln == 0 || ln >= sizeof r->name || strlen(c2 + 1) >= sizeof r->path)
        return "ADDR, NAME or PATH too long (or NAME empty)";
    memset(r, 0, sizeof *r);
    memcpy(r->addr, arg, la);
    memcpy(r->name, c1 + 1, ln);
    strcpy(r->path, c2 + 1);
    struct in_addr tmp;
    if (inet_pton(AF_INET, r->addr, &tmp) != 1)
        return "ADDR must be an IPv4 address";
    n_res++;
    return NULL;
}

int page_resources(void) {
    return n_res;
}

static int64_t mono_minus_raw_ns(void) {
    struct timespec a, m, b;
    clock_gettime(CLOCK_MONOTONIC_RAW, &a);
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_MONOTONIC_RAW, &b);
    int64_t raw = ((int64_t)a.tv_sec * 1000000000 + a.tv_nsec + (int64_t)b.tv_sec * 1000000000 + b.tv_nsec) / 2;
    return (int64_t)m.tv_sec * 1000000000 + m.tv_nsec - raw;
}

/* Each resource to the connection of its origin (address and name), the document's first. */
static void plan(struct options *o, struct trace *tr, struct outcome *out) {
    struct resource *doc = &res[0];
    snprintf(doc->addr, sizeof doc->addr, "%s", o->host);
    snprintf(doc->name, sizeof doc->name, "%s", o->servername ? o->servername : o->host);
    snprintf(doc->path, sizeof doc->path, "%s", o->path);
    n_conns = 0;
    for (int i = 0; i <= n_res; i++) {
        struct resource *r = &res[i];
        r->sent = r->first = r->last = 0;
        int k = 0;
        while (k < n_conns && (strcmp(conns[k].addr, r->addr) || strcmp(conns[k].name, r->name)))
            k++;
        if (k == n_conns) {
            if (n_conns == PAGE_MAX_CONNS)
                k = 0; /* more origins than PAGE_MAX_CONNS: the rest share the document's connection */
            else {
                struct conn *c = &conns[n_conns++];
                memset(c, 0, sizeof *c);
                c->addr = r->addr;
                c->name = r->name;
                c->fd = -1;
                c->tr = k ? &c->own : tr;
                c->out = k ? &c->own_out : out;
                trace_reset(c->tr);
            }
        }
        r->conn = k;
        conns[k].res[conns[k].n++] = i;
    }
}

/* Drives a non-blocking SSL call's retry: 1 to call again, 0 when it failed (error in c->out). */
static int again(struct conn *c, int ret, const char *during) {
    int e = SSL_get_error(c->ssl, ret);
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (!ev) {
        ssl_failure(c->ssl, ret, c->out, during);
        return 0;
    }
    if (!wait_fd(c->fd, ev, run.deadline)) {
        set_error(c->out, "timeout", "%s did not complete within the timeout", during);
        return 0;
    }
    return 1;
}

static int conn_open(struct conn *c) {
    const struct options *o = run.o;
    struct trace *tr = c->tr;
    tr->t[PH_START] = now_ns();
    c->fd = tcp_dial(c->addr, o->port, run.deadline, c->out);
    if (c->fd < 0)
        return 0;
    tr->t[PH_TCP_CONNECTED] = now_ns();
    c->ssl = SSL_new(run.ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_msg_callback(c->ssl, trace_msg_cb);
    SSL_set_msg_callback_arg(c->ssl, tr);
    SSL_set_tlsext_host_name(c->ssl, c->name);
    if (o->cafile)
        SSL_set1_host(c->ssl, c->name);
    int r;
    while ((r = SSL_connect(c->ssl)) <= 0)
        if (!again(c, r, "TLS handshake"))
            return 0;
    tr->t[PH_HANDSHAKE_DONE] = now_ns();
    c->handshake_ok = 1;
    return 1;
}

static void *conn_main(void *arg);

/* The document's first bytes came: every further origin's connection opens now, together. */
static void spawn_others(void) {
    if (run.spawned)
        return;
    run.spawned = 1;
    for (int k = 1; k < n_conns; k++) {
        if (pthread_create(&conns[k].thread, NULL, conn_main, &conns[k]) == 0)
            conns[k].threaded = 1;
        else
            set_error(conns[k].out, "thread", "cannot start a thread for %s", conns[k].name);
    }
}

/* Requests c->res[from..to) written at once, then their responses read in order. */
static int conn_fetch(struct conn *c, int from, int to, int spawn_on_first) {
    char req[8192];
    size_t len = 0;
    for (int j = from; j < to; j++) {
        int n = snprintf(req + len, sizeof req - len, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: keep-alive\r\n\r\n",
                         res[c->res[j]].path, c->name);
        if (n < 0 || (size_t)n >= sizeof req - len) {
            set_error(c->out, "http_error", "requests for %s longer than %zu bytes", c->name, sizeof req);
            return 0;
        }
        len += (size_t)n;
    }
    int r;
    while ((r = SSL_write(c->ssl, req, (int)len)) <= 0)
        if (!again(c, r, "sending the HTTP requests"))
            return 0;
    uint64_t sent = now_ns();
    if (!c->request_sent)
        c->request_sent = sent;
    for (int j = from; j < to; j++)
        res[c->res[j]].sent = sent;
    struct http1_reader rd;
    http1_init(&rd, c->resp + from, to - from);
    char buf[1 << 14];
    while (rd.done < to - from) {
        while ((r = SSL_read(c->ssl, buf, sizeof buf)) <= 0)
            if (!again(c, r, "reading the HTTP responses"))
                return 0;
        uint64_t t = now_ns();
        int begun = rd.begun, done = rd.done;
        if (!http1_feed(&rd, buf, (size_t)r)) {
            set_error(c->out, "http_error", "%s: %s", c->name, rd.error);
            return 0;
        }
        for (int j = begun; j < rd.begun; j++)
            res[c->res[from + j]].first = t;
        for (int j = done; j < rd.done; j++)
            res[c->res[from + j]].last = t;
        if (spawn_on_first && rd.begun)
            spawn_others();
    }
    for (int j = from; j < to; j++)
        if (c->resp[j].status != 200) {
            set_error(c->out, "http_status", "HTTP status %d for https://%s%s", c->resp[j].status, c->name,
                      res[c->res[j]].path);
            return 0;
        }
    return 1;
}

/* What a connection's sample-level fields say once its requests are done. */
static void conn_finish(struct conn *c) {
    struct trace *tr = c->tr;
    for (int j = 0; j < c->n; j++) {
        struct resource *r = &res[c->res[j]];
        if (r->first && !tr->t[PH_FIRST_BYTE])
            tr->t[PH_FIRST_BYTE] = r->first;
        if (r->last) {
            tr->t[PH_LAST_BYTE] = r->last;
            tr->requests_done++;
            tr->body_bytes += c->resp[j].body;
            tr->http_status = c->resp[j].status;
        }
    }
    if (c->out->error_class)
        tr->t[PH_LAST_BYTE] = 0; /* a failed connection's last byte is not its last response's */
    if (c->fd >= 0)
        c->local_port = local_port(c->fd);
    if (c->ssl && c->handshake_ok) {
        const char *g = SSL_get0_group_name(c->ssl), *s = NULL;
        SSL_get0_peer_signature_name(c->ssl, &s);
        snprintf(c->group, sizeof c->group, "%s", g ? g : "");
        snprintf(c->sigalg, sizeof c->sigalg, "%s", s ? s : "");
    }
}

static void conn_close(struct conn *c) {
    if (c->ssl) {
        if (c->handshake_ok)
            SSL_shutdown(c->ssl); /* a polite close_notify; not waited for */
        SSL_free(c->ssl);
    }
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = NULL;
    c->fd = -1;
}

static void *conn_main(void *arg) {
    struct conn *c = arg;
    uint64_t wait0 = cpu_wait_total_ns();
    if (conn_open(c))
        conn_fetch(c, 0, c->n, 0);
    c->cpu_wait_ns = cpu_wait_since_ns(wait0);
    cpu_wait_release();
    conn_finish(c);
    return NULL;
}

void page_run_sample(SSL_CTX *ctx, struct options *o, struct trace *tr, struct outcome *out, SSL **kept) {
    plan(o, tr, out);
    run.ctx = ctx;
    run.o = o;
    run.spawned = 0;
    run.mono_minus_raw = mono_minus_raw_ns();
    struct conn *doc = &conns[0];
    uint64_t wait0 = cpu_wait_total_ns();
    run.deadline = now_ns() + (uint64_t)o->timeout_ms * 1000000u;
    int ok = conn_open(doc);
    cpu_wait_since(tr, wait0);
    if (ok) {
        tcp_counts_read(doc->fd, &tr->tcp_handshake);
        ok = conn_fetch(doc, 0, 1, 1) && (doc->n == 1 || conn_fetch(doc, 1, doc->n, 0));
    }
    doc->cpu_wait_ns = cpu_wait_since_ns(wait0);
    for (int k = 1; k < n_conns; k++)
        if (conns[k].threaded)
            pthread_join(conns[k].thread, NULL);
    conn_finish(doc);
    if (doc->fd >= 0)
        tcp_counts_read(doc->fd, &tr->tcp_end);
    tr->local_port = doc->local_port;
    if (doc->ssl)
        read_peer(doc->ssl, tr);
    for (int k = 1; k < n_conns; k++) {
        struct conn *c = &conns[k];
        if (!run.spawned && !c->out->error_class)
            set_error(c->out, "not_started", "the document failed before its page named %s", c->name);
        if (c->out->error_class && run.spawned)
            set_error(out, c->out->error_class, "%s: %s", c->name, c->out->error);
        conn_close(c);
    }
    if (kept && !out->error_class) {
        *kept = doc->ssl; /* the caller reads its group and releases it (tcp_transport.release) */
        doc->ssl = NULL;
        doc->fd = -1;
        return;
    }
    conn_close(doc);
}

/* ---- output --------------------------------------------------------------------------------- */

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void since(const char *key, uint64_t t, uint64_t start, int first) {
    printf("%s\"%s\": ", first ? "" : ", ", key);
    t && start ? (void)printf("%llu", (unsigned long long)(t - start)) : (void)printf("null");
}

/* As pqbench.endpoints.browsers.timing.critical_handshakes: the longest chain of connections each started after
 * the previous one's handshake ended, to the connection whose last byte came last. */
static int critical_handshakes(void) {
    int depth[PAGE_MAX_CONNS] = {0}, last = -1;
    /* "j before i" orders the connections by time (a DAG): n rounds of relaxation find the longest chains */
    for (int round = 0; round < n_conns; round++)
        for (int i = 0; i < n_conns; i++) {
            const uint64_t *t = conns[i].tr->t;
            if (!t[PH_HANDSHAKE_DONE])
                continue;
            int d = 1;
            for (int j = 0; j < n_conns; j++) {
                const uint64_t *u = conns[j].tr->t;
                if (j != i && u[PH_HANDSHAKE_DONE] && u[PH_HANDSHAKE_DONE] <= t[PH_START] && depth[j] + 1 > d)
                    d = depth[j] + 1;
            }
            depth[i] = d;
        }
    for (int i = 0; i < n_conns; i++)
        if (conns[i].tr->t[PH_HANDSHAKE_DONE] && (last < 0 || conns[i].tr->t[PH_LAST_BYTE] > conns[last].tr->t[PH_LAST_BYTE]))
            last = i;
    return last < 0 ? 0 : depth[last];
}

static void print_connection(const struct conn *c) {
    const uint64_t *t = c->tr->t;
    printf("{\"start_mono_ns\": %lld, \"local_port\": ", (long long)((int64_t)t[PH_START] + run.mono_minus_raw));
    c->local_port ? (void)printf("%d", c->local_port) : (void)printf("null");
    printf(", \"t_ns\": {");
    since("tcp_connected", t[PH_TCP_CONNECTED], t[PH_START], 1);
    since("client_hello_sent", t[PH_CLIENT_HELLO_SENT], t[PH_START], 0);
    since("server_hello_received", t[PH_SERVER_HELLO_RECEIVED], t[PH_START], 0);
    since("server_finished_received", t[PH_SERVER_FINISHED_RECEIVED], t[PH_START], 0);
    since("handshake_done", t[PH_HANDSHAKE_DONE], t[PH_START], 0);
    since("request_sent", c->request_sent, t[PH_START], 0);
    since("first_byte", t[PH_FIRST_BYTE], t[PH_START], 0);
    since("last_byte", t[PH_LAST_BYTE], t[PH_START], 0);
    printf("}, \"group\": ");
    c->group[0] ? json_str(c->group) : (void)printf("null");
    printf(", \"sigalg\": ");
    c->sigalg[0] ? json_str(c->sigalg) : (void)printf("null");
    printf(", \"cpu_wait_ns\": ");
    c->cpu_wait_ns == UINT64_MAX ? (void)printf("null") : (void)printf("%llu", (unsigned long long)c->cpu_wait_ns);
    printf(", \"tls\": %s, \"requests\": %d, \"error_class\": ", c->handshake_ok ? "\"TLSv1.3\"" : "null", c->n);
    c->out->error_class ? json_str(c->out->error_class) : (void)printf("null");
    printf("}");
}

void page_print(const struct options *o) {
    if (o->webpage) {
        printf(", \"webpage\": ");
        json_str(o->webpage);
    }
    uint64_t first_start = 0, last = 0;
    int handshakes = 0, opened = 0;
    for (int k = 0; k < n_conns; k++) {
        const uint64_t *t = conns[k].tr->t;
        if (!t[PH_START])
            continue;
        opened++;
        handshakes += t[PH_HANDSHAKE_DONE] != 0;
        if (!first_start || t[PH_START] < first_start)
            first_start = t[PH_START];
        if (t[PH_LAST_BYTE] > last)
            last = t[PH_LAST_BYTE];
    }
    printf(", \"mono_minus_raw_ns\": %lld, \"browser\": {\"client\": \"pqtimer\", \"http\": \"1.1\", \"requests\": %d, "
           "\"connections\": %d, \"handshakes\": %d, \"critical_handshakes\": %d, \"load_event_ms\": null, "
           "\"last_byte_ms\": ", (long long)run.mono_minus_raw, n_res + 1, opened, handshakes, critical_handshakes());
    last && first_start ? (void)printf("%.6f", (double)(last - first_start) / 1e6) : (void)printf("null");
    printf(", \"requests_detail\": [");
    int shown[PAGE_MAX_CONNS] = {0};
    for (int i = 0; i <= n_res; i++) {
        const struct resource *r = &res[i];
        const struct conn *c = &conns[r->conn];
        int j = 0;
        while (j < c->n && c->res[j] != i)
            j++;
        printf("%s{\"url\": ", i ? ", " : "");
        char url[1400];
        snprintf(url, sizeof url, "https://%s:%d%s", r->name, o->port, r->path);
        json_str(url);
        printf(", \"document\": %s, \"status\": ", i ? "false" : "true");
        c->resp[j].status ? (void)printf("%d", c->resp[j].status) : (void)printf("null");
        printf(", \"protocol\": \"http/1.1\", \"remote\": \"%s:%d\", \"bytes\": %llu, \"reused\": %s, \"t_ns\": {",
               r->addr, o->port, (unsigned long long)c->resp[j].body, shown[r->conn] ? "true" : "false");
        since("request_sent", r->sent, c->tr->t[PH_START], 1);
        since("first_byte", r->first, c->tr->t[PH_START], 0);
        since("last_byte", r->last, c->tr->t[PH_START], 0);
        printf("}");
        if (!shown[r->conn] && c->tr->t[PH_START]) {
            printf(", \"connection\": ");
            print_connection(c);
        }
        shown[r->conn] = 1;
        printf("}");
    }
    printf("]}");
}
