/*
 * Signatures: liboqs signing the message itself (no digest, as TLS 1.3 and X.509 use them),
 * synthetic ones (Ed25519 padded with zeros to the configured size, plus busy work), and OpenSSL's
 * own SLH-DSA (pure mode) offered as a TLS 1.3 signature scheme. One-shot and
 * streaming (the message is buffered) forms; the AlgorithmIdentifier for certificates.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <oqs/oqs.h>

#include "pqprov.h"

struct sig_ctx {
    struct pqp_ctx *ctx;
    struct pqp_key *key;
    unsigned char *msg; /* streaming: the message so far */
    size_t msg_len, msg_cap;
};

static void *newctx(void *provctx, const char *propq) {
    struct sig_ctx *s = OPENSSL_zalloc(sizeof *s);
    if (s)
        s->ctx = provctx;
    return s;
}

static void freectx(void *vctx) {
    struct sig_ctx *s = vctx;
    if (s)
        OPENSSL_free(s->msg);
    OPENSSL_free(s);
}

static void *dupctx(void *vctx) {
    struct sig_ctx *src = vctx, *s = OPENSSL_memdup(src, sizeof *src);
    if (s && src->msg && !(s->msg = OPENSSL_memdup(src->msg, src->msg_cap))) {
        OPENSSL_free(s);
        return NULL;
    }
    return s;
}

static int init(void *vctx, void *provkey, const OSSL_PARAM params[], int need_private) {
    struct sig_ctx *s = vctx;
    struct pqp_key *key = provkey;
    if (key) /* NULL: keep the key of a previous init */
        s->key = key;
    if (!s->key || s->key->alg->kind != PQP_SIG) {
        PQP_RAISE(PQP_R_MISSING_KEY, "not a pqprov signature key");
        return 0;
    }
    if (need_private ? !pqp_key_has_private(s->key) : !s->key->pub) {
        PQP_RAISE(PQP_R_MISSING_KEY, "%s: %s key needed", s->key->alg->name, need_private ? "private" : "public");
        return 0;
    }
    s->msg_len = 0;
    return 1;
}

static int sign_init(void *vctx, void *provkey, const OSSL_PARAM params[]) {
    return init(vctx, provkey, params, 1);
}

static int verify_init(void *vctx, void *provkey, const OSSL_PARAM params[]) {
    return init(vctx, provkey, params, 0);
}

static int no_digest(const char *mdname, const struct sig_ctx *s) {
    if (mdname && *mdname) {
        PQP_RAISE(PQP_R_UNSUPPORTED, "signatures of this provider take no digest (got %s)", mdname);
        return 0;
    }
    return 1;
}

static int digest_sign_init(void *vctx, const char *mdname, void *provkey, const OSSL_PARAM params[]) {
    return no_digest(mdname, vctx) && init(vctx, provkey, params, 1);
}

static int digest_verify_init(void *vctx, const char *mdname, void *provkey, const OSSL_PARAM params[]) {
    return no_digest(mdname, vctx) && init(vctx, provkey, params, 0);
}

static int sign(void *vctx, unsigned char *sig, size_t *siglen, size_t sigsize, const unsigned char *tbs,
                size_t tbslen) {
    struct sig_ctx *s = vctx;
    const struct pqp_alg *a = s->key->alg;
    if (!sig) {
        *siglen = a->sig;
        return 1;
    }
    if (sigsize < a->sig) {
        PQP_RAISE(PQP_R_BUFFER_TOO_SMALL, "%s: signature buffer of %zu bytes, need %zu", a->name, sigsize, a->sig);
        return 0;
    }
    struct timespec start;
    pqp_now(&start);
    if (a->oqs) {
        size_t len = sigsize;
        if (OQS_SIG_sign(a->oqs_obj, sig, &len, tbs, tbslen, s->key->sk) != OQS_SUCCESS) {
            PQP_RAISE(PQP_R_LIBOQS_FAILED, "%s signing failed", a->oqs);
            return 0;
        }
        *siglen = len;
        return 1;
    }
    /* OpenSSL signs: Ed25519 inside a synthetic signature, or SLH-DSA (pure, no digest) as is. */
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int native = a->layout == PQP_LAYOUT_NATIVE;
    size_t len = native ? sigsize : 64;
    int ok = md && EVP_DigestSignInit_ex(md, NULL, NULL, s->ctx->libctx, PQP_NOT_US, s->key->classical, NULL) > 0 &&
             EVP_DigestSign(md, sig, &len, tbs, tbslen) > 0 && (native || len == 64);
    EVP_MD_CTX_free(md);
    if (!ok) {
        PQP_RAISE(PQP_R_CLASSICAL_FAILED, "%s: %s signing failed", a->name, a->classical);
        return 0;
    }
    if (native) {
        *siglen = len;
        return 1;
    }
    memset(sig + 64, 0, a->sig - 64);
    pqp_work_until(&start, a->ms[1]);
    *siglen = a->sig;
    return 1;
}

static int all_zero(const unsigned char *p, size_t n) {
    unsigned char acc = 0;
    while (n--)
        acc |= *p++;
    return acc == 0;
}

static int verify(void *vctx, const unsigned char *sig, size_t siglen, const unsigned char *tbs, size_t tbslen) {
    struct sig_ctx *s = vctx;
    const struct pqp_alg *a = s->key->alg;
    struct timespec start;
    pqp_now(&start);
    if (a->oqs) {
        if (siglen > a->sig || OQS_SIG_verify(a->oqs_obj, tbs, tbslen, sig, siglen, s->key->pub) != OQS_SUCCESS) {
            PQP_RAISE(PQP_R_VERIFY_FAILED, "%s signature does not verify", a->name);
            return 0;
        }
        return 1;
    }
    int ok = 0, native = a->layout == PQP_LAYOUT_NATIVE;
    EVP_PKEY *pub = NULL;
    EVP_MD_CTX *md = NULL;
    if (native ? siglen > a->sig
               : siglen != a->sig || !all_zero(sig + 64, siglen - 64) ||
                     !all_zero(s->key->pub + a->classical_len, a->pk - a->classical_len))
        goto end;
    pub = pqp_classical_peer(s->ctx, a->classical, s->key->pub, a->classical_len);
    md = EVP_MD_CTX_new();
    ok = pub && md && EVP_DigestVerifyInit_ex(md, NULL, NULL, s->ctx->libctx, PQP_NOT_US, pub, NULL) > 0 &&
         EVP_DigestVerify(md, sig, native ? siglen : 64, tbs, tbslen) == 1;
    pqp_work_until(&start, a->ms[2]);
end:
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pub);
    if (!ok)
        PQP_RAISE(PQP_R_VERIFY_FAILED, "%s signature does not verify", a->name);
    return ok;
}

/* Streaming: the whole message is needed by these algorithms, so it is buffered. */
static int update(void *vctx, const unsigned char *data, size_t len) {
    struct sig_ctx *s = vctx;
    if (s->msg_len + len > s->msg_cap) {
        size_t cap = 2 * (s->msg_len + len) + 64;
        unsigned char *m = OPENSSL_realloc(s->msg, cap);
        if (!m)
            return 0;
        s->msg = m;
        s->msg_cap = cap;
    }
    if (len)
        memcpy(s->msg + s->msg_len, data, len);
    s->msg_len += len;
    return 1;
}

static int sign_final(void *vctx, unsigned char *sig, size_t *siglen, size_t sigsize) {
    struct sig_ctx *s = vctx;
    return sign(vctx, sig, siglen, sigsize, s->msg, s->msg_len);
}

static int verify_final(void *vctx, const unsigned char *sig, size_t siglen) {
    struct sig_ctx *s = vctx;
    return verify(vctx, sig, siglen, s->msg, s->msg_len);
}

static int get_ctx_params(void *vctx, OSSL_PARAM params[]) {
    struct sig_ctx *s = vctx;
    OSSL_PARAM *p = OSSL_PARAM_locate(params, OSSL_SIGNATURE_PARAM_ALGORITHM_ID);
    if (p && s->key) {
        unsigned char der[64];
        size_t n = pqp_der_algorithm_id(s->key->alg, der, sizeof der);
        if (!n || !OSSL_PARAM_set_octet_string(p, der, n))
            return 0;
    }
    return 1;
}

static const OSSL_PARAM *gettable_ctx_params(void *vctx, void *provctx) {
    static const OSSL_PARAM gettable[] = {
        OSSL_PARAM_octet_string(OSSL_SIGNATURE_PARAM_ALGORITHM_ID, NULL, 0),
        OSSL_PARAM_END,
    };
    return gettable;
}

static int set_ctx_params(void *vctx, const OSSL_PARAM params[]) {
    return 1;
}

static const OSSL_PARAM *settable_ctx_params(void *vctx, void *provctx) {
    static const OSSL_PARAM none[] = {OSSL_PARAM_END};
    return none;
}

#define FN(id, f) {id, (void (*)(void))(f)}
const OSSL_DISPATCH pqp_signature_functions[] = {
    FN(OSSL_FUNC_SIGNATURE_NEWCTX, newctx),
    FN(OSSL_FUNC_SIGNATURE_FREECTX, freectx),
    FN(OSSL_FUNC_SIGNATURE_DUPCTX, dupctx),
    FN(OSSL_FUNC_SIGNATURE_SIGN_INIT, sign_init),
    FN(OSSL_FUNC_SIGNATURE_SIGN, sign),
    FN(OSSL_FUNC_SIGNATURE_VERIFY_INIT, verify_init),
    FN(OSSL_FUNC_SIGNATURE_VERIFY, verify),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT, digest_sign_init),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_SIGN, sign),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE, update),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL, sign_final),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_INIT, digest_verify_init),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_VERIFY, verify),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_UPDATE, update),
    FN(OSSL_FUNC_SIGNATURE_DIGEST_VERIFY_FINAL, verify_final),
    FN(OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS, get_ctx_params),
    FN(OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS, gettable_ctx_params),
    FN(OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS, set_ctx_params),
    FN(OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS, settable_ctx_params),
    OSSL_DISPATCH_END,
};
