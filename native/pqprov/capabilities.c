/* TLS-GROUP and TLS-SIGALG capabilities: what libssl offers in TLS 1.3, from the table. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/prov_ssl.h>

#include "pqprov.h"

static int group(const struct pqp_alg *a, OSSL_CALLBACK *cb, void *arg) {
    unsigned int id = a->codepoint, secbits = (unsigned)a->secbits, is_kem = 1;
    int min_tls = TLS1_3_VERSION, max_tls = 0, no_dtls = -1;
    OSSL_PARAM p[] = {
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_NAME, (char *)a->name, strlen(a->name)),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_NAME_INTERNAL, (char *)a->name, strlen(a->name)),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_ALG, (char *)a->name, strlen(a->name)),
        OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_ID, &id),
        OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_SECURITY_BITS, &secbits),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MIN_TLS, &min_tls),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MAX_TLS, &max_tls),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MIN_DTLS, &no_dtls),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MAX_DTLS, &no_dtls),
        OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_IS_KEM, &is_kem),
        OSSL_PARAM_END,
    };
    return cb(p, arg);
}

static int sigalg(const struct pqp_alg *a, OSSL_CALLBACK *cb, void *arg) {
    unsigned int code_point = a->codepoint, secbits = (unsigned)a->secbits;
    int tls13 = TLS1_3_VERSION, no_dtls = -1;
    char *name = (char *)a->name, *oid = (char *)a->oid;
    /* libssl wants the object name of the OID: OpenSSL's own for SLH-DSA ("SLH-DSA-SHA2-128s"). */
    char *object = (char *)(a->layout == PQP_LAYOUT_NATIVE ? a->classical : a->name);
    OSSL_PARAM p[] = {
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_IANA_NAME, name, strlen(name)),
        OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_SIGALG_CODE_POINT, &code_point),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_NAME, object, strlen(object)),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_OID, oid, strlen(oid)),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_KEYTYPE, object, strlen(object)),
        OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_KEYTYPE_OID, oid, strlen(oid)),
        OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_SIGALG_SECURITY_BITS, &secbits),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MIN_TLS, &tls13),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MAX_TLS, &tls13),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MIN_DTLS, &no_dtls),
        OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MAX_DTLS, &no_dtls),
        OSSL_PARAM_END,
    };
    return cb(p, arg);
}

int pqp_get_capabilities(void *provctx, const char *capability, OSSL_CALLBACK *cb, void *arg) {
    int groups = !strcasecmp(capability, "TLS-GROUP"), sigalgs = !strcasecmp(capability, "TLS-SIGALG");
    for (size_t i = 0; i < pqp_nalgs; i++) {
        const struct pqp_alg *a = &pqp_algs[i];
        if (!a->tls)
            continue;
        if (groups && a->kind == PQP_KEM && !group(a, cb, arg))
            return 0;
        if (sigalgs && a->kind == PQP_SIG && a->oid && !sigalg(a, cb, arg))
            return 0;
    }
    return groups || sigalgs;
}
