/*
 * Synthetic algorithms: instances configured at load time, and the wait that gives them their
 * configured compute time: busy work (a real algorithm's CPU) or, with synthetic_work = sleep, a
 * sleep that leaves the CPU to others (the same latency; concurrent handshakes do not queue behind
 * it, so a testbed can run many at once without biasing each other).
 *
 * Spec (provider config key `synthetic`, or PQPROV_SYNTHETIC), instances separated by ';':
 *   kem NAME codepoint=0xFEBA pk=2000 ct=2100 [keygen_ms=1.5] [encaps_ms=..] [decaps_ms=..]
 *   sig NAME codepoint=0xFEF5 oid=1.3.6.1.4.1.99999.1.9 pk=40 sig=5000 [keygen_ms=..] [sign_ms=..] [verify_ms=..]
 * A KEM carries X25519 (pk, ct >= 32; 32-byte secret), a signature Ed25519 (pk >= 32, sig >= 64).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <time.h>

#include "pqprov.h"

#define MAX_SIZE 60000 /* a TLS extension / CertificateVerify must still fit */

static int parse_number(const char *v, double lo, double hi, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi))
        return 0;
    *out = d;
    return 1;
}

static int parse_one(char *item, struct pqp_alg *a) {
    char *save = NULL;
    char *kind = strtok_r(item, " \t\n", &save);
    char *name = strtok_r(NULL, " \t\n", &save);
    if (!kind)
        return -1; /* empty item */
    memset(a, 0, sizeof *a);
    if (!strcmp(kind, "kem")) {
        a->kind = PQP_KEM;
        a->classical = "X25519";
        a->ss = 32;
    } else if (!strcmp(kind, "sig")) {
        a->kind = PQP_SIG;
        a->classical = "ED25519";
    } else {
        PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "'%s': kind must be kem or sig", kind);
        return 0;
    }
    if (!name || strlen(name) > 60 || strchr(name, ':') || strchr(name, '=')) {
        PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "%s instance needs a NAME (up to 60 characters, no ':')", kind);
        return 0;
    }
    a->layout = PQP_LAYOUT_PAD;
    a->level = 0;
    a->secbits = 128;
    a->tls = 1;
    a->owned = strdup(name);
    a->name = a->owned;
    char *kv;
    while ((kv = strtok_r(NULL, " \t\n", &save))) {
        char *eq = strchr(kv, '=');
        double d;
        if (!eq)
            goto bad;
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        int is_kem = a->kind == PQP_KEM;
        if (!strcmp(k, "codepoint") && parse_number(v, 1, 0xFFFF, &d))
            a->codepoint = (unsigned)d;
        else if (!strcmp(k, "pk") && parse_number(v, 32, MAX_SIZE, &d))
            a->pk = (size_t)d;
        else if (is_kem && !strcmp(k, "ct") && parse_number(v, 32, MAX_SIZE, &d))
            a->ct = (size_t)d;
        else if (!is_kem && !strcmp(k, "sig") && parse_number(v, 64, MAX_SIZE, &d))
            a->sig = (size_t)d;
        else if (!is_kem && !strcmp(k, "oid") && strlen(v) < 64 && strspn(v, "0123456789.") == strlen(v)) {
            char *both = malloc(strlen(a->owned) + strlen(v) + 2);
            sprintf(both, "%s%c%s", a->owned, 0, v); /* name and OID in one allocation */
            free(a->owned);
            a->owned = both;
            a->name = both;
            a->oid = both + strlen(both) + 1;
        } else if (!strcmp(k, "keygen_ms") && parse_number(v, 0, 10000, &d))
            a->ms[0] = d;
        else if (!strcmp(k, is_kem ? "encaps_ms" : "sign_ms") && parse_number(v, 0, 10000, &d))
            a->ms[1] = d;
        else if (!strcmp(k, is_kem ? "decaps_ms" : "verify_ms") && parse_number(v, 0, 10000, &d))
            a->ms[2] = d;
        else {
            *eq = '=';
            goto bad;
        }
    }
    if (!a->codepoint || !a->pk || (a->kind == PQP_KEM ? !a->ct : (!a->sig || !a->oid))) {
        PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "%s %s: needs codepoint, pk and %s", kind, a->name,
                  a->kind == PQP_KEM ? "ct" : "sig and oid");
        goto fail;
    }
    return 1;
bad:
    PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "%s %s: bad or unknown setting '%s'", kind, a->name, kv);
fail:
    free(a->owned);
    a->owned = NULL;
    return 0;
}

int pqp_synthetic_parse(const char *spec, struct pqp_alg *out, size_t room, size_t *added) {
    char *copy = strdup(spec), *save = NULL, *item;
    int ok = 1;
    *added = 0;
    for (item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (*added == room) {
            PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "more than %zu synthetic instances", room);
            ok = 0;
            break;
        }
        int r = parse_one(item, &out[*added]);
        if (r == 0) {
            ok = 0;
            break;
        }
        if (r > 0)
            (*added)++;
    }
    free(copy);
    return ok;
}

/* ---- compute time ------------------------------------------------------------------------------ */

/* Work between two clock reads, sized at load time to about a microsecond, so the wait ends within
 * a microsecond of the deadline whatever the machine's speed. */
static unsigned long chunk = 64;
static volatile uint64_t sink;
static int sleeping; /* synthetic_work = sleep: wait off the CPU, spin only the last SLEEP_MARGIN_MS */
#define SLEEP_MARGIN_MS 0.2 /* more than a wake-up takes, so the deadline is still met by spinning */

static void work(unsigned long n) {
    uint64_t x = sink | 1;
    for (unsigned long i = 0; i < n; i++)
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sink = x;
}

void pqp_now(struct timespec *t) {
    clock_gettime(CLOCK_MONOTONIC, t);
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b) {
    return (b->tv_sec - a->tv_sec) * 1e3 + (b->tv_nsec - a->tv_nsec) / 1e6;
}

void pqp_busy_calibrate(void) {
    struct timespec a, b;
    unsigned long n = 1 << 16;
    pqp_now(&a);
    work(n);
    pqp_now(&b);
    double ms = elapsed_ms(&a, &b);
    if (ms > 0)
        chunk = (unsigned long)(n * 0.001 / ms) + 1;
    PQP_DEBUG("busy work: %lu iterations per microsecond", chunk);
}

int pqp_set_work(const char *mode) {
    if (!mode || !*mode)
        return 1;
    if (strcmp(mode, "busy") && strcmp(mode, "sleep")) {
        PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "synthetic_work '%s': must be busy or sleep", mode);
        return 0;
    }
    sleeping = !strcmp(mode, "sleep");
    PQP_DEBUG("synthetic compute time: %s", sleeping ? "sleep" : "busy");
    return 1;
}

void pqp_work_until(const struct timespec *start, double ms) {
    if (ms <= 0)
        return;
    struct timespec t;
    if (sleeping && ms > SLEEP_MARGIN_MS) {
        double until = ms - SLEEP_MARGIN_MS;
        long long ns = start->tv_nsec + (long long)(until * 1e6);
        struct timespec wake = {start->tv_sec + ns / 1000000000LL, ns % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL) == EINTR)
            ;
    }
    for (pqp_now(&t); elapsed_ms(start, &t) < ms; pqp_now(&t))
        work(chunk);
}
