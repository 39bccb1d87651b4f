/*
 * test_pqprov PATH/TO/pqprov.so — pqprov through OpenSSL's EVP API, as libssl and the X.509 code
 * use it (ctest runs it under ASan/UBSan):
 *   - every TLS group: both sides derive the same secret; a tampered ciphertext does not give it;
 *     a key share or ciphertext of the wrong length is refused (an error, not a crash);
 *   - every TLS signature algorithm: signatures verify, tampered ones do not; keys survive
 *     SubjectPublicKeyInfo / PKCS#8 (DER and PEM) round trips;
 *   - a bare KEM (Classic McEliece) and a synthetic instance configured through the environment.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/decoder.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

static int failures;
static OSSL_LIB_CTX *libctx;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            ERR_print_errors_fp(stderr);                                                           \
        }                                                                                          \
        ERR_clear_error();                                                                         \
    } while (0)

static EVP_PKEY *keygen(const char *alg, const char *group) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(libctx, alg, NULL);
    if (ctx && EVP_PKEY_keygen_init(ctx) > 0 && (!group || EVP_PKEY_CTX_set_group_name(ctx, group) > 0))
        EVP_PKEY_keygen(ctx, &key);
    EVP_PKEY_CTX_free(ctx);
    return key;
}

/* The server's view of a client key share: parameters, then the encoded public key. */
static EVP_PKEY *peer(const char *alg, const char *group, const unsigned char *share, size_t len) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(libctx, alg, NULL);
    if (ctx && EVP_PKEY_paramgen_init(ctx) > 0 && (!group || EVP_PKEY_CTX_set_group_name(ctx, group) > 0))
        EVP_PKEY_paramgen(ctx, &key);
    EVP_PKEY_CTX_free(ctx);
    if (key && EVP_PKEY_set1_encoded_public_key(key, share, len) <= 0) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    return key;
}

static int decaps(EVP_PKEY *key, const unsigned char *ct, size_t ct_len, unsigned char *ss, size_t *ss_len) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(libctx, key, NULL);
    int ok = ctx && EVP_PKEY_decapsulate_init(ctx, NULL) > 0 && EVP_PKEY_decapsulate(ctx, ss, ss_len, ct, ct_len) > 0;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static void test_kem(const char *alg, const char *group) {
    EVP_PKEY *client = keygen(alg, group), *server = NULL;
    unsigned char *share = NULL, *ct = NULL, *ss = NULL, *ss2 = NULL;
    size_t share_len = 0, ct_len = 0, ss_len = 0, ss2_len;
    EVP_PKEY_CTX *ctx = NULL;
    CHECK(client, "%s: key generation", alg);
    if (!client)
        return;
    share_len = EVP_PKEY_get1_encoded_public_key(client, &share);
    CHECK(share_len > 0, "%s: encoded public key", alg);
    server = peer(alg, group, share, share_len);
    CHECK(server, "%s: server parses the key share", alg);
    ctx = server ? EVP_PKEY_CTX_new_from_pkey(libctx, server, NULL) : NULL;
    if (ctx && EVP_PKEY_encapsulate_init(ctx, NULL) > 0 && EVP_PKEY_encapsulate(ctx, NULL, &ct_len, NULL, &ss_len) > 0) {
        ct = malloc(ct_len);
        ss = malloc(ss_len);
        ss2 = malloc(ss_len);
        CHECK(EVP_PKEY_encapsulate(ctx, ct, &ct_len, ss, &ss_len) > 0, "%s: encapsulate", alg);
        ss2_len = ss_len;
        CHECK(decaps(client, ct, ct_len, ss2, &ss2_len) && ss2_len == ss_len && !memcmp(ss, ss2, ss_len),
              "%s: both sides derive the same secret", alg);
        ct[ct_len / 2] ^= 0x04; /* tampered: a different secret (implicit rejection) or an error */
        ss2_len = ss_len;
        CHECK(!decaps(client, ct, ct_len, ss2, &ss2_len) || memcmp(ss, ss2, ss_len) != 0,
              "%s: tampered ciphertext gives the same secret", alg);
        ct[ct_len / 2] ^= 0x04;
        ss2_len = ss_len;
        CHECK(!decaps(client, ct, ct_len - 1, ss2, &ss2_len), "%s: short ciphertext accepted", alg);
        CHECK(!decaps(client, ct, 1, ss2, &ss2_len), "%s: 1-byte ciphertext accepted", alg);
        EVP_PKEY *bad = peer(alg, group, share, share_len - 1);
        CHECK(!bad, "%s: short key share accepted", alg);
        EVP_PKEY_free(bad);
        unsigned char *longer = calloc(1, share_len + 7);
        memcpy(longer, share, share_len);
        bad = peer(alg, group, longer, share_len + 7);
        CHECK(!bad, "%s: long key share accepted", alg);
        EVP_PKEY_free(bad);
        free(longer);
    } else {
        CHECK(0, "%s: encapsulate init", alg);
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(client);
    EVP_PKEY_free(server);
    OPENSSL_free(share);
    free(ct);
    free(ss);
    free(ss2);
}

static int sign_verify(EVP_PKEY *priv, EVP_PKEY *pub, const char *name, int tamper) {
    unsigned char msg[130];
    memset(msg, 0x20, sizeof msg);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t len = 0;
    unsigned char *sig = NULL;
    int ok = EVP_DigestSignInit_ex(md, NULL, NULL, libctx, NULL, priv, NULL) > 0 &&
             EVP_DigestSign(md, NULL, &len, msg, sizeof msg) > 0 && (sig = malloc(len)) &&
             EVP_DigestSign(md, sig, &len, msg, sizeof msg) > 0;
    CHECK(ok, "%s: sign", name);
    EVP_MD_CTX_free(md);
    if (!ok) {
        free(sig);
        return 0;
    }
    if (tamper)
        sig[len / 2] ^= 0x01;
    md = EVP_MD_CTX_new();
    ok = EVP_DigestVerifyInit_ex(md, NULL, NULL, libctx, NULL, pub, NULL) > 0 &&
         EVP_DigestVerify(md, sig, len, msg, sizeof msg) == 1;
    EVP_MD_CTX_free(md);
    free(sig);
    ERR_clear_error();
    return ok;
}

static EVP_PKEY *roundtrip(EVP_PKEY *key, int selection, const char *format, const char *structure) {
    OSSL_ENCODER_CTX *e = OSSL_ENCODER_CTX_new_for_pkey(key, selection, format, structure, NULL);
    unsigned char *data = NULL;
    size_t len = 0;
    EVP_PKEY *back = NULL;
    if (e && OSSL_ENCODER_to_data(e, &data, &len)) {
        const unsigned char *p = data;
        OSSL_DECODER_CTX *d = OSSL_DECODER_CTX_new_for_pkey(&back, format, NULL, NULL, selection, libctx, NULL);
        if (!d || !OSSL_DECODER_from_data(d, &p, &len))
            back = NULL;
        OSSL_DECODER_CTX_free(d);
    }
    OSSL_ENCODER_CTX_free(e);
    OPENSSL_free(data);
    return back;
}

static void test_sig(const char *name) {
    EVP_PKEY *key = keygen(name, NULL);
    CHECK(key, "%s: key generation", name);
    if (!key)
        return;
    CHECK(sign_verify(key, key, name, 0), "%s: fresh signature does not verify", name);
    CHECK(!sign_verify(key, key, name, 1), "%s: tampered signature verifies", name);
    const char *formats[] = {"DER", "PEM"};
    for (int f = 0; f < 2; f++) {
        EVP_PKEY *pub = roundtrip(key, EVP_PKEY_PUBLIC_KEY, formats[f], "SubjectPublicKeyInfo");
        EVP_PKEY *priv = roundtrip(key, EVP_PKEY_KEYPAIR, formats[f], "PrivateKeyInfo");
        CHECK(pub && EVP_PKEY_eq(pub, key) == 1, "%s: %s SubjectPublicKeyInfo round trip", name, formats[f]);
        CHECK(priv && pub && sign_verify(priv, pub, name, 0), "%s: %s PKCS#8 round trip", name, formats[f]);
        EVP_PKEY_free(pub);
        EVP_PKEY_free(priv);
    }
    /* Asking for an encrypted PKCS#8 must fail, not silently write the key in the clear. */
    OSSL_ENCODER_CTX *e = OSSL_ENCODER_CTX_new_for_pkey(key, EVP_PKEY_KEYPAIR, "PEM", "PrivateKeyInfo", NULL);
    unsigned char *data = NULL;
    size_t len = 0;
    int wrote = e && OSSL_ENCODER_CTX_set_cipher(e, "AES-256-CBC", NULL) > 0 && OSSL_ENCODER_to_data(e, &data, &len);
    CHECK(!wrote, "%s: private key written unencrypted although a cipher was asked for", name);
    ERR_clear_error();
    OPENSSL_free(data);
    OSSL_ENCODER_CTX_free(e);
    EVP_PKEY_free(key);
}

struct names {
    char list[128][64];
    int n;
};

static int collect(const OSSL_PARAM params[], void *arg, const char *key) {
    struct names *names = arg;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, key);
    const char *name = NULL;
    if (p && OSSL_PARAM_get_utf8_string_ptr(p, &name) && names->n < 128)
        snprintf(names->list[names->n++], 64, "%s", name);
    return 1;
}

static int collect_group(const OSSL_PARAM params[], void *arg) {
    return collect(params, arg, OSSL_CAPABILITY_TLS_GROUP_NAME);
}

static int collect_sigalg(const OSSL_PARAM params[], void *arg) {
    return collect(params, arg, OSSL_CAPABILITY_TLS_SIGALG_NAME);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_pqprov PATH/TO/pqprov.so\n");
        return 2;
    }
    /* An extra synthetic instance of each kind, configured as a user would. */
    setenv("PQPROV_SYNTHETIC",
           "kem unittestkem codepoint=0xFEBE pk=100 ct=200 encaps_ms=1; "
           "sig unittestsig codepoint=0xFEFE oid=1.3.6.1.4.1.99999.1.99 pk=40 sig=300", 1);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", argv[1]);
    libctx = OSSL_LIB_CTX_new();
    OSSL_PROVIDER_set_default_search_path(libctx, dirname(dir));
    OSSL_PROVIDER *deflt = OSSL_PROVIDER_load(libctx, "default");
    OSSL_PROVIDER *prov = OSSL_PROVIDER_load(libctx, "pqprov");
    if (!deflt || !prov) {
        ERR_print_errors_fp(stderr);
        fprintf(stderr, "FAIL: cannot load the providers\n");
        return 1;
    }
    struct names groups = {0}, sigalgs = {0};
    OSSL_PROVIDER_get_capabilities(prov, "TLS-GROUP", collect_group, &groups);
    OSSL_PROVIDER_get_capabilities(prov, "TLS-SIGALG", collect_sigalg, &sigalgs);
    CHECK(groups.n >= 40, "only %d TLS groups", groups.n);
    CHECK(sigalgs.n >= 18, "only %d TLS signature algorithms", sigalgs.n);
    for (int i = 0; i < groups.n; i++) {
        if (getenv("PQPROV_TEST_ONLY") && !strstr(groups.list[i], getenv("PQPROV_TEST_ONLY")))
            continue;
        test_kem(groups.list[i], groups.list[i]);
    }
    test_kem("mceliece348864f", NULL); /* a bare KEM: no TLS group, no group name */
    EVP_PKEY *wrong = keygen("frodo640aes", "p256_frodo640aes");
    CHECK(!wrong, "a group name of another algorithm was accepted");
    EVP_PKEY_free(wrong);
    for (int i = 0; i < sigalgs.n; i++) {
        if (getenv("PQPROV_TEST_ONLY") && !strstr(sigalgs.list[i], getenv("PQPROV_TEST_ONLY")))
            continue;
        test_sig(sigalgs.list[i]);
    }
    int found = 0;
    for (int i = 0; i < groups.n; i++)
        found += !strcmp(groups.list[i], "unittestkem");
    for (int i = 0; i < sigalgs.n; i++)
        found += !strcmp(sigalgs.list[i], "unittestsig");
    CHECK(found == 2, "synthetic instances from PQPROV_SYNTHETIC missing");
    OSSL_PROVIDER_unload(prov);
    OSSL_PROVIDER_unload(deflt);
    OSSL_LIB_CTX_free(libctx);
    printf("%s: %d groups, %d signature algorithms, %d failures\n", failures ? "FAIL" : "ok", groups.n, sigalgs.n,
           failures);
    return failures ? 1 : 0;
}
