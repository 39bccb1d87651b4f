/* Decoders for signature keys: DER SubjectPublicKeyInfo and PKCS#8 PrivateKeyInfo (OpenSSL's own
 * decoders turn PEM into DER first). The algorithm comes from the OID; input that is not one of
 * ours is passed over so that other decoders can try it. */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/core_object.h>
#include <openssl/crypto.h>

#include "pqprov.h"

#define PQP_MAX_DECODE (1 << 20)

static void *newctx(void *provctx) {
    return provctx;
}

static void freectx(void *ctx) {
}

static int does_selection(void *provctx, int selection) {
    return selection == 0 || (selection & OSSL_KEYMGMT_SELECT_KEYPAIR) != 0;
}

static unsigned char *read_all(struct pqp_ctx *ctx, OSSL_CORE_BIO *cin, size_t *len, size_t *cap) {
    BIO *in = BIO_new_from_core_bio(ctx->libctx, cin);
    size_t n = 0, size = 8192;
    unsigned char *buf = in ? OPENSSL_malloc(size) : NULL;
    int r;
    while (buf && (r = BIO_read(in, buf + n, (int)(size - n))) > 0) {
        n += (size_t)r;
        if (n == size) {
            unsigned char *bigger = size < PQP_MAX_DECODE ? OPENSSL_clear_realloc(buf, size, 2 * size) : NULL;
            if (!bigger) { /* larger than any key of ours: not ours */
                OPENSSL_clear_free(buf, size);
                buf = NULL;
                break;
            }
            buf = bigger;
            size *= 2;
        }
    }
    BIO_free(in);
    *len = n;
    *cap = size;
    return buf;
}

static int decode(int private, void *vctx, OSSL_CORE_BIO *cin, int selection, OSSL_CALLBACK *data_cb,
                  void *data_cbarg) {
    struct pqp_ctx *ctx = vctx;
    size_t len, cap, body_len;
    const unsigned char *body;
    unsigned char *der = read_all(ctx, cin, &len, &cap);
    if (!der)
        return 1; /* unreadable or too big for a key of ours: let others try */
    const struct pqp_alg *alg = private ? pqp_der_parse_p8(der, len, &body, &body_len)
                                        : pqp_der_parse_spki(der, len, &body, &body_len);
    struct pqp_key *key = alg ? pqp_key_new(ctx, alg) : NULL;
    int ok = 1; /* not ours: empty-handed, let other decoders try */
    if (key) {
        int native = alg->layout == PQP_LAYOUT_NATIVE; /* raw private key only; it holds the public key */
        size_t sk_len = native ? body_len : body_len > alg->pk ? body_len - alg->pk : 0;
        if (private ? sk_len && pqp_key_set_private(key, body, sk_len) &&
                          (native || pqp_key_set_public(key, body + sk_len, alg->pk))
                    : pqp_key_set_public(key, body, body_len)) {
            int type = OSSL_OBJECT_PKEY;
            OSSL_PARAM params[] = {
                OSSL_PARAM_construct_int(OSSL_OBJECT_PARAM_TYPE, &type),
                OSSL_PARAM_construct_utf8_string(OSSL_OBJECT_PARAM_DATA_TYPE, (char *)alg->name, 0),
                OSSL_PARAM_construct_octet_string(OSSL_OBJECT_PARAM_REFERENCE, &key, sizeof key),
                OSSL_PARAM_construct_end(),
            };
            PQP_DEBUG("decoded a %s %s key", alg->name, private ? "private" : "public");
            ok = data_cb(params, data_cbarg);
        }
    }
    pqp_key_free(key); /* NULL when the key manager's load() took it */
    OPENSSL_clear_free(der, cap);
    return ok;
}

static int decode_spki(void *vctx, OSSL_CORE_BIO *cin, int selection, OSSL_CALLBACK *data_cb, void *data_cbarg,
                       OSSL_PASSPHRASE_CALLBACK *pw_cb, void *pw_cbarg) {
    return decode(0, vctx, cin, selection, data_cb, data_cbarg);
}

static int decode_p8(void *vctx, OSSL_CORE_BIO *cin, int selection, OSSL_CALLBACK *data_cb, void *data_cbarg,
                     OSSL_PASSPHRASE_CALLBACK *pw_cb, void *pw_cbarg) {
    return decode(1, vctx, cin, selection, data_cb, data_cbarg);
}

#define FN(id, f) {id, (void (*)(void))(f)}
const OSSL_DISPATCH pqp_spki_decoder[] = {
    FN(OSSL_FUNC_DECODER_NEWCTX, newctx), FN(OSSL_FUNC_DECODER_FREECTX, freectx),
    FN(OSSL_FUNC_DECODER_DOES_SELECTION, does_selection), FN(OSSL_FUNC_DECODER_DECODE, decode_spki),
    OSSL_DISPATCH_END,
};
const OSSL_DISPATCH pqp_p8_decoder[] = {
    FN(OSSL_FUNC_DECODER_NEWCTX, newctx), FN(OSSL_FUNC_DECODER_FREECTX, freectx),
    FN(OSSL_FUNC_DECODER_DOES_SELECTION, does_selection), FN(OSSL_FUNC_DECODER_DECODE, decode_p8),
    OSSL_DISPATCH_END,
};
