/*
 * cryptobench: microbenchmark of key exchange groups and signature algorithms through OpenSSL's
 * EVP API, so that native and provider algorithms are measured the same way (the way libssl uses
 * them in a TLS 1.3 handshake).
 *
 *   cryptobench group NAME [--seconds S]
 *       NAME is a TLS group. Its algorithm and kind (KEM or Diffie-Hellman) come from the providers'
 *       TLS-GROUP capabilities, as libssl finds them. Operations: keygen (client key share),
 *       encaps (server: encapsulate, or for DH keygen + derive), decaps (client: decapsulate or derive).
 *   cryptobench kem NAME [--seconds S]
 *       NAME is a KEM algorithm without a TLS group (e.g. Classic McEliece): the same operations.
 *   cryptobench sig KEYTYPE [--keyopt NAME:VALUE]... [--digest MD] [--pss] [--seconds S]
 *       Operations: keygen, sign, verify over a TLS 1.3 CertificateVerify-sized message.
 *
 * Prints one JSON object: sizes in bytes and per-operation statistics in microseconds.
 * Exit codes: 0 ok, 1 an operation failed, 2 bad arguments, 3 algorithm not available.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/dh.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#define MAX_KEYOPTS 8
#define MIN_REPS 5
#define MAX_REPS 200000

struct group_info {
    char name[64];
    char alg[64];
    char internal[64];
    int is_kem;
    int found;
};

struct stats {
    size_t n;
    double median, p25, p75, min, max, mean, stdev;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void fail(int code, const char *what) {
    unsigned long e = ERR_peek_last_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    fprintf(stderr, "cryptobench: %s%s%s\n", what, e ? ": " : "", buf);
    exit(code);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *sorted, size_t n, double q) {
    double pos = q * (n - 1);
    size_t lo = (size_t)pos;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

static struct stats summarise(double *t, size_t n) {
    struct stats s = {.n = n};
    qsort(t, n, sizeof *t, cmp_double);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        sum += t[i];
    s.mean = sum / n;
    for (size_t i = 0; i < n; i++)
        sq += (t[i] - s.mean) * (t[i] - s.mean);
    s.stdev = n > 1 ? sqrt(sq / (n - 1)) : 0;
    s.min = t[0];
    s.max = t[n - 1];
    s.median = quantile(t, n, 0.5);
    s.p25 = quantile(t, n, 0.25);
    s.p75 = quantile(t, n, 0.75);
    return s;
}

/* One operation under test: run() does it once and returns 1 on success. */
typedef int (*op_fn)(void *ctx);

static struct stats measure(const char *what, op_fn run, void *ctx, double seconds) {
    static double samples[MAX_REPS];
    size_t n = 0;
    if (!run(ctx)) /* warm-up, not recorded */
        fail(1, what);
    double deadline = now_us() + seconds * 1e6;
    while (n < MAX_REPS && (n < MIN_REPS || now_us() < deadline)) {
        double t0 = now_us();
        int ok = run(ctx);
        double t1 = now_us();
        if (!ok)
            fail(1, what);
        samples[n++] = t1 - t0;
    }
    return summarise(samples, n);
}

static void print_stats(const char *name, struct stats s, int last) {
    printf("    \"%s\": {\"n\": %zu, \"median_us\": %.3f, \"p25_us\": %.3f, \"p75_us\": %.3f, "
           "\"min_us\": %.3f, \"max_us\": %.3f, \"mean_us\": %.3f, \"stdev_us\": %.3f}%s\n",
           name, s.n, s.median, s.p25, s.p75, s.min, s.max, s.mean, s.stdev, last ? "" : ",");
}

/* ---- key exchange groups ------------------------------------------------------------------ */

static int collect_group(const OSSL_PARAM params[], void *arg) {
    struct group_info *g = arg;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_NAME);
    const char *name = NULL;
    if (g->found || !p || !OSSL_PARAM_get_utf8_string_ptr(p, &name) || strcasecmp(name, g->name) != 0)
        return 1;
    const char *alg = NULL, *internal = NULL;
    unsigned int is_kem = 0;
    OSSL_PARAM_get_utf8_string_ptr(OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_ALG), &alg);
    OSSL_PARAM_get_utf8_string_ptr(OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_NAME_INTERNAL),
                                   &internal);
    p = OSSL_PARAM_locate_const(params, OSSL_CAPABILITY_TLS_GROUP_IS_KEM);
    if (p)
        OSSL_PARAM_get_uint(p, &is_kem);
    if (!alg || !internal)
        return 1;
    snprintf(g->alg, sizeof g->alg, "%s", alg);
    snprintf(g->internal, sizeof g->internal, "%s", internal);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->is_kem = is_kem != 0;
    g->found = 1;
    return 1;
}

static int visit_provider(OSSL_PROVIDER *prov, void *arg) {
    OSSL_PROVIDER_get_capabilities(prov, "TLS-GROUP", collect_group, arg);
    return 1;
}

struct kex {
    struct group_info *g;
    EVP_PKEY *client;      /* client key pair */
    EVP_PKEY *peer;        /* client public key as the server parses it */
    unsigned char *share;  /* client key share */
    size_t share_len;
    unsigned char ct[1 << 17];
    size_t ct_len;
    unsigned char ss[1024];
    size_t ss_len;
};

static EVP_PKEY *group_keygen(struct group_info *g) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, g->alg, NULL);
    if (ctx && EVP_PKEY_keygen_init(ctx) > 0 &&
        (!g->internal[0] || EVP_PKEY_CTX_set_group_name(ctx, g->internal) > 0))
        EVP_PKEY_keygen(ctx, &key);
    EVP_PKEY_CTX_free(ctx);
    return key;
}

/* A peer's public key from its key share, the way libssl parses one: the server starts from the
 * group's parameters (paramgen), the client from its own key's parameters. */
static EVP_PKEY *peer_from_share(struct group_info *g, EVP_PKEY *own, const unsigned char *share, size_t len) {
    EVP_PKEY *peer = NULL;
    if (own) {
        peer = EVP_PKEY_new();
        if (peer && EVP_PKEY_copy_parameters(peer, own) <= 0) {
            EVP_PKEY_free(peer);
            return NULL;
        }
    } else {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, g->alg, NULL);
        if (ctx && EVP_PKEY_paramgen_init(ctx) > 0 &&
            (!g->internal[0] || EVP_PKEY_CTX_set_group_name(ctx, g->internal) > 0))
            EVP_PKEY_paramgen(ctx, &peer);
        EVP_PKEY_CTX_free(ctx);
        if (!peer && !g->internal[0]) { /* bare KEMs without paramgen: a blank key of the type */
            ERR_clear_error();
            peer = group_keygen(g);
        }
    }
    if (peer && EVP_PKEY_set1_encoded_public_key(peer, share, len) <= 0) {
        EVP_PKEY_free(peer);
        return NULL;
    }
    return peer;
}

static int derive(EVP_PKEY *own, EVP_PKEY *peer, unsigned char *out, size_t *out_len, size_t cap) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, own, NULL);
    size_t len = cap;
    /* TLS 1.3 left-pads a finite-field secret to the prime's size (RFC 8446, 7.4.1); OpenSSL's DH
     * derive strips leading zero bytes unless asked, so 1 in 256 secrets would come out a byte short. */
    int ok = ctx && EVP_PKEY_derive_init(ctx) > 0 &&
             (!EVP_PKEY_is_a(own, "DH") || EVP_PKEY_CTX_set_dh_pad(ctx, 1) > 0) &&
             EVP_PKEY_derive_set_peer(ctx, peer) > 0 && EVP_PKEY_derive(ctx, out, &len) > 0;
    EVP_PKEY_CTX_free(ctx);
    if (ok)
        *out_len = len;
    return ok;
}

static int op_keygen(void *arg) {
    struct kex *k = arg;
    EVP_PKEY *key = group_keygen(k->g);
    EVP_PKEY_free(key);
    return key != NULL;
}

/* Server side: encapsulate to the client's share, or make a DH key share and derive. */
static int op_encaps(void *arg) {
    struct kex *k = arg;
    if (k->g->is_kem) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, k->peer, NULL);
        size_t ct_len = sizeof k->ct, ss_len = sizeof k->ss;
        int ok = ctx && EVP_PKEY_encapsulate_init(ctx, NULL) > 0 &&
                 EVP_PKEY_encapsulate(ctx, k->ct, &ct_len, k->ss, &ss_len) > 0;
        EVP_PKEY_CTX_free(ctx);
        k->ct_len = ct_len;
        k->ss_len = ss_len;
        return ok;
    }
    EVP_PKEY *server = group_keygen(k->g);
    unsigned char *pub = NULL;
    size_t pub_len = server ? EVP_PKEY_get1_encoded_public_key(server, &pub) : 0;
    int ok = server && pub_len && pub_len <= sizeof k->ct &&
             derive(server, k->peer, k->ss, &k->ss_len, sizeof k->ss);
    if (ok) {
        memcpy(k->ct, pub, pub_len);
        k->ct_len = pub_len;
    }
    OPENSSL_free(pub);
    EVP_PKEY_free(server);
    return ok;
}

/* Client side: decapsulate the server's share, or derive with it. */
static int op_decaps(void *arg) {
    struct kex *k = arg;
    unsigned char ss[sizeof k->ss];
    size_t ss_len = sizeof ss;
    int ok;
    if (k->g->is_kem) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, k->client, NULL);
        ok = ctx && EVP_PKEY_decapsulate_init(ctx, NULL) > 0 &&
             EVP_PKEY_decapsulate(ctx, ss, &ss_len, k->ct, k->ct_len) > 0;
        EVP_PKEY_CTX_free(ctx);
    } else {
        EVP_PKEY *server = peer_from_share(k->g, k->client, k->ct, k->ct_len);
        ok = server && derive(k->client, server, ss, &ss_len, sizeof ss);
        EVP_PKEY_free(server);
    }
    /* Both sides must agree, or the group is broken: a failure, not a timing. */
    return ok && ss_len == k->ss_len && memcmp(ss, k->ss, ss_len) == 0;
}

static int bench_kex(const char *name, int tls_group, double seconds) {
    static struct kex k;
    struct group_info g = {0};
    snprintf(g.name, sizeof g.name, "%s", name);
    if (tls_group) {
        OSSL_PROVIDER_do_all(NULL, visit_provider, &g);
        if (!g.found) {
            fprintf(stderr, "cryptobench: no provider offers the TLS group '%s'\n", name);
            return 3;
        }
    } else { /* a bare KEM: the algorithm is its own name and has no group parameter */
        EVP_KEM *kem = EVP_KEM_fetch(NULL, name, NULL);
        if (!kem) {
            fprintf(stderr, "cryptobench: no provider offers the KEM '%s'\n", name);
            return 3;
        }
        EVP_KEM_free(kem);
        snprintf(g.alg, sizeof g.alg, "%s", name);
        g.is_kem = 1;
    }
    k.g = &g;
    k.client = group_keygen(&g);
    if (!k.client)
        fail(1, "client key generation failed");
    k.share_len = EVP_PKEY_get1_encoded_public_key(k.client, &k.share);
    if (!k.share_len)
        fail(1, "encoding the client key share failed");
    k.peer = peer_from_share(&g, NULL, k.share, k.share_len);
    if (!k.peer)
        fail(1, "the server could not parse the client key share");
    if (!op_encaps(&k) || !op_decaps(&k))
        fail(1, "key exchange failed or the two sides derived different secrets");

    struct stats kg = measure("keygen failed", op_keygen, &k, seconds / 3);
    struct stats en = measure("encaps failed", op_encaps, &k, seconds / 3);
    struct stats de = measure("decaps failed", op_decaps, &k, seconds / 3);
    printf("{\n  \"kind\": \"kem\", \"name\": \"%s\", \"algorithm\": \"%s\", \"is_kem\": %s,\n", g.name,
           g.alg, g.is_kem ? "true" : "false");
    printf("  \"sizes\": {\"pk\": %zu, \"ct\": %zu, \"ss\": %zu},\n", k.share_len, k.ct_len, k.ss_len);
    printf("  \"ops\": {\n");
    print_stats("keygen", kg, 0);
    print_stats("encaps", en, 0);
    print_stats("decaps", de, 1);
    printf("  }\n}\n");
    OPENSSL_free(k.share);
    EVP_PKEY_free(k.client);
    EVP_PKEY_free(k.peer);
    return 0;
}

/* ---- signatures --------------------------------------------------------------------------- */

struct sigbench {
    const char *keytype;
    const char *keyopts[MAX_KEYOPTS];
    int n_keyopts;
    const char *digest;
    int pss;
    EVP_PKEY *key;
    unsigned char msg[130]; /* 64 spaces + context string + transcript hash, as TLS 1.3 signs */
    unsigned char sig[1 << 17];
    size_t sig_len;
};

static EVP_PKEY *sig_keygen(struct sigbench *b) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, b->keytype, NULL);
    if (!ctx || EVP_PKEY_keygen_init(ctx) <= 0)
        goto out;
    for (int i = 0; i < b->n_keyopts; i++) {
        char opt[128];
        snprintf(opt, sizeof opt, "%s", b->keyopts[i]);
        char *colon = strchr(opt, ':');
        if (!colon)
            goto out;
        *colon = '\0';
        if (EVP_PKEY_CTX_ctrl_str(ctx, opt, colon + 1) <= 0)
            goto out;
    }
    EVP_PKEY_keygen(ctx, &key);
out:
    EVP_PKEY_CTX_free(ctx);
    return key;
}

static int op_sig_keygen(void *arg) {
    EVP_PKEY *key = sig_keygen(arg);
    EVP_PKEY_free(key);
    return key != NULL;
}

static int setup_md_ctx(struct sigbench *b, EVP_MD_CTX *md, int sign) {
    EVP_PKEY_CTX *pctx = NULL;
    int ok = sign ? EVP_DigestSignInit_ex(md, &pctx, b->digest, NULL, NULL, b->key, NULL)
                  : EVP_DigestVerifyInit_ex(md, &pctx, b->digest, NULL, NULL, b->key, NULL);
    if (ok > 0 && b->pss)
        ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) > 0 &&
             EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) > 0;
    return ok > 0;
}

static int op_sign(void *arg) {
    struct sigbench *b = arg;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t len = sizeof b->sig;
    int ok = md && setup_md_ctx(b, md, 1) && EVP_DigestSign(md, b->sig, &len, b->msg, sizeof b->msg) > 0;
    EVP_MD_CTX_free(md);
    if (ok)
        b->sig_len = len;
    return ok;
}

static int op_verify(void *arg) {
    struct sigbench *b = arg;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && setup_md_ctx(b, md, 0) && EVP_DigestVerify(md, b->sig, b->sig_len, b->msg, sizeof b->msg) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

static int bench_sig(struct sigbench *b, double seconds) {
    memset(b->msg, 0x20, 64);
    memcpy(b->msg + 64, "TLS 1.3, server CertificateVerify", 33);
    for (size_t i = 97; i < sizeof b->msg; i++)
        b->msg[i] = (unsigned char)(i * 37);
    b->key = sig_keygen(b);
    if (!b->key) {
        unsigned long e = ERR_peek_last_error();
        fprintf(stderr, "cryptobench: cannot generate a %s key (%s)\n", b->keytype,
                e ? ERR_reason_error_string(e) : "unknown");
        return ERR_GET_REASON(e) == ERR_R_UNSUPPORTED || ERR_GET_REASON(e) == EVP_R_UNSUPPORTED_ALGORITHM ? 3 : 1;
    }
    unsigned char *pub = NULL;
    size_t pk_len = 0;
    /* Raw public key where the algorithm has one, else the encoded point; RSA: RSAPublicKey DER. */
    if (EVP_PKEY_get_raw_public_key(b->key, NULL, &pk_len) <= 0) {
        pk_len = EVP_PKEY_get1_encoded_public_key(b->key, &pub);
        if (!pk_len) {
            ERR_clear_error();
            int der = i2d_PublicKey(b->key, &pub); /* PKCS#1 RSAPublicKey */
            pk_len = der > 0 ? (size_t)der : 0;
        }
    }
    OPENSSL_free(pub);
    ERR_clear_error();
    if (!op_sign(b) || !op_verify(b))
        fail(1, "a fresh signature did not verify");
    size_t max_sig = (size_t)EVP_PKEY_get_size(b->key);
    struct stats kg = measure("keygen failed", op_sig_keygen, b, seconds / 3);
    struct stats sg = measure("sign failed", op_sign, b, seconds / 3);
    struct stats vf = measure("verify failed", op_verify, b, seconds / 3);
    /* A tampered signature must not verify. */
    b->sig[b->sig_len / 2] ^= 0x01;
    if (op_verify(b))
        fail(1, "a tampered signature verified");
    b->sig[b->sig_len / 2] ^= 0x01;
    ERR_clear_error();
    printf("{\n  \"kind\": \"sig\", \"name\": \"%s\", \"digest\": %s%s%s, \"pss\": %s,\n", b->keytype,
           b->digest ? "\"" : "", b->digest ? b->digest : "null", b->digest ? "\"" : "", b->pss ? "true" : "false");
    printf("  \"sizes\": {\"pk\": %zu, \"sig\": %zu, \"sig_max\": %zu},\n", pk_len, b->sig_len, max_sig);
    printf("  \"ops\": {\n");
    print_stats("keygen", kg, 0);
    print_stats("sign", sg, 0);
    print_stats("verify", vf, 1);
    printf("  }\n}\n");
    EVP_PKEY_free(b->key);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: cryptobench group|kem NAME [--seconds S]\n"
                    "       cryptobench sig KEYTYPE [--keyopt NAME:VALUE]... [--digest MD] [--pss] [--seconds S]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3)
        usage();
    double seconds = 1.0;
    static struct sigbench sb;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            errno = 0;
            seconds = strtod(argv[++i], &end);
            if (errno || *end || !(seconds > 0) || seconds > 3600) {
                fprintf(stderr, "cryptobench: --seconds must be a number in (0, 3600]\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--keyopt") && i + 1 < argc && sb.n_keyopts < MAX_KEYOPTS) {
            sb.keyopts[sb.n_keyopts++] = argv[++i];
        } else if (!strcmp(argv[i], "--digest") && i + 1 < argc) {
            sb.digest = argv[++i];
        } else if (!strcmp(argv[i], "--pss")) {
            sb.pss = 1;
        } else {
            usage();
        }
    }
    if (!strcmp(argv[1], "group") || !strcmp(argv[1], "kem"))
        return bench_kex(argv[2], !strcmp(argv[1], "group"), seconds);
    if (!strcmp(argv[1], "sig")) {
        sb.keytype = argv[2];
        return bench_sig(&sb, seconds);
    }
    usage();
}
