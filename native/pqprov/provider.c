/* Provider entry point: setup, the algorithm lists for each operation, parameters, teardown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <oqs/oqs.h>

#include "pqprov.h"

#define PQP_VERSION "0.1.0"

static OSSL_ALGORITHM keymgmt[PQP_MAX_ALGS + 1], kem[PQP_MAX_ALGS + 1], signature[PQP_MAX_ALGS + 1];
static OSSL_ALGORITHM encoder[5 * PQP_MAX_ALGS + 1], decoder[2 * PQP_MAX_ALGS + 1];

static const struct {
    const OSSL_DISPATCH *fns;
    const char *props;
} encoders[] = {
    {pqp_spki_der_encoder, PQP_PROPS ",output=der,structure=SubjectPublicKeyInfo"},
    {pqp_spki_pem_encoder, PQP_PROPS ",output=pem,structure=SubjectPublicKeyInfo"},
    {pqp_p8_der_encoder, PQP_PROPS ",output=der,structure=PrivateKeyInfo"},
    {pqp_p8_pem_encoder, PQP_PROPS ",output=pem,structure=PrivateKeyInfo"},
    {pqp_text_encoder, PQP_PROPS ",output=text"},
};

static void build_lists(void) {
    size_t nk = 0, nkem = 0, nsig = 0, nenc = 0, ndec = 0;
    for (size_t i = 0; i < pqp_nalgs; i++) {
        const struct pqp_alg *a = &pqp_algs[i];
        keymgmt[nk++] = (OSSL_ALGORITHM){a->names, PQP_PROPS, pqp_keymgmt_dispatch[i], a->name};
        if (a->kind == PQP_KEM) {
            kem[nkem++] = (OSSL_ALGORITHM){a->names, PQP_PROPS, pqp_kem_functions, a->name};
            continue;
        }
        signature[nsig++] = (OSSL_ALGORITHM){a->names, PQP_PROPS, pqp_signature_functions, a->name};
        for (size_t e = 0; e < sizeof encoders / sizeof *encoders; e++)
            encoder[nenc++] = (OSSL_ALGORITHM){a->names, encoders[e].props, encoders[e].fns, a->name};
        decoder[ndec++] = (OSSL_ALGORITHM){a->names, PQP_PROPS ",input=der,structure=SubjectPublicKeyInfo",
                                           pqp_spki_decoder, a->name};
        decoder[ndec++] = (OSSL_ALGORITHM){a->names, PQP_PROPS ",input=der,structure=PrivateKeyInfo",
                                           pqp_p8_decoder, a->name};
    }
}

static const OSSL_ALGORITHM *query_operation(void *provctx, int operation_id, int *no_cache) {
    *no_cache = 0;
    switch (operation_id) {
    case OSSL_OP_KEYMGMT: return keymgmt;
    case OSSL_OP_KEM: return kem;
    case OSSL_OP_SIGNATURE: return signature;
    case OSSL_OP_ENCODER: return encoder;
    case OSSL_OP_DECODER: return decoder;
    }
    return NULL;
}

static const OSSL_PARAM *gettable_params(void *provctx) {
    static const OSSL_PARAM gettable[] = {
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_BUILDINFO, NULL, 0),
        OSSL_PARAM_int(OSSL_PROV_PARAM_STATUS, NULL),
        OSSL_PARAM_END,
    };
    return gettable;
}

static int get_params(void *provctx, OSSL_PARAM params[]) {
    static char buildinfo[64];
    OSSL_PARAM *p;
    snprintf(buildinfo, sizeof buildinfo, "liboqs %s", OQS_version());
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) && !OSSL_PARAM_set_utf8_ptr(p, "pqbench pqprov"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) && !OSSL_PARAM_set_utf8_ptr(p, PQP_VERSION))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_BUILDINFO)) && !OSSL_PARAM_set_utf8_ptr(p, buildinfo))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS)) && !OSSL_PARAM_set_int(p, 1))
        return 0;
    return 1;
}

static const OSSL_ITEM *reason_strings(void *provctx) {
    return pqp_reason_strings();
}

static void free_ctx(struct pqp_ctx *ctx) {
    OSSL_LIB_CTX_free(ctx->libctx);
    OPENSSL_free(ctx);
}

static void teardown(void *provctx) {
    free_ctx(provctx);
    if (pqp_nalgs)
        pqp_algs_release();
}

static const OSSL_DISPATCH provider_functions[] = {
    {OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))teardown},
    {OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))gettable_params},
    {OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))get_params},
    {OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))query_operation},
    {OSSL_FUNC_PROVIDER_GET_CAPABILITIES, (void (*)(void))pqp_get_capabilities},
    {OSSL_FUNC_PROVIDER_GET_REASON_STRINGS, (void (*)(void))reason_strings},
    OSSL_DISPATCH_END,
};

/* Synthetic instances: the config key `synthetic` (provider section), then PQPROV_SYNTHETIC. */
static char *synthetic_spec(const OSSL_CORE_HANDLE *handle, OSSL_FUNC_core_get_params_fn *core_get_params) {
    char *from_config = NULL;
    OSSL_PARAM p[] = {OSSL_PARAM_utf8_ptr("synthetic", &from_config, 0), OSSL_PARAM_END};
    if (core_get_params)
        core_get_params(handle, p);
    const char *from_env = getenv("PQPROV_SYNTHETIC");
    size_t n = (from_config ? strlen(from_config) : 0) + (from_env ? strlen(from_env) : 0) + 2;
    char *spec = OPENSSL_zalloc(n);
    if (spec)
        snprintf(spec, n, "%s;%s", from_config ? from_config : "", from_env ? from_env : "");
    return spec;
}

/* How synthetic compute time is spent: PQPROV_SYNTHETIC_WORK, else the config key
 * `synthetic_work`, else busy. */
static const char *synthetic_work(const OSSL_CORE_HANDLE *handle, OSSL_FUNC_core_get_params_fn *core_get_params) {
    const char *from_env = getenv("PQPROV_SYNTHETIC_WORK");
    if (from_env && *from_env)
        return from_env;
    char *from_config = NULL;
    OSSL_PARAM p[] = {OSSL_PARAM_utf8_ptr("synthetic_work", &from_config, 0), OSSL_PARAM_END};
    if (core_get_params)
        core_get_params(handle, p);
    return from_config;
}

__attribute__((visibility("default"))) int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const OSSL_DISPATCH **out,
                       void **provctx) {
    OSSL_FUNC_core_get_params_fn *core_get_params = NULL;
    OSSL_FUNC_core_obj_create_fn *obj_create = NULL;
    OSSL_FUNC_core_obj_add_sigid_fn *obj_add_sigid = NULL;
    for (const OSSL_DISPATCH *f = in; f->function_id; f++) {
        switch (f->function_id) {
        case OSSL_FUNC_CORE_GET_PARAMS: core_get_params = OSSL_FUNC_core_get_params(f); break;
        case OSSL_FUNC_CORE_OBJ_CREATE: obj_create = OSSL_FUNC_core_obj_create(f); break;
        case OSSL_FUNC_CORE_OBJ_ADD_SIGID: obj_add_sigid = OSSL_FUNC_core_obj_add_sigid(f); break;
        }
    }
    pqp_errors_init(handle, in);
    struct pqp_ctx *ctx = OPENSSL_zalloc(sizeof *ctx);
    if (!ctx || !(ctx->libctx = OSSL_LIB_CTX_new_child(handle, in))) {
        OPENSSL_free(ctx);
        return 0;
    }
    ctx->handle = handle;
    char *spec = synthetic_spec(handle, core_get_params);
    int fresh = 0, ok = spec && pqp_set_work(synthetic_work(handle, core_get_params)) &&
                        pqp_algs_init(ctx, spec, &fresh);
    OPENSSL_free(spec);
    if (!ok) {
        free_ctx(ctx);
        return 0;
    }
    if (fresh) {
        /* OIDs and signature ids, so certificates with our keys and signatures decode and verify
         * (registering again after a reload is harmless). */
        for (size_t i = 0; i < pqp_nalgs; i++) {
            const struct pqp_alg *a = &pqp_algs[i];
            if (a->kind != PQP_SIG || !a->oid)
                continue;
            if (!obj_create || !obj_create(handle, a->oid, a->name, a->name) || !obj_add_sigid ||
                !obj_add_sigid(handle, a->name, "", a->name))
                PQP_DEBUG("could not register OID %s for %s", a->oid, a->name);
        }
        build_lists();
    }
    PQP_DEBUG("loaded (%zu algorithms, liboqs %s)", pqp_nalgs, OQS_version());
    *out = provider_functions;
    *provctx = ctx;
    return 1;
}
