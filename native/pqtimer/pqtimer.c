/*
 * pqtimer: a TLS 1.3 timing client. Each sample takes a CLOCK_MONOTONIC_RAW timestamp before the
 * TCP connect and records the phases of the connection (see trace.h); one JSON object per sample
 * on stdout. A failed or timed-out sample is printed as a failure with its error class — never
 * dropped, never retried.
 *
 *   pqtimer --host ADDR --port N [--mode handshake|page|requests|resume|resume_page|early] [--path /1k]
 *           [--requests N] [--groups G1:G2] [--sigalgs S1:S2] [--cafile F] [--servername NAME]
 *           [--count N] [--warmup N] [--timeout-ms T] [--pad N] [--worker K] [--claim FILE] [--pause-ms MS]
 *           [--verify enforce|record] [--cert-compression none|zlib|brotli|zstd|all|ALG,ALG...]
 *           [--cert CHAIN.pem --key KEY.pem]
 *           [--transport tcp|quic] [--initial-size 1200] [--resource ADDR,NAME,PATH ...] [--webpage NAME]
 *   pqtimer --clock-info     resolution and cost of the clock and of the message callback (JSON)
 *
 * --claim FILE: workers share the samples of a cell instead of each taking --count of its own.
 * FILE holds a 64-bit counter (native byte order); each sample first claims the next index from
 * it and the worker stops once the index reaches --count, so all workers finish within one
 * handshake of each other and more can join while the cell runs.
 *
 * --verify record: with --cafile, check the chain and --servername as enforce (the default) does but
 * let the handshake go on; each sample says what verification found ("verify"). Without --cafile
 * nothing is enforced and the result (usually an unknown issuer) is recorded all the same.
 *
 * --groups is OpenSSL 3.5's groups list: every group is listed in supported_groups in this order, and
 * those marked with a leading `*` carry a key share ("*X25519MLKEM768:*X25519": two shares;
 * "*X25519:X25519MLKEM768": a share for X25519 only). Without any `*`, the first group alone has one.
 * Each sample records its ClientHellos (two after a HelloRetryRequest) with their sizes and key shares.
 *
 * Modes: handshake (the handshake only), page (handshake, then GET --path; with --resource ADDR,NAME,PATH, once
 * or more, a web page whose document is --path and whose further resources come from their own origins, one
 * connection per origin: page.h; --webpage NAME labels it), requests (--requests GETs),
 * resume (a resumed handshake with a ticket from an unrecorded first connection), resume_page (a resumed
 * handshake, then GET --path), early (a resumed handshake whose GET --path goes as 0-RTT early data;
 * "early_data" says whether the server accepted it, and a rejected request is sent again after the
 * handshake, as a browser does).
 *
 * --cert-compression: the algorithms offered for the server's certificate (RFC 8879), in preference
 * order; none (the default) sends no compress_certificate extension.
 *
 * --cert, --key: mutual TLS; the client's certificate (then its chain) and key, sent when the server asks. The
 * client signs its CertificateVerify between the server's Finished and its own, so that signing is in the
 * handshake's last phase. It sends its certificate compressed only with --cert-compression, compressed once
 * before the first sample (as servers do theirs), never at each handshake.
 *
 * --transport quic: the same TLS 1.3 handshake inside QUIC (OpenSSL's QUIC client, ALPN h3) on a UDP
 * socket; page modes fetch over HTTP/3. Modes resume, resume_page and early are refused (exit 3),
 * and so is an --initial-size other than 1200: OpenSSL 3.5's client cannot change it.
 *
 * Exit: 0 every sample succeeded, 1 some failed, 2 bad options, 3 setup impossible.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "page.h"
#include "quic.h"
#include "sample.h"
#include "tcp.h"
#include "trace.h"

#define PAD_EXTENSION_TYPE 0x1A1A /* a GREASE value: servers must ignore it (RFC 8701) */
#define MAX_PAD 60000

static const char *const mode_names[MODE_COUNT] = {"handshake", "page", "requests", "resume", "resume_page", "early"};
/* Certificate compression algorithms by their RFC 8879 code points (1 zlib, 2 brotli, 3 zstd). */
static const char *const comp_names[] = {NULL, "zlib", "brotli", "zstd"};

/* Each transport's half of a sample (tcp.c, quic.c), by --transport. */
static const struct transport_ops *const transports[TRANSPORT_COUNT] = {[TRANSPORT_TCP] = &tcp_transport,
                                                                        [TRANSPORT_QUIC] = &quic_transport};

static int resumes(const struct options *o) {
    return o->mode == MODE_RESUME || o->mode == MODE_RESUME_PAGE || o->mode == MODE_EARLY;
}

static void bad_usage(const char *msg, const char *field) {
    fprintf(stderr, "pqtimer: %s: %s\n", field, msg);
    exit(2);
}

static int parse_int(const char *s, const char *field, int lo, int hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%s' is not a whole number in %d..%d", s, lo, hi);
        bad_usage(msg, field);
    }
    return (int)v;
}

static void parse_cert_compression(const char *v, struct options *o) {
    o->cert_comp_n = 0;
    if (!strcmp(v, "none"))
        return;
    if (!strcmp(v, "all"))
        v = "zlib,brotli,zstd";
    char buf[64];
    if (strlen(v) >= sizeof buf)
        bad_usage("allowed: none, all, or a comma-separated list of zlib, brotli, zstd", "--cert-compression");
    strcpy(buf, v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int alg = 0;
        for (int a = 1; a <= COMP_ALGS; a++)
            if (!strcmp(tok, comp_names[a]))
                alg = a;
        for (int k = 0; k < o->cert_comp_n; k++)
            if (o->cert_comp[k] == alg)
                alg = 0; /* listed twice */
        if (!alg || o->cert_comp_n == COMP_ALGS)
            bad_usage("allowed: none, all, or a comma-separated list of zlib, brotli, zstd (each once)",
                      "--cert-compression");
        o->cert_comp[o->cert_comp_n++] = alg;
    }
    if (!o->cert_comp_n)
        bad_usage("allowed: none, all, or a comma-separated list of zlib, brotli, zstd", "--cert-compression");
}

static void parse_options(int argc, char **argv, struct options *o) {
    *o = (struct options){.path = "/", .requests = 1, .count = 1, .timeout_ms = 10000, .mode = MODE_HANDSHAKE};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            bad_usage("missing value", a);
        i++;
        if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--port")) o->port = parse_int(v, a, 1, 65535);
        else if (!strcmp(a, "--path")) o->path = v;
        else if (!strcmp(a, "--requests")) o->requests = parse_int(v, a, 1, 100000);
        else if (!strcmp(a, "--groups")) o->groups = v;
        else if (!strcmp(a, "--sigalgs")) o->sigalgs = v;
        else if (!strcmp(a, "--cafile")) o->cafile = v;
        else if (!strcmp(a, "--cert")) o->cert = v;
        else if (!strcmp(a, "--key")) o->key = v;
        else if (!strcmp(a, "--servername")) o->servername = v;
        else if (!strcmp(a, "--count")) o->count = parse_int(v, a, 1, 100000000);
        else if (!strcmp(a, "--warmup")) o->warmup = parse_int(v, a, 0, 1000000);
        else if (!strcmp(a, "--pause-ms")) o->pause_ms = parse_int(v, a, 0, 3600000);
        else if (!strcmp(a, "--timeout-ms")) o->timeout_ms = parse_int(v, a, 1, 3600000);
        else if (!strcmp(a, "--pad")) o->pad = parse_int(v, a, 0, MAX_PAD);
        else if (!strcmp(a, "--worker")) o->worker = parse_int(v, a, 0, INT_MAX);
        else if (!strcmp(a, "--claim")) o->claim = v;
        else if (!strcmp(a, "--webpage")) o->webpage = v;
        else if (!strcmp(a, "--resource")) {
            const char *why = page_add_resource(v);
            if (why)
                bad_usage(why, a);
        }
        else if (!strcmp(a, "--cert-compression")) parse_cert_compression(v, o);
        else if (!strcmp(a, "--initial-size")) o->initial_size = parse_int(v, a, 1200, 1472);
        else if (!strcmp(a, "--transport")) {
            int found = 0;
            for (int t = 0; t < TRANSPORT_COUNT; t++)
                if (!strcmp(v, transports[t]->name)) {
                    o->transport = (enum transport)t;
                    found = 1;
                }
            if (!found)
                bad_usage("allowed: tcp, quic", a);
        }
        else if (!strcmp(a, "--verify")) {
            if (strcmp(v, "enforce") && strcmp(v, "record"))
                bad_usage("allowed: enforce, record", a);
            o->verify_record = !strcmp(v, "record");
        }
        else if (!strcmp(a, "--mode")) {
            int found = 0;
            for (int m = 0; m < MODE_COUNT; m++)
                if (!strcmp(v, mode_names[m])) {
                    o->mode = (enum mode)m;
                    found = 1;
                }
            if (!found)
                bad_usage("allowed: handshake, page, requests, resume, resume_page, early", a);
        } else
            bad_usage("unknown option", a);
    }
    if (!o->host)
        bad_usage("required", "--host");
    if (!o->port)
        bad_usage("required", "--port");
    struct in_addr tmp;
    if (inet_pton(AF_INET, o->host, &tmp) != 1)
        bad_usage("must be an IPv4 address", "--host");
    if (o->initial_size && o->transport != TRANSPORT_QUIC)
        bad_usage("only with --transport quic", "--initial-size");
    if (page_resources() && o->mode != MODE_PAGE)
        bad_usage("only with --mode page (a page's further resources)", "--resource");
    if (o->mode != MODE_REQUESTS)
        o->requests = o->mode == MODE_PAGE || o->mode == MODE_RESUME_PAGE || o->mode == MODE_EARLY ? 1 : 0;
}

/* ---- the ClientHello padding extension ---------------------------------------------------- */

static int pad_add(SSL *s, unsigned int ext_type, unsigned int context, const unsigned char **out,
                   size_t *outlen, X509 *x, size_t chainidx, int *al, void *arg) {
    static unsigned char zeros[MAX_PAD];
    *out = zeros;
    *outlen = (size_t)*(int *)arg;
    return 1;
}

/* ---- resumption: keep the first ticket the server sends ------------------------------------ */

static SSL_SESSION *g_ticket;

static int keep_session(SSL *ssl, SSL_SESSION *sess) {
    if (g_ticket)
        return 0;
    g_ticket = sess;
    return 1; /* we keep the reference */
}

static SSL_CTX *make_ctx(struct options *o) {
    SSL_CTX *ctx = SSL_CTX_new(transports[o->transport]->method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION))
        return NULL;
    if (o->groups && !SSL_CTX_set1_groups_list(ctx, o->groups))
        bad_usage("no group in the list is available in this OpenSSL (see `pqbench algorithms`)", "--groups");
    if (o->sigalgs && !SSL_CTX_set1_sigalgs_list(ctx, o->sigalgs))
        bad_usage("no signature algorithm in the list is available here", "--sigalgs");
    if (o->cafile) {
        if (!SSL_CTX_load_verify_locations(ctx, o->cafile, NULL))
            bad_usage("cannot load CA certificates from this file", "--cafile");
        SSL_CTX_set_verify(ctx, o->verify_record ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    }
    if (!o->cert != !o->key)
        bad_usage("--cert and --key go together", o->cert ? "--key" : "--cert");
    if (o->cert && !SSL_CTX_use_certificate_chain_file(ctx, o->cert))
        bad_usage("cannot load a certificate chain from this file", "--cert");
    if (o->key && (!SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) || !SSL_CTX_check_private_key(ctx)))
        bad_usage("cannot load this key, or it is not the certificate's", "--key");
    if (o->pad && !SSL_CTX_add_custom_ext(ctx, PAD_EXTENSION_TYPE, SSL_EXT_CLIENT_HELLO, pad_add, NULL,
                                          &o->pad, NULL, NULL))
        return NULL;
    if (resumes(o)) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, keep_session);
    }
    if (!o->cert_comp_n) {
        /* OpenSSL >= 3.2 built with zlib/brotli/zstd offers them all by default: not unless asked. Nor does
         * a mutual-TLS client compress its own certificate (a server's CertificateRequest says it can take
         * one compressed, and OpenSSL would brotli it at every handshake: 10 ms for an ML-DSA-44 one) */
        SSL_CTX_set_options(ctx, SSL_OP_NO_RX_CERTIFICATE_COMPRESSION | SSL_OP_NO_TX_CERTIFICATE_COMPRESSION);
    } else if (!SSL_CTX_set1_cert_comp_preference(ctx, o->cert_comp, (size_t)o->cert_comp_n)) {
        bad_usage("this OpenSSL was built without these compression algorithms", "--cert-compression");
    } else {
        /* set1_cert_comp_preference ignores the algorithms the library lacks if any other is there:
         * each must be */
        for (int k = 0; k < o->cert_comp_n; k++) {
            SSL *probe = SSL_new(ctx);
            int one[1] = {o->cert_comp[k]};
            int ok = probe && SSL_set1_cert_comp_preference(probe, one, 1); /* 0: not in this build */
            SSL_free(probe);
            if (!ok) {
                char msg[96];
                snprintf(msg, sizeof msg, "this OpenSSL was built without %s", comp_names[o->cert_comp[k]]);
                bad_usage(msg, "--cert-compression");
            }
        }
        /* once, with each algorithm asked for; a certificate that does not shrink (an ML-DSA key and signature
         * hardly do) is sent as it is, not compressed again at every handshake */
        if (o->cert && !SSL_CTX_compress_certs(ctx, 0))
            SSL_CTX_set_options(ctx, SSL_OP_NO_TX_CERTIFICATE_COMPRESSION);
    }
    return ctx;
}

/* ---- output -------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static const char *msg_type_name(int t) {
    switch (t) {
    case SSL3_MT_CLIENT_HELLO: return "client_hello";
    case SSL3_MT_SERVER_HELLO: return "server_hello";
    case SSL3_MT_NEWSESSION_TICKET: return "new_session_ticket";
    case SSL3_MT_ENCRYPTED_EXTENSIONS: return "encrypted_extensions";
    case SSL3_MT_CERTIFICATE: return "certificate";
    case SSL3_MT_CERTIFICATE_REQUEST: return "certificate_request";
    case SSL3_MT_CERTIFICATE_VERIFY: return "certificate_verify";
    case SSL3_MT_FINISHED: return "finished";
    case SSL3_MT_KEY_UPDATE: return "key_update";
    case SSL3_MT_COMPRESSED_CERTIFICATE: return "compressed_certificate";
    default: return NULL;
    }
}

static void print_msgs(const uint32_t *bytes, const uint32_t *count) {
    int first = 1;
    putchar('{');
    for (int t = 0; t < TRACE_MSG_TYPES; t++) {
        if (!count[t])
            continue;
        const char *name = msg_type_name(t);
        if (name)
            printf("%s\"%s\": %u", first ? "" : ", ", name, bytes[t]);
        else
            printf("%s\"type_%d\": %u", first ? "" : ", ", t, bytes[t]);
        first = 0;
    }
    putchar('}');
}

static void print_tcp(const struct tcp_counts *c) {
    if (!c->valid) {
        printf("null");
        return;
    }
    printf("{\"bytes_sent\": %llu, \"bytes_received\": %llu, \"segs_out\": %u, \"segs_in\": %u, "
           "\"retransmits\": %u, \"rtt_us\": %u, \"cwnd\": %u}",
           (unsigned long long)c->bytes_sent, (unsigned long long)c->bytes_received, c->segs_out, c->segs_in,
           c->total_retrans, c->rtt_us, c->snd_cwnd);
}

/* A TLS group code point by OpenSSL's name for it (ours and pqprov's), or its number. */
static void print_group(SSL *names, unsigned id) {
    const char *name = names ? SSL_group_to_name(names, (int)(TLSEXT_nid_unknown | id)) : NULL;
    name ? json_string(stdout, name) : (void)printf("\"0x%04x\"", id);
}

static void print_handshake_shape(SSL *names, struct trace *tr) {
    printf(", \"client_hellos\": [");
    for (int h = 0; h < tr->hellos && h < TRACE_MAX_HELLOS; h++) {
        printf("%s{\"bytes\": %u, \"key_shares\": [", h ? ", " : "", tr->hello_bytes[h]);
        for (int k = 0; k < tr->hello_shares[h]; k++) {
            printf("%s{\"group\": ", k ? ", " : "");
            print_group(names, tr->share_group[h][k]);
            printf(", \"bytes\": %u}", tr->share_bytes[h][k]);
        }
        printf("]}");
    }
    printf("], \"hrr_received_ns\": ");
    tr->t_hrr ? (void)printf("%llu", (unsigned long long)(tr->t_hrr - tr->t[PH_START])) : (void)printf("null");
    printf(", \"cert_compression\": ");
    if (tr->cert_comp_alg) {
        printf("{\"algorithm\": ");
        tr->cert_comp_alg <= COMP_ALGS ? json_string(stdout, comp_names[tr->cert_comp_alg])
                                       : (void)printf("%d", tr->cert_comp_alg);
        /* the Certificate message it replaced, header included, like msg_bytes_received.certificate */
        printf(", \"compressed_bytes\": %u, \"certificate_bytes\": %u}",
               tr->recv_bytes[SSL3_MT_COMPRESSED_CERTIFICATE], tr->cert_comp_uncompressed + 4);
    } else {
        printf("null");
    }
    static const char *const early[] = {"not_sent", "rejected", "accepted"};
    printf(", \"early_data\": ");
    tr->early_data >= 1 && tr->early_data <= 3 ? json_string(stdout, early[tr->early_data - 1]) : (void)printf("null");
}

static void print_sample(struct options *o, int index, struct trace *tr, struct outcome *out,
                         const char *group, const char *sigalg, int resumed, SSL *names) {
    printf("{\"worker\": %d, \"i\": %d, \"mode\": \"%s\", \"ok\": %s, ", o->worker, index, mode_names[o->mode],
           out->error_class ? "false" : "true");
    printf("\"error_class\": ");
    if (out->error_class) {
        json_string(stdout, out->error_class);
        printf(", \"error\": ");
        json_string(stdout, out->error);
    } else {
        printf("null, \"error\": null");
    }
    printf(", \"t_ns\": {");
    for (int p = 0; p < PH_COUNT; p++) {
        printf("%s\"%s\": ", p ? ", " : "", phase_names[p]);
        if (tr->t[p])
            printf("%llu", (unsigned long long)(tr->t[p] - tr->t[PH_START]));
        else
            printf("null");
    }
    printf("}, \"start_mono_ns\": %llu, \"local_port\": ", (unsigned long long)tr->t[PH_START]);
    tr->local_port ? (void)printf("%d", tr->local_port) : (void)printf("null");
    printf(", \"group\": ");
    group ? json_string(stdout, group) : (void)printf("null");
    printf(", \"sigalg\": ");
    sigalg ? json_string(stdout, sigalg) : (void)printf("null");
    printf(", \"resumed\": %s, \"msg_bytes_sent\": ", resumed ? "true" : "false");
    print_msgs(tr->sent_bytes, tr->sent_count);
    printf(", \"msg_bytes_received\": ");
    print_msgs(tr->recv_bytes, tr->recv_count);
    printf(", \"records_sent\": %u, \"records_received\": %u, \"tcp_handshake\": ", tr->records_out, tr->records_in);
    print_tcp(&tr->tcp_handshake);
    printf(", \"tcp_end\": ");
    print_tcp(&tr->tcp_end);
    printf(", \"http_status\": ");
    tr->http_status ? (void)printf("%d", tr->http_status) : (void)printf("null");
    printf(", \"body_bytes\": %llu, \"requests\": %d, \"cpu_wait_ns\": ", (unsigned long long)tr->body_bytes,
           tr->requests_done);
    tr->cpu_wait_ns == UINT64_MAX ? (void)printf("null") : (void)printf("%llu", (unsigned long long)tr->cpu_wait_ns);
    printf(", \"hrr\": %s", tr->hrr ? "true" : "false");
    print_handshake_shape(names, tr);
    transports[o->transport]->print(o, tr);
    if (page_resources())
        page_print(o);
    printf(", \"peer_chain\": [");
    for (int i = 0; i < tr->chain_n && i < TRACE_MAX_CHAIN; i++)
        printf("%s%u", i ? ", " : "", tr->chain_der[i]);
    printf("], \"peer_chain_sigs\": [");
    for (int i = 0; i < tr->chain_n && i < TRACE_MAX_CHAIN; i++) {
        printf("%s", i ? ", " : "");
        json_string(stdout, tr->chain_sig[i]);
    }
    printf("], \"peer_chain_count\": %d, \"verify\": ", tr->chain_n);
    if (!tr->verify_valid)
        printf("null");
    else
        json_string(stdout, tr->verify == X509_V_OK ? "ok" : X509_verify_cert_error_string(tr->verify));
    printf("}\n");
}

/* ---- shared sample indices (--claim) ------------------------------------------------------ */

static uint64_t *map_claims(const char *path) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        bad_usage(strerror(errno), "--claim");
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(uint64_t))
        bad_usage("the file must hold a 64-bit counter (8 bytes)", "--claim"); /* else SIGBUS on use */
    void *p = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        bad_usage(strerror(errno), "--claim");
    return p;
}

static int next_claim(uint64_t *claims) {
    uint64_t i = __atomic_fetch_add(claims, 1, __ATOMIC_RELAXED);
    return i > INT_MAX ? INT_MAX : (int)i;
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Resumption needs a ticket: one full handshake plus a request, whose response the server's
 * NewSessionTicket messages precede. Not recorded as a sample. */
static int prime_ticket(SSL_CTX *ctx, struct options *o) {
    struct trace tr;
    struct outcome out = {0};
    SSL *ssl = NULL;
    struct options prime = *o;
    prime.requests = 1;
    transports[o->transport]->run_sample(ctx, &prime, NULL, &tr, &out, &ssl);
    if (ssl)
        transports[o->transport]->release(ssl);
    if (!g_ticket) {
        fprintf(stderr, "pqtimer: %s: no session ticket from the priming handshake (%s%s%s)\n", mode_names[o->mode],
                out.error_class ? out.error_class : "no ticket", out.error_class ? ": " : "", out.error);
        return 0;
    }
    if (o->mode == MODE_EARLY && SSL_SESSION_get_max_early_data(g_ticket) == 0) {
        fprintf(stderr, "pqtimer: early: the server's session ticket allows no early data (nginx: ssl_early_data on)\n");
        return 0;
    }
    return 1;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* What the instrument itself costs: the clock's resolution, one clock read, one message callback. */
static int clock_info(void) {
    enum { N = 200001 };
    static uint64_t t[N], d[N];
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC_RAW, &res);
    for (int i = 0; i < N; i++)
        t[i] = now_ns();
    for (int i = 1; i < N; i++)
        d[i - 1] = t[i] - t[i - 1];
    qsort(d, N - 1, sizeof *d, cmp_u64);
    static struct trace tr;
    unsigned char msg[4] = {SSL3_MT_FINISHED, 0, 0, 0};
    uint64_t t0 = now_ns();
    for (int i = 0; i < N; i++)
        trace_msg_cb(0, TLS1_3_VERSION, SSL3_RT_HANDSHAKE, msg, sizeof msg, NULL, &tr);
    uint64_t t1 = now_ns();
    printf("{\"clock\": \"CLOCK_MONOTONIC_RAW\", \"resolution_ns\": %ld, \"read_median_ns\": %llu, "
           "\"read_p99_ns\": %llu, \"msg_callback_ns\": %.1f}\n", res.tv_nsec,
           (unsigned long long)d[(N - 1) / 2], (unsigned long long)d[(N - 1) * 99 / 100], (double)(t1 - t0) / N);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--clock-info"))
        return clock_info();
    struct options o;
    parse_options(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A server that resets the connection while we write (one killed mid-cell) is a failed sample with its class
     * (the write's EPIPE), not a client killed by SIGPIPE whose claimed samples come back as client_lost. */
    signal(SIGPIPE, SIG_IGN);
    const struct transport_ops *transport = transports[o.transport];
    const char *refusal = transport->refusal(&o);
    if (!refusal && page_resources() && o.transport != TRANSPORT_TCP)
        refusal = "--resource: pqtimer loads a page's further origins over TCP only (HTTP/1.1)";
    if (refusal) {
        fprintf(stderr, "pqtimer: %s\n", refusal);
        return 3;
    }
    SSL_CTX *ctx = make_ctx(&o);
    if (!ctx) {
        fprintf(stderr, "pqtimer: cannot set up TLS: %s\n", ERR_error_string(ERR_get_error(), NULL));
        return 3;
    }
    if (resumes(&o) && !prime_ticket(ctx, &o))
        return 1;
    SSL *names = SSL_new(ctx); /* names the key shares' groups */
    uint64_t *claims = o.claim ? map_claims(o.claim) : NULL;
    int failures = 0;
    static struct trace tr;
    for (int k = -o.warmup;; k++) {
        int i = k < 0 || !claims ? k : next_claim(claims); /* negative: warm-up */
        if (i >= o.count)
            break;
        struct outcome out = {0};
        SSL *ssl = NULL;
        /* OpenSSL spends a TLS 1.3 session once used; every sample resumes from its own copy. */
        SSL_SESSION *ticket = g_ticket ? SSL_SESSION_dup(g_ticket) : NULL;
        if (page_resources())
            page_run_sample(ctx, &o, &tr, &out, i >= 0 ? &ssl : NULL);
        else
            transport->run_sample(ctx, &o, ticket, &tr, &out, i >= 0 ? &ssl : NULL);
        SSL_SESSION_free(ticket);
        if (i < 0)
            continue; /* warm-up: not recorded */
        const char *group = NULL, *sigalg = NULL;
        int resumed = 0;
        if (ssl) {
            group = SSL_get0_group_name(ssl);
            SSL_get0_peer_signature_name(ssl, &sigalg);
            resumed = SSL_session_reused(ssl);
        }
        print_sample(&o, i, &tr, &out, group, sigalg, resumed, names);
        failures += out.error_class != NULL;
        if (ssl)
            transport->release(ssl);
        if (o.pause_ms) {
            struct timespec pause = {.tv_sec = o.pause_ms / 1000, .tv_nsec = (long)(o.pause_ms % 1000) * 1000000};
            while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
                ;
        }
    }
    SSL_SESSION_free(g_ticket);
    SSL_free(names);
    SSL_CTX_free(ctx);
    return failures ? 1 : 0;
}
