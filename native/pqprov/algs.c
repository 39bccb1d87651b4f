/* The algorithm table: rows generated from the catalog, then synthetic instances from the
 * configuration; completed at load time with what liboqs and OpenSSL report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/objects.h>
#include <oqs/oqs.h>

#include "pqprov.h"

#define PQP_CATALOG_ROWS
static const struct pqp_alg catalog_rows[PQP_CATALOG_COUNT] = {
#include "pqprov_tables.inc"
};
struct pqp_alg pqp_algs[PQP_MAX_ALGS]; /* catalog rows, then configured instances, minus unavailable */
size_t pqp_nalgs;
static int instances; /* provider instances sharing the table */

static unsigned char oid_der[PQP_MAX_ALGS][32]; /* OID content octets, for the decoders */
static size_t oid_der_len[PQP_MAX_ALGS];

static int find_name(const char *name, size_t upto) {
    for (size_t i = 0; i < upto; i++)
        if (!strcasecmp(pqp_algs[i].name, name))
            return 1;
    return 0;
}

/* Sizes of the liboqs half, the classical half and their layout must add up to the catalog's. */
static int complete(struct pqp_ctx *ctx, struct pqp_alg *a) {
    size_t oqs_pk = 0, oqs_ct = 0, oqs_ss = 0, oqs_sig = 0;
    if (a->oqs) {
        if (a->kind == PQP_KEM) {
            OQS_KEM *k = OQS_KEM_new(a->oqs);
            if (!k)
                return 0;
            a->oqs_obj = k;
            oqs_pk = k->length_public_key, oqs_ct = k->length_ciphertext, oqs_ss = k->length_shared_secret;
            a->oqs_sk = k->length_secret_key;
        } else {
            OQS_SIG *s = OQS_SIG_new(a->oqs);
            if (!s)
                return 0;
            a->oqs_obj = s;
            oqs_pk = s->length_public_key, oqs_sig = s->length_signature;
            a->oqs_sk = s->length_secret_key;
        }
    }
    if (a->layout == PQP_LAYOUT_NATIVE) /* the whole key is OpenSSL's */
        a->classical_len = a->pk;
    else if (a->classical && !pqp_classical_sizes(ctx, a->classical, &a->classical_len, &a->classical_ss))
        return 0;
    size_t hdr = pqp_hybrid_prefix_len(a);
    int ok;
    if (a->layout == PQP_LAYOUT_NATIVE)
        ok = a->kind == PQP_SIG && a->oid;
    else if (a->layout == PQP_LAYOUT_PAD) /* synthetic: the configured sizes must hold the classical part */
        ok = a->pk >= a->classical_len && (a->kind == PQP_SIG ? a->sig >= 64 : a->ct >= a->classical_len && a->ss == a->classical_ss);
    else if (a->kind == PQP_KEM)
        ok = a->pk == hdr + a->classical_len + oqs_pk && a->ct == hdr + a->classical_len + oqs_ct &&
             a->ss == a->classical_ss + oqs_ss;
    else
        ok = a->pk == oqs_pk && a->sig == oqs_sig;
    if (!ok) {
        PQP_RAISE(PQP_R_WRONG_LENGTH, "%s: catalog sizes disagree with the implementation", a->name);
        return 0;
    }
    if (a->layout == PQP_LAYOUT_NATIVE) /* one algorithm with OpenSSL's: same key type, same OID */
        snprintf(a->names, sizeof a->names, "%s:%s:%s", a->name, a->classical, a->oid);
    else if (a->oid)
        snprintf(a->names, sizeof a->names, "%s:%s", a->name, a->oid);
    else
        snprintf(a->names, sizeof a->names, "%s", a->name);
    return 1;
}

static void release(struct pqp_alg *a) {
    if (a->oqs_obj && a->kind == PQP_KEM)
        OQS_KEM_free(a->oqs_obj);
    else if (a->oqs_obj)
        OQS_SIG_free(a->oqs_obj);
    free(a->owned);
    a->oqs_obj = NULL;
    a->owned = NULL;
}

/* The last provider instance going away frees what the table holds. */
void pqp_algs_release(void) {
    if (instances > 0 && --instances > 0)
        return;
    for (size_t i = 0; i < pqp_nalgs; i++)
        release(&pqp_algs[i]);
    pqp_nalgs = 0;
}

int pqp_algs_init(struct pqp_ctx *ctx, const char *synthetic_spec, int *fresh) {
    *fresh = 0;
    if (instances++) /* the table is process-wide; later loads (other library contexts) share it */
        return 1;
    *fresh = 1;
    memcpy(pqp_algs, catalog_rows, sizeof catalog_rows);
    pqp_nalgs = PQP_CATALOG_COUNT;
    OQS_init();
    pqp_busy_calibrate();
    if (synthetic_spec && *synthetic_spec) {
        size_t added = 0;
        struct pqp_alg extra[PQP_MAX_ALGS - PQP_CATALOG_COUNT];
        int ok = pqp_synthetic_parse(synthetic_spec, extra, PQP_MAX_ALGS - PQP_CATALOG_COUNT, &added);
        for (size_t i = 0; i < added; i++) {
            if (ok && find_name(extra[i].name, pqp_nalgs)) {
                PQP_RAISE(PQP_R_BAD_SYNTHETIC_SPEC, "synthetic %s: name already taken", extra[i].name);
                ok = 0;
            }
            pqp_algs[pqp_nalgs++] = extra[i];
        }
        if (!ok) {
            pqp_algs_release();
            return 0;
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < pqp_nalgs; i++) {
        struct pqp_alg *a = &pqp_algs[i];
        if (!complete(ctx, a)) { /* not built into this liboqs: leave it out, say so when debugging */
            PQP_DEBUG("%s (%s) unavailable, left out", a->name, a->oqs ? a->oqs : "synthetic");
            release(a);
            continue;
        }
        pqp_algs[kept] = *a;
        if (a->oid) {
            ASN1_OBJECT *obj = OBJ_txt2obj(a->oid, 1);
            int n = obj ? i2d_ASN1_OBJECT(obj, NULL) : 0;
            if (n > 2 && n <= 34) {
                unsigned char buf[34], *p = buf;
                i2d_ASN1_OBJECT(obj, &p);
                memcpy(oid_der[kept], buf + 2, n - 2);
                oid_der_len[kept] = n - 2;
            }
            ASN1_OBJECT_free(obj);
        }
        kept++;
    }
    pqp_nalgs = kept;
    PQP_DEBUG("%zu algorithms", pqp_nalgs);
    return 1;
}

const struct pqp_alg *pqp_alg_by_oid_der(const unsigned char *oid, size_t len) {
    for (size_t i = 0; i < pqp_nalgs; i++)
        if (oid_der_len[i] && oid_der_len[i] == len && !memcmp(oid_der[i], oid, len))
            return &pqp_algs[i];
    return NULL;
}
