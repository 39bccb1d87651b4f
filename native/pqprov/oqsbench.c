/*
 * oqsbench: liboqs called directly, timed the way cryptobench times the same operations through
 * OpenSSL and pqprov (bench/bench_pqprov.py compares the two).
 *
 *   oqsbench kem|sig LIBOQS_NAME [--seconds S]
 *
 * Prints one JSON object: sizes and per-operation median/min/mean in microseconds.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/oqs.h>

#define MIN_REPS 5
#define MAX_REPS 200000

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct ctx {
    OQS_KEM *kem;
    OQS_SIG *sig;
    uint8_t *pk, *sk, *pk2, *sk2, *ct, *ss, *ss2, *sigbuf;
    size_t sig_len;
    uint8_t msg[130]; /* as cryptobench: 64 spaces, context string, transcript hash */
};

typedef int (*op_fn)(struct ctx *);

static int kem_keygen(struct ctx *c) { return OQS_KEM_keypair(c->kem, c->pk2, c->sk2) == OQS_SUCCESS; }
static int kem_encaps(struct ctx *c) { return OQS_KEM_encaps(c->kem, c->ct, c->ss, c->pk) == OQS_SUCCESS; }
static int kem_decaps(struct ctx *c) {
    return OQS_KEM_decaps(c->kem, c->ss2, c->ct, c->sk) == OQS_SUCCESS && !memcmp(c->ss, c->ss2, c->kem->length_shared_secret);
}
static int sig_keygen(struct ctx *c) { return OQS_SIG_keypair(c->sig, c->pk2, c->sk2) == OQS_SUCCESS; }
static int sig_sign(struct ctx *c) {
    return OQS_SIG_sign(c->sig, c->sigbuf, &c->sig_len, c->msg, sizeof c->msg, c->sk) == OQS_SUCCESS;
}
static int sig_verify(struct ctx *c) {
    return OQS_SIG_verify(c->sig, c->msg, sizeof c->msg, c->sigbuf, c->sig_len, c->pk) == OQS_SUCCESS;
}

static void measure(const char *name, op_fn op, struct ctx *c, double seconds, int last) {
    static double t[MAX_REPS];
    size_t n = 0;
    if (!op(c)) { /* warm-up, not recorded */
        fprintf(stderr, "oqsbench: %s failed\n", name);
        exit(1);
    }
    double deadline = now_us() + seconds * 1e6;
    while (n < MAX_REPS && (n < MIN_REPS || now_us() < deadline)) {
        double t0 = now_us();
        int ok = op(c);
        t[n++] = now_us() - t0;
        if (!ok) {
            fprintf(stderr, "oqsbench: %s failed\n", name);
            exit(1);
        }
    }
    qsort(t, n, sizeof *t, cmp);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += t[i];
    double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    printf("    \"%s\": {\"n\": %zu, \"median_us\": %.3f, \"min_us\": %.3f, \"mean_us\": %.3f}%s\n", name, n, median,
           t[0], sum / n, last ? "" : ",");
}

int main(int argc, char **argv) {
    double seconds = 1;
    if (argc == 5 && !strcmp(argv[3], "--seconds"))
        seconds = atof(argv[4]);
    else if (argc != 3) {
        fprintf(stderr, "usage: oqsbench kem|sig LIBOQS_NAME [--seconds S]\n");
        return 2;
    }
    OQS_init();
    static struct ctx c;
    memset(c.msg, 0x20, 64);
    memcpy(c.msg + 64, "TLS 1.3, server CertificateVerify", 33);
    for (size_t i = 97; i < sizeof c.msg; i++)
        c.msg[i] = (uint8_t)(i * 37);
    if (!strcmp(argv[1], "kem") && (c.kem = OQS_KEM_new(argv[2]))) {
        OQS_KEM *k = c.kem;
        c.pk = malloc(k->length_public_key), c.pk2 = malloc(k->length_public_key);
        c.sk = malloc(k->length_secret_key), c.sk2 = malloc(k->length_secret_key);
        c.ct = malloc(k->length_ciphertext), c.ss = malloc(k->length_shared_secret), c.ss2 = malloc(k->length_shared_secret);
        if (OQS_KEM_keypair(k, c.pk, c.sk) != OQS_SUCCESS || !kem_encaps(&c))
            return 1;
        printf("{\n  \"kind\": \"kem\", \"name\": \"%s\",\n  \"sizes\": {\"pk\": %zu, \"ct\": %zu, \"ss\": %zu},\n  \"ops\": {\n",
               argv[2], k->length_public_key, k->length_ciphertext, k->length_shared_secret);
        measure("keygen", kem_keygen, &c, seconds / 3, 0);
        measure("encaps", kem_encaps, &c, seconds / 3, 0);
        measure("decaps", kem_decaps, &c, seconds / 3, 1);
    } else if (!strcmp(argv[1], "sig") && (c.sig = OQS_SIG_new(argv[2]))) {
        OQS_SIG *s = c.sig;
        c.pk = malloc(s->length_public_key), c.pk2 = malloc(s->length_public_key);
        c.sk = malloc(s->length_secret_key), c.sk2 = malloc(s->length_secret_key);
        c.sigbuf = malloc(s->length_signature);
        if (OQS_SIG_keypair(s, c.pk, c.sk) != OQS_SUCCESS || !sig_sign(&c))
            return 1;
        printf("{\n  \"kind\": \"sig\", \"name\": \"%s\",\n  \"sizes\": {\"pk\": %zu, \"sig\": %zu},\n  \"ops\": {\n",
               argv[2], s->length_public_key, s->length_signature);
        measure("keygen", sig_keygen, &c, seconds / 3, 0);
        measure("sign", sig_sign, &c, seconds / 3, 0);
        measure("verify", sig_verify, &c, seconds / 3, 1);
    } else {
        fprintf(stderr, "oqsbench: liboqs has no enabled %s named '%s'\n", argv[1], argv[2]);
        return 3;
    }
    printf("  }\n}\n");
    return 0;
}
