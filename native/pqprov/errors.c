/* Error reason codes (reported through the core, so `openssl` prints our messages) and debug output
 * behind PQPROV_DEBUG=1. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <openssl/core_dispatch.h>

#include "pqprov.h"

int pqp_debug_on;

static const OSSL_CORE_HANDLE *core_handle;
static OSSL_FUNC_core_new_error_fn *core_new_error;
static OSSL_FUNC_core_set_error_debug_fn *core_set_error_debug;
static OSSL_FUNC_core_vset_error_fn *core_vset_error;

static const OSSL_ITEM reasons[] = {
    {PQP_R_WRONG_LENGTH, "input has the wrong length for this algorithm"},
    {PQP_R_LIBOQS_FAILED, "liboqs operation failed"},
    {PQP_R_CLASSICAL_FAILED, "classical (OpenSSL) half of the operation failed"},
    {PQP_R_MISSING_KEY, "the key lacks the part this operation needs"},
    {PQP_R_WRONG_GROUP, "group name does not belong to this algorithm"},
    {PQP_R_BAD_ENCODING, "malformed key encoding"},
    {PQP_R_BAD_SYNTHETIC_SPEC, "bad synthetic algorithm specification"},
    {PQP_R_VERIFY_FAILED, "signature verification failed"},
    {PQP_R_UNSUPPORTED, "operation not supported by this algorithm"},
    {PQP_R_BUFFER_TOO_SMALL, "output buffer too small"},
    {0, NULL},
};

const OSSL_ITEM *pqp_reason_strings(void) {
    return reasons;
}

void pqp_errors_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in) {
    core_handle = handle;
    for (; in->function_id != 0; in++) {
        switch (in->function_id) {
        case OSSL_FUNC_CORE_NEW_ERROR: core_new_error = OSSL_FUNC_core_new_error(in); break;
        case OSSL_FUNC_CORE_SET_ERROR_DEBUG: core_set_error_debug = OSSL_FUNC_core_set_error_debug(in); break;
        case OSSL_FUNC_CORE_VSET_ERROR: core_vset_error = OSSL_FUNC_core_vset_error(in); break;
        }
    }
    const char *env = getenv("PQPROV_DEBUG");
    pqp_debug_on = env && *env && *env != '0';
}

void pqp_raise(const char *file, int line, const char *func, int reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (core_new_error && core_set_error_debug && core_vset_error) {
        core_new_error(core_handle);
        core_set_error_debug(core_handle, file, line, func);
        core_vset_error(core_handle, (uint32_t)reason, fmt, ap);
    }
    va_end(ap);
    if (pqp_debug_on) {
        va_start(ap, fmt);
        fprintf(stderr, "pqprov: error in %s: ", func);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

void pqp_debug(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pqprov: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
