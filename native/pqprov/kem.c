/*
 * KEM operations for every KEM group: liboqs as is, OQS hybrids (classical part first, both on
 * the wire and in the shared secret), synthetic (X25519 padded to the configured size, plus busy
 * work for the configured time). Inputs of the wrong length fail cleanly with PQP_R_WRONG_LENGTH.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <oqs/oqs.h>

#include "pqprov.h"

struct kem_ctx {
    struct pqp_ctx *ctx;
    struct pqp_key *key;
};

static void *newctx(void *provctx) {
    struct kem_ctx *k = OPENSSL_zalloc(sizeof *k);
    if (k)
        k->ctx = provctx;
    return k;
}

static void freectx(void *vctx) {
    OPENSSL_free(vctx);
}

static void *dupctx(void *vctx) {
    return OPENSSL_memdup(vctx, sizeof(struct kem_ctx));
}

static int init(void *vctx, void *provkey, const OSSL_PARAM params[]) {
    struct kem_ctx *k = vctx;
    k->key = provkey;
    return k->key != NULL && k->key->alg->kind == PQP_KEM;
}

static int set_ctx_params(void *vctx, const OSSL_PARAM params[]) {
    return 1;
}

static const OSSL_PARAM *settable_ctx_params(void *vctx, void *provctx) {
    static const OSSL_PARAM none[] = {OSSL_PARAM_END};
    return none;
}

static int all_zero(const unsigned char *p, size_t n) {
    unsigned char acc = 0;
    while (n--)
        acc |= *p++;
    return acc == 0;
}

/* The peer's classical share inside a key share or ciphertext, checked for framing. */
static EVP_PKEY *classical_peer(struct kem_ctx *k, const unsigned char *in, size_t len) {
    const struct pqp_alg *a = k->key->alg;
    if (!pqp_hybrid_check_prefix(a, in))
        return NULL;
    /* synthetic: the padding after the classical share must be zero */
    if (a->layout != PQP_LAYOUT_OQS_HYBRID && !all_zero(in + a->classical_len, len - a->classical_len)) {
        PQP_RAISE(PQP_R_BAD_ENCODING, "%s: padding is not zero", a->name);
        return NULL;
    }
    return pqp_classical_peer(k->ctx, a->classical, in + pqp_hybrid_prefix_len(a), a->classical_len);
}

static int check_out(const char *what, const struct pqp_alg *a, size_t *len, size_t need) {
    if (len && *len < need) {
        PQP_RAISE(PQP_R_BUFFER_TOO_SMALL, "%s: %s buffer of %zu bytes, need %zu", a->name, what, *len, need);
        return 0;
    }
    return 1;
}

static int encapsulate(void *vctx, unsigned char *out, size_t *outlen, unsigned char *secret, size_t *secretlen) {
    struct kem_ctx *k = vctx;
    const struct pqp_alg *a = k->key->alg;
    if (!out || !secret) {
        if (outlen)
            *outlen = a->ct;
        if (secretlen)
            *secretlen = a->ss;
        return 1;
    }
    if (!k->key->pub) {
        PQP_RAISE(PQP_R_MISSING_KEY, "%s: no peer key share to encapsulate to", a->name);
        return 0;
    }
    if (!check_out("ciphertext", a, outlen, a->ct) || !check_out("secret", a, secretlen, a->ss))
        return 0;
    struct timespec start;
    pqp_now(&start);
    int ok = 0;
    size_t off = 0, soff = 0;
    EVP_PKEY *eph = NULL, *peer = NULL;
    if (a->classical) {
        if (!(peer = classical_peer(k, k->key->pub, a->pk)) || !(eph = pqp_classical_keygen(k->ctx, a->classical)))
            goto end;
        memset(out, 0, a->ct);
        size_t pre = pqp_hybrid_put_prefix(a, out);
        if (!pqp_classical_public(eph, out + pre, a->classical_len) ||
            !pqp_classical_derive(k->ctx, eph, peer, secret, a->classical_ss))
            goto end;
        off = pqp_hybrid_pq_offset(a);
        soff = a->classical_ss;
    }
    if (a->oqs && OQS_KEM_encaps(a->oqs_obj, out + off, secret + soff, k->key->pub + off) != OQS_SUCCESS) {
        PQP_RAISE(PQP_R_LIBOQS_FAILED, "%s encapsulation failed", a->oqs);
        goto end;
    }
    pqp_work_until(&start, a->ms[1]);
    ok = 1;
end:
    EVP_PKEY_free(eph);
    EVP_PKEY_free(peer);
    if (ok) {
        if (outlen)
            *outlen = a->ct;
        if (secretlen)
            *secretlen = a->ss;
    } else {
        OPENSSL_cleanse(secret, a->ss);
    }
    return ok;
}

static int decapsulate(void *vctx, unsigned char *out, size_t *outlen, const unsigned char *in, size_t inlen) {
    struct kem_ctx *k = vctx;
    const struct pqp_alg *a = k->key->alg;
    if (!out) {
        if (outlen)
            *outlen = a->ss;
        return 1;
    }
    if (inlen != a->ct) {
        PQP_RAISE(PQP_R_WRONG_LENGTH, "%s ciphertext is %zu bytes, expected %zu", a->name, inlen, a->ct);
        return 0;
    }
    if (!pqp_key_has_private(k->key)) {
        PQP_RAISE(PQP_R_MISSING_KEY, "%s: decapsulation needs the private key", a->name);
        return 0;
    }
    if (!check_out("secret", a, outlen, a->ss))
        return 0;
    struct timespec start;
    pqp_now(&start);
    size_t off = 0, soff = 0;
    if (a->classical) {
        EVP_PKEY *peer = classical_peer(k, in, inlen);
        int ok = peer && pqp_classical_derive(k->ctx, k->key->classical, peer, out, a->classical_ss);
        EVP_PKEY_free(peer);
        if (!ok)
            return 0;
        off = pqp_hybrid_pq_offset(a);
        soff = a->classical_ss;
    }
    if (a->oqs && OQS_KEM_decaps(a->oqs_obj, out + soff, in + off, k->key->sk) != OQS_SUCCESS) {
        OPENSSL_cleanse(out, a->ss);
        PQP_RAISE(PQP_R_LIBOQS_FAILED, "%s decapsulation failed", a->oqs);
        return 0;
    }
    pqp_work_until(&start, a->ms[2]);
    if (outlen)
        *outlen = a->ss;
    return 1;
}

#define FN(id, f) {id, (void (*)(void))(f)}
const OSSL_DISPATCH pqp_kem_functions[] = {
    FN(OSSL_FUNC_KEM_NEWCTX, newctx),
    FN(OSSL_FUNC_KEM_FREECTX, freectx),
    FN(OSSL_FUNC_KEM_DUPCTX, dupctx),
    FN(OSSL_FUNC_KEM_ENCAPSULATE_INIT, init),
    FN(OSSL_FUNC_KEM_ENCAPSULATE, encapsulate),
    FN(OSSL_FUNC_KEM_DECAPSULATE_INIT, init),
    FN(OSSL_FUNC_KEM_DECAPSULATE, decapsulate),
    FN(OSSL_FUNC_KEM_SET_CTX_PARAMS, set_ctx_params),
    FN(OSSL_FUNC_KEM_SETTABLE_CTX_PARAMS, settable_ctx_params),
    OSSL_DISPATCH_END,
};
