/*
 * libpqcertcomp: lets a server that knows nothing of certificate compression (Debian's nginx 1.22)
 * send compressed certificates (RFC 8879) with our OpenSSL.
 *
 * OpenSSL >= 3.2 answers a client's compress_certificate extension only with a chain compressed ahead
 * of time (SSL_CTX_compress_certs); nginx never asks for that. Preloaded into nginx (LD_PRELOAD), this
 * library wraps SSL_CTX_use_PrivateKey, the last call nginx makes when it loads a certificate (after the
 * leaf and its chain), and compresses the chain it just loaded with the algorithms named by
 * PQB_CERT_COMPRESSION: "all" (the default: every algorithm this OpenSSL has) or a comma-separated list of
 * zlib, brotli, zstd. Whether a server block then sends compressed chains is its own setting: OpenSSL's
 * TxCertificateCompression option (nginx: ssl_conf_command Options -TxCertificateCompression turns it
 * off). A failure is reported on stderr (nginx's log) and leaves the chain uncompressed; nothing else
 * changes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

typedef int (*use_key_fn)(SSL_CTX *, EVP_PKEY *);

static void compress(SSL_CTX *ctx) {
    const char *want = getenv("PQB_CERT_COMPRESSION");
    if (!want || !*want || !strcmp(want, "all")) {
        if (!SSL_CTX_compress_certs(ctx, 0))
            fprintf(stderr, "pqcertcomp: cannot compress the certificate chain (no algorithm in this OpenSSL?)\n");
        ERR_clear_error();
        return;
    }
    static const struct { const char *name; int alg; } algs[] = {
        {"zlib", TLSEXT_comp_cert_zlib}, {"brotli", TLSEXT_comp_cert_brotli}, {"zstd", TLSEXT_comp_cert_zstd}};
    char buf[64];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int alg = 0;
        for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
            if (!strcmp(tok, algs[i].name))
                alg = algs[i].alg;
        if (!alg || !SSL_CTX_compress_certs(ctx, alg))
            fprintf(stderr, "pqcertcomp: cannot compress the certificate chain with '%s'\n", tok);
    }
    ERR_clear_error();
}

/* nginx links SSL_CTX_use_PrivateKey@OPENSSL_3.0.0 (certcomp.map gives ours that version). */
int SSL_CTX_use_PrivateKey(SSL_CTX *ctx, EVP_PKEY *pkey) {
    static use_key_fn real;
    if (!real)
        real = (use_key_fn)dlvsym(RTLD_NEXT, "SSL_CTX_use_PrivateKey", "OPENSSL_3.0.0");
    if (!real)
        real = (use_key_fn)dlsym(RTLD_NEXT, "SSL_CTX_use_PrivateKey");
    if (!real)
        return 0;
    int r = real(ctx, pkey);
    if (r == 1)
        compress(ctx);
    return r;
}
