/*
 * Key management: one key object for every algorithm (see struct pqp_key), generation with or
 * without a TLS group name, the encoded public key (TLS key share) in and out, import/export,
 * match, dup and load (decoders). Per-algorithm dispatch tables only differ in new/gen_init.
 */
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <oqs/oqs.h>

#include "pqprov.h"

struct gen_ctx {
    struct pqp_ctx *ctx;
    const struct pqp_alg *alg;
    int selection;
};

struct pqp_key *pqp_key_new(struct pqp_ctx *ctx, const struct pqp_alg *alg) {
    struct pqp_key *key = OPENSSL_zalloc(sizeof *key);
    if (key) {
        key->alg = alg;
        key->ctx = ctx;
    }
    return key;
}

void pqp_key_free(struct pqp_key *key) {
    if (!key)
        return;
    OPENSSL_free(key->pub);
    OPENSSL_clear_free(key->sk, key->sk_len);
    EVP_PKEY_free(key->classical);
    OPENSSL_free(key);
}

int pqp_key_has_private(const struct pqp_key *key) {
    if (key->alg->layout == PQP_LAYOUT_PAD || key->alg->layout == PQP_LAYOUT_NATIVE)
        return key->classical != NULL;
    if (key->alg->layout == PQP_LAYOUT_OQS_HYBRID)
        return key->classical != NULL && key->sk != NULL;
    return key->sk != NULL;
}

/* A public key / key share as received: exactly the catalog's length and well-formed framing. */
int pqp_key_set_public(struct pqp_key *key, const unsigned char *pub, size_t len) {
    const struct pqp_alg *a = key->alg;
    if (len != a->pk) {
        PQP_RAISE(PQP_R_WRONG_LENGTH, "%s public key is %zu bytes, expected %zu", a->name, len, a->pk);
        return 0;
    }
    if (!pqp_hybrid_check_prefix(a, pub))
        return 0;
    unsigned char *copy = OPENSSL_memdup(pub, len);
    if (!copy)
        return 0;
    OPENSSL_free(key->pub);
    key->pub = copy;
    return 1;
}

int pqp_key_set_private(struct pqp_key *key, const unsigned char *sk, size_t len) {
    const struct pqp_alg *a = key->alg;
    if (a->layout == PQP_LAYOUT_NATIVE || (a->layout == PQP_LAYOUT_PAD && a->kind == PQP_SIG)) {
        /* Ed25519 seed, or OpenSSL's raw SLH-DSA private key (which holds the public key too) */
        EVP_PKEY *k = a->layout == PQP_LAYOUT_NATIVE || len == 32
                          ? EVP_PKEY_new_raw_private_key_ex(key->ctx->libctx, a->classical, PQP_NOT_US, sk, len)
                          : NULL;
        if (!k) {
            PQP_RAISE(PQP_R_BAD_ENCODING, "%s: not a valid %s private key", a->name, a->classical);
            return 0;
        }
        EVP_PKEY_free(key->classical);
        key->classical = k;
        if (a->layout == PQP_LAYOUT_NATIVE && !key->pub) {
            unsigned char *pub = OPENSSL_malloc(a->pk);
            if (!pub || !pqp_classical_public(k, pub, a->pk)) {
                OPENSSL_free(pub);
                return 0;
            }
            key->pub = pub;
        }
    } else if (a->layout != PQP_LAYOUT_PURE) {
        PQP_RAISE(PQP_R_UNSUPPORTED, "%s: hybrid and synthetic KEM keys are ephemeral, no import", a->name);
        return 0;
    } else if (len != a->oqs_sk) {
        PQP_RAISE(PQP_R_WRONG_LENGTH, "%s private key is %zu bytes, expected %zu", a->name, len, a->oqs_sk);
        return 0;
    }
    unsigned char *copy = OPENSSL_memdup(sk, len);
    if (!copy)
        return 0;
    OPENSSL_clear_free(key->sk, key->sk_len);
    key->sk = copy;
    key->sk_len = len;
    return 1;
}

/* ---- generation ------------------------------------------------------------------------------ */

static int generate(struct pqp_key *key) {
    const struct pqp_alg *a = key->alg;
    struct timespec start;
    pqp_now(&start);
    key->pub = OPENSSL_zalloc(a->pk); /* zero: the padding of synthetic keys */
    if (!key->pub)
        return 0;
    size_t off = 0;
    if (a->classical) {
        key->classical = pqp_classical_keygen(key->ctx, a->classical);
        if (!key->classical)
            return 0;
        size_t pre = pqp_hybrid_put_prefix(a, key->pub);
        if (!pqp_classical_public(key->classical, key->pub + pre, a->classical_len))
            return 0;
        off = pqp_hybrid_pq_offset(a);
        if (a->kind == PQP_SIG) { /* keep the raw private key (Ed25519 seed, SLH-DSA key) for PKCS#8 */
            size_t n = 0;
            if (EVP_PKEY_get_raw_private_key(key->classical, NULL, &n) <= 0 || !(key->sk = OPENSSL_malloc(n)))
                return 0;
            key->sk_len = n;
            if (EVP_PKEY_get_raw_private_key(key->classical, key->sk, &key->sk_len) <= 0)
                return 0;
        }
    }
    if (a->oqs) {
        key->sk_len = a->oqs_sk;
        key->sk = OPENSSL_malloc(a->oqs_sk);
        if (!key->sk)
            return 0;
        int rc = a->kind == PQP_KEM ? OQS_KEM_keypair(a->oqs_obj, key->pub + off, key->sk)
                                    : OQS_SIG_keypair(a->oqs_obj, key->pub + off, key->sk);
        if (rc != OQS_SUCCESS) {
            PQP_RAISE(PQP_R_LIBOQS_FAILED, "%s key generation failed", a->oqs);
            return 0;
        }
    }
    pqp_work_until(&start, a->ms[0]);
    return 1;
}

static int gen_set_params(void *genctx, const OSSL_PARAM params[]) {
    struct gen_ctx *g = genctx;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_PKEY_PARAM_GROUP_NAME);
    const char *name = NULL;
    if (p && (!OSSL_PARAM_get_utf8_string_ptr(p, &name) || strcasecmp(name, g->alg->name) != 0)) {
        PQP_RAISE(PQP_R_WRONG_GROUP, "group %s is not %s", name ? name : "?", g->alg->name);
        return 0;
    }
    return 1;
}

static const OSSL_PARAM *gen_settable_params(void *genctx, void *provctx) {
    static const OSSL_PARAM settable[] = {
        OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, NULL, 0),
        OSSL_PARAM_END,
    };
    return settable;
}

static void *gen_init(void *provctx, const struct pqp_alg *alg, int selection, const OSSL_PARAM params[]) {
    struct gen_ctx *g = OPENSSL_zalloc(sizeof *g);
    if (!g)
        return NULL;
    g->ctx = provctx;
    g->alg = alg;
    g->selection = selection;
    if (!gen_set_params(g, params)) {
        OPENSSL_free(g);
        return NULL;
    }
    return g;
}

static void *gen(void *genctx, OSSL_CALLBACK *cb, void *cbarg) {
    struct gen_ctx *g = genctx;
    struct pqp_key *key = pqp_key_new(g->ctx, g->alg);
    /* Parameter generation (a TLS server before it reads the client's share): an empty key. */
    if (key && (g->selection & OSSL_KEYMGMT_SELECT_KEYPAIR) && !generate(key)) {
        pqp_key_free(key);
        return NULL;
    }
    return key;
}

static void gen_cleanup(void *genctx) {
    OPENSSL_free(genctx);
}

static void *load(const void *reference, size_t reference_sz) {
    struct pqp_key *key = NULL;
    if (reference_sz == sizeof key) { /* the decoder hands over its object */
        key = *(struct pqp_key **)reference;
        *(struct pqp_key **)reference = NULL;
    }
    return key;
}

/* ---- parameters ------------------------------------------------------------------------------ */

static int get_params(void *keydata, OSSL_PARAM params[]) {
    struct pqp_key *key = keydata;
    const struct pqp_alg *a = key->alg;
    OSSL_PARAM *p;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_BITS)) && !OSSL_PARAM_set_int(p, (int)(8 * a->pk)))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_SECURITY_BITS)) && !OSSL_PARAM_set_int(p, a->secbits))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_MAX_SIZE)) &&
        !OSSL_PARAM_set_int(p, (int)(a->kind == PQP_SIG ? a->sig : a->ct)))
        return 0;
    if (a->kind == PQP_SIG && (p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_MANDATORY_DIGEST)) &&
        !OSSL_PARAM_set_utf8_string(p, "")) /* signs the message itself, no digest */
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY)) ||
        (p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_PUB_KEY))) {
        if (!key->pub) {
            PQP_RAISE(PQP_R_MISSING_KEY, "%s key has no public part", a->name);
            return 0;
        }
        if (!OSSL_PARAM_set_octet_string(p, key->pub, a->pk))
            return 0;
        /* Both names may be asked for at once. */
        OSSL_PARAM *q = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_PUB_KEY);
        if (q && q != p && !OSSL_PARAM_set_octet_string(q, key->pub, a->pk))
            return 0;
    }
    return 1;
}

static const OSSL_PARAM *gettable_params(void *provctx) {
    static const OSSL_PARAM gettable[] = {
        OSSL_PARAM_int(OSSL_PKEY_PARAM_BITS, NULL),
        OSSL_PARAM_int(OSSL_PKEY_PARAM_SECURITY_BITS, NULL),
        OSSL_PARAM_int(OSSL_PKEY_PARAM_MAX_SIZE, NULL),
        OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_MANDATORY_DIGEST, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0),
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, NULL, 0),
        OSSL_PARAM_END,
    };
    return gettable;
}

static int set_params(void *keydata, const OSSL_PARAM params[]) {
    struct pqp_key *key = keydata;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY);
    const void *pub;
    size_t len;
    if (!p)
        return 1;
    if (!OSSL_PARAM_get_octet_string_ptr(p, &pub, &len))
        return 0;
    return pqp_key_set_public(key, pub, len);
}

static const OSSL_PARAM *settable_params(void *provctx) {
    static const OSSL_PARAM settable[] = {
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0),
        OSSL_PARAM_END,
    };
    return settable;
}

/* ---- has / match / import / export / dup ------------------------------------------------------ */

static int has(const void *keydata, int selection) {
    const struct pqp_key *key = keydata;
    if (!key)
        return 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && !key->pub)
        return 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && !pqp_key_has_private(key))
        return 0;
    return 1;
}

static int match(const void *keydata1, const void *keydata2, int selection) {
    const struct pqp_key *a = keydata1, *b = keydata2;
    if (a->alg != b->alg)
        return 0;
    if (selection & OSSL_KEYMGMT_SELECT_KEYPAIR) {
        if (a->pub && b->pub)
            return CRYPTO_memcmp(a->pub, b->pub, a->alg->pk) == 0;
        if (a->sk && b->sk)
            return a->sk_len == b->sk_len && CRYPTO_memcmp(a->sk, b->sk, a->sk_len) == 0;
        return 0;
    }
    return 1;
}

static int import(void *keydata, int selection, const OSSL_PARAM params[]) {
    struct pqp_key *key = keydata;
    const OSSL_PARAM *p;
    const void *data;
    size_t len;
    int any = 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && (p = OSSL_PARAM_locate_const(params, OSSL_PKEY_PARAM_PUB_KEY))) {
        if (!OSSL_PARAM_get_octet_string_ptr(p, &data, &len) || !pqp_key_set_public(key, data, len))
            return 0;
        any = 1;
    }
    if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && (p = OSSL_PARAM_locate_const(params, OSSL_PKEY_PARAM_PRIV_KEY))) {
        if (!OSSL_PARAM_get_octet_string_ptr(p, &data, &len) || !pqp_key_set_private(key, data, len))
            return 0;
        any = 1;
    }
    return any || !(selection & OSSL_KEYMGMT_SELECT_KEYPAIR);
}

static const OSSL_PARAM key_types[] = {
    OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, NULL, 0),
    OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PRIV_KEY, NULL, 0),
    OSSL_PARAM_END,
};

static const OSSL_PARAM *import_types(int selection) {
    return key_types;
}

static int export(void *keydata, int selection, OSSL_CALLBACK *cb, void *cbarg) {
    struct pqp_key *key = keydata;
    OSSL_PARAM params[3];
    int n = 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && key->pub)
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, key->pub, key->alg->pk);
    if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && key->sk)
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PRIV_KEY, key->sk, key->sk_len);
    params[n] = OSSL_PARAM_construct_end();
    return cb(params, cbarg);
}

static const OSSL_PARAM *export_types(int selection) {
    return key_types;
}

static void *dup(const void *keydata, int selection) {
    const struct pqp_key *src = keydata;
    struct pqp_key *key = pqp_key_new(src->ctx, src->alg);
    if (!key)
        return NULL;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && src->pub && !(key->pub = OPENSSL_memdup(src->pub, src->alg->pk)))
        goto err;
    if (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) {
        if (src->sk && !(key->sk = OPENSSL_memdup(src->sk, src->sk_len)))
            goto err;
        key->sk_len = src->sk ? src->sk_len : 0;
        if (src->classical && EVP_PKEY_up_ref(src->classical)) /* immutable once generated */
            key->classical = src->classical;
    }
    return key;
err:
    pqp_key_free(key);
    return NULL;
}

/* ---- per-algorithm dispatch tables ----------------------------------------------------------- */

#define FN(id, f) {id, (void (*)(void))(f)}
#define COMMON                                                                                     \
    FN(OSSL_FUNC_KEYMGMT_FREE, pqp_key_free), FN(OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS, gen_set_params),   \
    FN(OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS, gen_settable_params), FN(OSSL_FUNC_KEYMGMT_GEN, gen),   \
    FN(OSSL_FUNC_KEYMGMT_GEN_CLEANUP, gen_cleanup), FN(OSSL_FUNC_KEYMGMT_LOAD, load),                 \
    FN(OSSL_FUNC_KEYMGMT_GET_PARAMS, get_params), FN(OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, gettable_params), \
    FN(OSSL_FUNC_KEYMGMT_SET_PARAMS, set_params), FN(OSSL_FUNC_KEYMGMT_SETTABLE_PARAMS, settable_params), \
    FN(OSSL_FUNC_KEYMGMT_HAS, has), FN(OSSL_FUNC_KEYMGMT_MATCH, match), FN(OSSL_FUNC_KEYMGMT_IMPORT, import), \
    FN(OSSL_FUNC_KEYMGMT_IMPORT_TYPES, import_types), FN(OSSL_FUNC_KEYMGMT_EXPORT, export),           \
    FN(OSSL_FUNC_KEYMGMT_EXPORT_TYPES, export_types), FN(OSSL_FUNC_KEYMGMT_DUP, dup)

#define SLOT(n)                                                                                    \
    static void *new_##n(void *provctx) { return pqp_key_new(provctx, &pqp_algs[n]); }             \
    static void *gen_init_##n(void *provctx, int selection, const OSSL_PARAM params[]) {           \
        return gen_init(provctx, &pqp_algs[n], selection, params);                                 \
    }                                                                                              \
    static const OSSL_DISPATCH keymgmt_##n[] = {FN(OSSL_FUNC_KEYMGMT_NEW, new_##n),                \
                                                FN(OSSL_FUNC_KEYMGMT_GEN_INIT, gen_init_##n), COMMON, \
                                                OSSL_DISPATCH_END};
PQP_FOR_EACH_SLOT(SLOT)

#define SLOT_PTR(n) keymgmt_##n,
const OSSL_DISPATCH *pqp_keymgmt_dispatch[] = {PQP_FOR_EACH_SLOT(SLOT_PTR)};
