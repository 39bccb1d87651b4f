/*
 * pqprov: pqbench's OpenSSL 3 provider. liboqs KEMs and signatures, Open Quantum Safe style
 * hybrids and synthetic algorithms, as TLS 1.3 groups and signature algorithms.
 *
 * Every algorithm is one row of a table generated from catalog/algorithms.toml (gen_tables.py);
 * synthetic instances configured at load time are appended to it. Operations are generic and
 * find what they need in the row of the key they work on.
 */
#ifndef PQPROV_H
#define PQPROV_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/evp.h>

#define PQP_NAME "pqprov"
#define PQP_PROPS "provider=pqprov"
#define PQP_NOT_US "provider!=pqprov" /* OpenSSL's algorithms, never our own (no recursion) */

#include "pqprov_tables.inc" /* PQP_MAX_ALGS, PQP_FOR_EACH_SLOT (generated from the catalog) */

enum pqp_kind { PQP_KEM = 1, PQP_SIG = 2 };

/* How a key share, ciphertext, public key or signature is laid out on the wire. */
enum pqp_layout {
    PQP_LAYOUT_PURE = 1,       /* liboqs output as is */
    PQP_LAYOUT_OQS_HYBRID = 2, /* 4-byte big-endian classical length, classical, PQ (OQS hybrids) */
    PQP_LAYOUT_PAD = 3,        /* synthetic: classical (X25519 / Ed25519) then zero padding */
    PQP_LAYOUT_NATIVE = 4,     /* OpenSSL's own signature (SLH-DSA) in its standard encoding */
};

struct pqp_alg {
    int kind;
    int layout;
    const char *name;
    const char *oqs;       /* liboqs method name, NULL for synthetic */
    const char *classical; /* EVP name of the classical half: X25519, X448, P-256.., ED25519;
                              NATIVE: OpenSSL's key type (SLH-DSA-...) */
    const char *oid;       /* signatures: OID in certificates */
    unsigned int codepoint;
    int tls;
    size_t pk, ct, ss, sig; /* wire sizes from the catalog, checked on every input */
    int level, secbits;
    double ms[3]; /* synthetic compute: keygen, encaps|sign, decaps|verify */
    /* Filled at load time. */
    void *oqs_obj;         /* OQS_KEM * or OQS_SIG *, shared read-only */
    size_t classical_len;  /* bytes of the classical share / key / signature */
    size_t classical_ss;   /* bytes of the classical shared secret */
    size_t oqs_sk;         /* liboqs secret key length */
    char names[160];       /* "name" or "name:oid" as registered with OpenSSL */
    char *owned;           /* strings of synthetic instances configured at load time */
};

/* Provider context. */
struct pqp_ctx {
    const OSSL_CORE_HANDLE *handle;
    OSSL_LIB_CTX *libctx; /* child library context: OpenSSL's own X25519/ECDH/Ed25519 */
};

/* algs.c: the table */
extern struct pqp_alg pqp_algs[];
extern size_t pqp_nalgs;
int pqp_algs_init(struct pqp_ctx *ctx, const char *synthetic_spec, int *fresh);
void pqp_algs_release(void);
const struct pqp_alg *pqp_alg_by_oid_der(const unsigned char *oid, size_t len);

/* synthetic.c: "kem NAME key=value ...; sig NAME key=value ..." instances */
int pqp_synthetic_parse(const char *spec, struct pqp_alg *out, size_t room, size_t *added);
void pqp_busy_calibrate(void);
int pqp_set_work(const char *mode); /* "busy" (default) or "sleep" */
void pqp_work_until(const struct timespec *start, double ms);
void pqp_now(struct timespec *t);

/* errors.c */
enum pqp_reason {
    PQP_R_WRONG_LENGTH = 1,
    PQP_R_LIBOQS_FAILED,
    PQP_R_CLASSICAL_FAILED,
    PQP_R_MISSING_KEY,
    PQP_R_WRONG_GROUP,
    PQP_R_BAD_ENCODING,
    PQP_R_BAD_SYNTHETIC_SPEC,
    PQP_R_VERIFY_FAILED,
    PQP_R_UNSUPPORTED,
    PQP_R_BUFFER_TOO_SMALL,
};
void pqp_errors_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in);
const OSSL_ITEM *pqp_reason_strings(void);
void pqp_raise(const char *file, int line, const char *func, int reason, const char *fmt, ...);
#define PQP_RAISE(reason, ...) pqp_raise(__FILE__, __LINE__, __func__, (reason), __VA_ARGS__)
extern int pqp_debug_on;
void pqp_debug(const char *fmt, ...);
#define PQP_DEBUG(...) do { if (pqp_debug_on) pqp_debug(__VA_ARGS__); } while (0)

/* classical.c: OpenSSL's own X25519/X448/ECDH/Ed25519 for hybrids and synthetic algorithms */
EVP_PKEY *pqp_classical_keygen(struct pqp_ctx *ctx, const char *name);
int pqp_classical_public(EVP_PKEY *key, unsigned char *out, size_t len);
EVP_PKEY *pqp_classical_peer(struct pqp_ctx *ctx, const char *name, const unsigned char *pub, size_t len);
int pqp_classical_derive(struct pqp_ctx *ctx, EVP_PKEY *own, EVP_PKEY *peer, unsigned char *ss, size_t len);
int pqp_classical_sizes(struct pqp_ctx *ctx, const char *name, size_t *pub, size_t *ss);

/* hybrid.c: OQS hybrid framing, [4-byte big-endian classical length] classical || PQ (the prefix
 * only for PQP_LAYOUT_OQS_HYBRID; 0 bytes otherwise); shared secret classical || PQ. */
size_t pqp_hybrid_prefix_len(const struct pqp_alg *a);
size_t pqp_hybrid_put_prefix(const struct pqp_alg *a, unsigned char *out); /* returns bytes written */
int pqp_hybrid_check_prefix(const struct pqp_alg *a, const unsigned char *in); /* raises BAD_ENCODING */
size_t pqp_hybrid_pq_offset(const struct pqp_alg *a); /* where the PQ part starts (0 without classical) */

/* keymgmt.c: the key object every operation works on */
struct pqp_key {
    const struct pqp_alg *alg;
    struct pqp_ctx *ctx;
    unsigned char *pub; /* wire form: key share / raw public key; NULL when absent */
    unsigned char *sk;  /* liboqs secret key (or Ed25519 seed for synthetic signatures) */
    size_t sk_len;
    EVP_PKEY *classical; /* private classical half (hybrids, synthetic) */
};
struct pqp_key *pqp_key_new(struct pqp_ctx *ctx, const struct pqp_alg *alg);
void pqp_key_free(struct pqp_key *key);
int pqp_key_set_public(struct pqp_key *key, const unsigned char *pub, size_t len);
int pqp_key_set_private(struct pqp_key *key, const unsigned char *sk, size_t len);
int pqp_key_has_private(const struct pqp_key *key);
extern const OSSL_DISPATCH *pqp_keymgmt_dispatch[];

/* Other operations (one file each). */
extern const OSSL_DISPATCH pqp_kem_functions[];
extern const OSSL_DISPATCH pqp_signature_functions[];
extern const OSSL_DISPATCH pqp_spki_der_encoder[], pqp_spki_pem_encoder[], pqp_p8_der_encoder[],
    pqp_p8_pem_encoder[], pqp_text_encoder[];
extern const OSSL_DISPATCH pqp_spki_decoder[], pqp_p8_decoder[];
int pqp_get_capabilities(void *provctx, const char *capability, OSSL_CALLBACK *cb, void *arg);

/* der.c: the little DER the encoders and decoders need */
size_t pqp_der_spki(const struct pqp_alg *alg, const unsigned char *pub, size_t len, unsigned char **out);
size_t pqp_der_p8(const struct pqp_alg *alg, const unsigned char *priv, size_t len, unsigned char **out);
size_t pqp_der_algorithm_id(const struct pqp_alg *alg, unsigned char *out, size_t cap);
/* Parse: returns the matching algorithm and points *body at the key bytes, or NULL. */
const struct pqp_alg *pqp_der_parse_spki(const unsigned char *der, size_t len, const unsigned char **body,
                                         size_t *body_len);
const struct pqp_alg *pqp_der_parse_p8(const unsigned char *der, size_t len, const unsigned char **body,
                                       size_t *body_len);

#endif
