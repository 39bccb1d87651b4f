/* The helpers both transports use to fill a sample (see sample.h). */
#define _GNU_SOURCE
#include "sample.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#include <openssl/objects.h>
#include <openssl/x509.h>

void set_error(struct outcome *o, const char *cls, const char *fmt, ...) {
    if (o->error_class)
        return; /* keep the first cause */
    o->error_class = cls;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->error, sizeof o->error, fmt, ap);
    va_end(ap);
}

uint64_t cpu_wait_since_ns(uint64_t wait0) {
    uint64_t now = cpu_wait_total_ns();
    return wait0 == UINT64_MAX || now == UINT64_MAX ? UINT64_MAX : now - wait0;
}

void cpu_wait_since(struct trace *tr, uint64_t wait0) {
    tr->cpu_wait_ns = cpu_wait_since_ns(wait0);
}

/* Read once the sample's times are taken, so it costs them nothing; 0 when the kernel will not say. */
int local_port(int fd) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET)
        return 0;
    return ntohs(sa.sin_port);
}

/* What the server proved itself with; read after the sample's times are taken. */
void read_peer(SSL *ssl, struct trace *tr) {
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl); /* the client's view: leaf first */
    int n = chain ? sk_X509_num(chain) : 0;
    tr->chain_n = n;
    for (int i = 0; i < n && i < TRACE_MAX_CHAIN; i++) {
        X509 *x = sk_X509_value(chain, i);
        int der = i2d_X509(x, NULL);
        tr->chain_der[i] = der > 0 ? (uint32_t)der : 0;
        const X509_ALGOR *alg = NULL;
        const ASN1_OBJECT *obj = NULL;
        X509_get0_signature(NULL, &alg, x);
        if (alg)
            X509_ALGOR_get0(&obj, NULL, NULL, alg);
        if (!obj || OBJ_obj2txt(tr->chain_sig[i], sizeof tr->chain_sig[i], obj, 0) <= 0)
            tr->chain_sig[i][0] = '\0';
    }
    tr->verify_valid = n > 0;
    tr->verify = SSL_get_verify_result(ssl);
}
