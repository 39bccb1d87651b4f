/* Encoders for signature keys: SubjectPublicKeyInfo and PKCS#8 PrivateKeyInfo in DER and PEM,
 * and a text dump (`openssl pkey -text`). */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/pem.h>

#include "pqprov.h"

enum form { SPKI_DER, SPKI_PEM, P8_DER, P8_PEM, TEXT };

static void *newctx(void *provctx) {
    return provctx;
}

static void freectx(void *ctx) {
}

/* PKCS#8 is written unencrypted; asking for a cipher is an error rather than a silent plaintext key. */
static int set_ctx_params(void *ctx, const OSSL_PARAM params[]) {
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_ENCODER_PARAM_CIPHER);
    const char *cipher = NULL;
    if (p && OSSL_PARAM_get_utf8_string_ptr(p, &cipher) && cipher && *cipher) {
        PQP_RAISE(PQP_R_UNSUPPORTED, "encrypted private keys (%s) are not supported", cipher);
        return 0;
    }
    return 1;
}

static const OSSL_PARAM *settable_ctx_params(void *provctx) {
    static const OSSL_PARAM settable[] = {
        OSSL_PARAM_utf8_string(OSSL_ENCODER_PARAM_CIPHER, NULL, 0),
        OSSL_PARAM_END,
    };
    return settable;
}

static int does_public(void *provctx, int selection) {
    return (selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) != 0;
}

static int does_private(void *provctx, int selection) {
    return (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) != 0;
}

static int does_any(void *provctx, int selection) {
    return (selection & OSSL_KEYMGMT_SELECT_KEYPAIR) != 0 || selection == 0;
}

static int write_text(BIO *out, const struct pqp_key *key, int selection) {
    const struct pqp_alg *a = key->alg;
    int priv = (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && key->sk;
    BIO_printf(out, "%s %s-Key:\n", a->name, priv ? "Private" : "Public");
    const struct { const char *label; const unsigned char *data; size_t len; } parts[] = {
        {"priv", priv ? key->sk : NULL, key->sk_len},
        {"pub", key->pub, a->pk},
    };
    for (size_t i = 0; i < 2; i++) {
        if (!parts[i].data)
            continue;
        BIO_printf(out, "%s:", parts[i].label);
        for (size_t j = 0; j < parts[i].len; j++)
            BIO_printf(out, "%s%02x%s", j % 15 == 0 ? "\n    " : "", parts[i].data[j], j + 1 < parts[i].len ? ":" : "");
        BIO_printf(out, "\n");
    }
    return 1;
}

static int encode(enum form form, void *provctx, OSSL_CORE_BIO *cout, const void *obj, int selection) {
    struct pqp_ctx *ctx = provctx;
    const struct pqp_key *key = obj;
    if (!key) { /* keys of other providers are not ours to encode */
        PQP_RAISE(PQP_R_UNSUPPORTED, "can only encode pqprov keys");
        return 0;
    }
    BIO *out = BIO_new_from_core_bio(ctx->libctx, cout);
    if (!out)
        return 0;
    const struct pqp_alg *a = key->alg;
    unsigned char *der = NULL;
    size_t n = 0;
    int ok = 0;
    if (form == TEXT) {
        ok = write_text(out, key, selection);
    } else if (form == SPKI_DER || form == SPKI_PEM) {
        if (!key->pub)
            PQP_RAISE(PQP_R_MISSING_KEY, "%s key has no public part", a->name);
        else if ((n = pqp_der_spki(a, key->pub, a->pk, &der)))
            ok = form == SPKI_DER ? BIO_write(out, der, (int)n) == (int)n
                                  : PEM_write_bio(out, PEM_STRING_PUBLIC, "", der, (long)n) > 0;
        OPENSSL_free(der);
    } else {
        /* sk || pk; OpenSSL's own keys in their standard form (the raw private key holds pk). */
        size_t pk = a->layout == PQP_LAYOUT_NATIVE ? 0 : a->pk, body_len = key->sk_len + pk;
        unsigned char *body = key->sk && key->pub ? OPENSSL_secure_malloc(body_len) : NULL;
        if (!body) {
            PQP_RAISE(PQP_R_MISSING_KEY, "%s key has no private part", a->name);
        } else {
            memcpy(body, key->sk, key->sk_len);
            memcpy(body + key->sk_len, key->pub, pk);
            if ((n = pqp_der_p8(a, body, body_len, &der)))
                ok = form == P8_DER ? BIO_write(out, der, (int)n) == (int)n
                                    : PEM_write_bio(out, PEM_STRING_PKCS8INF, "", der, (long)n) > 0;
            OPENSSL_secure_clear_free(der, n);
            OPENSSL_secure_clear_free(body, body_len);
        }
    }
    BIO_free(out);
    return ok;
}

#define ENCODER(form_, does)                                                                        \
    static int encode_##form_(void *ctx, OSSL_CORE_BIO *cout, const void *obj_raw,                   \
                              const OSSL_PARAM obj_abstract[], int selection, OSSL_PASSPHRASE_CALLBACK *cb, \
                              void *cbarg) {                                                        \
        return encode(form_, ctx, cout, obj_raw, selection);                                        \
    }                                                                                               \
    static int does_##form_(void *provctx, int selection) { return does(provctx, selection); }

ENCODER(SPKI_DER, does_public)
ENCODER(SPKI_PEM, does_public)
ENCODER(P8_DER, does_private)
ENCODER(P8_PEM, does_private)
ENCODER(TEXT, does_any)

#define FN(id, f) {id, (void (*)(void))(f)}
#define TABLE(name, form_)                                                                          \
    const OSSL_DISPATCH name[] = {FN(OSSL_FUNC_ENCODER_NEWCTX, newctx), FN(OSSL_FUNC_ENCODER_FREECTX, freectx), \
                                  FN(OSSL_FUNC_ENCODER_DOES_SELECTION, does_##form_),                \
                                  FN(OSSL_FUNC_ENCODER_ENCODE, encode_##form_),                    \
                                  FN(OSSL_FUNC_ENCODER_SET_CTX_PARAMS, set_ctx_params),            \
                                  FN(OSSL_FUNC_ENCODER_SETTABLE_CTX_PARAMS, settable_ctx_params), OSSL_DISPATCH_END};

TABLE(pqp_spki_der_encoder, SPKI_DER)
TABLE(pqp_spki_pem_encoder, SPKI_PEM)
TABLE(pqp_p8_der_encoder, P8_DER)
TABLE(pqp_p8_pem_encoder, P8_PEM)
TABLE(pqp_text_encoder, TEXT)
