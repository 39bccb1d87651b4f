/* The classical halves, done by OpenSSL itself (the default provider, reached through our child
 * library context): X25519/X448/ECDH key shares and secrets, Ed25519 for synthetic signatures. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "pqprov.h"

static int is_ec(const char *name) {
    return !strncmp(name, "P-", 2);
}

EVP_PKEY *pqp_classical_keygen(struct pqp_ctx *ctx, const char *name) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(ctx->libctx, is_ec(name) ? "EC" : name, PQP_NOT_US);
    if (pctx && EVP_PKEY_keygen_init(pctx) > 0 && (!is_ec(name) || EVP_PKEY_CTX_set_group_name(pctx, name) > 0))
        EVP_PKEY_keygen(pctx, &key);
    EVP_PKEY_CTX_free(pctx);
    if (!key)
        PQP_RAISE(PQP_R_CLASSICAL_FAILED, "%s key generation failed", name);
    return key;
}

/* The public half as it goes on the wire: raw X25519/X448/Ed25519/SLH-DSA key or uncompressed EC point. */
int pqp_classical_public(EVP_PKEY *key, unsigned char *out, size_t len) {
    size_t n = len;
    ERR_set_mark();
    int ok = EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, len, &n) && n == len;
    ERR_pop_to_mark();
    if (ok)
        return 1;
    if (EVP_PKEY_get_raw_public_key(key, out, &n) > 0 && n == len) /* Ed25519, SLH-DSA: raw form only */
        return 1;
    PQP_RAISE(PQP_R_CLASSICAL_FAILED, "cannot encode the classical public key");
    return 0;
}

EVP_PKEY *pqp_classical_peer(struct pqp_ctx *ctx, const char *name, const unsigned char *pub, size_t len) {
    EVP_PKEY *peer = NULL;
    if (!is_ec(name)) {
        peer = EVP_PKEY_new_raw_public_key_ex(ctx->libctx, name, PQP_NOT_US, pub, len);
    } else {
        EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(ctx->libctx, "EC", PQP_NOT_US);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)name, 0),
            OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)pub, len),
            OSSL_PARAM_construct_end(),
        };
        if (pctx && EVP_PKEY_fromdata_init(pctx) > 0)
            EVP_PKEY_fromdata(pctx, &peer, EVP_PKEY_PUBLIC_KEY, params);
        EVP_PKEY_CTX_free(pctx);
    }
    if (!peer)
        PQP_RAISE(PQP_R_CLASSICAL_FAILED, "invalid %s public key", name);
    return peer;
}

int pqp_classical_derive(struct pqp_ctx *ctx, EVP_PKEY *own, EVP_PKEY *peer, unsigned char *ss, size_t len) {
    EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_pkey(ctx->libctx, own, PQP_NOT_US);
    size_t n = len;
    int ok = pctx && EVP_PKEY_derive_init(pctx) > 0 && EVP_PKEY_derive_set_peer(pctx, peer) > 0 &&
             EVP_PKEY_derive(pctx, ss, &n) > 0 && n == len;
    EVP_PKEY_CTX_free(pctx);
    if (!ok)
        PQP_RAISE(PQP_R_CLASSICAL_FAILED, "classical key agreement failed");
    return ok;
}

/* Wire sizes of the classical halves (RFC 7748, SEC 1 uncompressed points, RFC 8032). A table
 * rather than a throw-away key: the provider is set up before OpenSSL's own may be reachable. */
int pqp_classical_sizes(struct pqp_ctx *ctx, const char *name, size_t *pub, size_t *ss) {
    static const struct { const char *name; size_t pub, ss; } sizes[] = {
        {"X25519", 32, 32}, {"X448", 56, 56}, {"P-256", 65, 32}, {"P-384", 97, 48}, {"P-521", 133, 66},
        {"ED25519", 32, 0},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (!strcmp(sizes[i].name, name)) {
            *pub = sizes[i].pub;
            *ss = sizes[i].ss;
            return 1;
        }
    PQP_RAISE(PQP_R_UNSUPPORTED, "unknown classical algorithm %s", name);
    return 0;
}
