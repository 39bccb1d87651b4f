/* What pqtimer's transports share: the options, a sample's outcome and the helpers both the TCP path
 * (pqtimer.c) and the QUIC path (quic.c) use. */
#ifndef PQTIMER_H
#define PQTIMER_H

#include <stdint.h>

#include <openssl/ssl.h>

#include "trace.h"

enum mode { MODE_HANDSHAKE, MODE_PAGE, MODE_REQUESTS, MODE_RESUME, MODE_RESUME_PAGE, MODE_EARLY, MODE_COUNT };
#define COMP_ALGS 3

enum transport { TRANSPORT_TCP, TRANSPORT_QUIC };

struct options {
    const char *host, *path, *groups, *sigalgs, *cafile, *servername, *claim;
    int port, requests, count, warmup, timeout_ms, pad, worker;
    int pause_ms; /* after each sample: a target's gentle pace */
    int verify_record; /* --verify record */
    int cert_comp[COMP_ALGS]; /* --cert-compression: code points in preference order */
    int cert_comp_n;          /* 0: none offered */
    enum mode mode;
    enum transport transport; /* --transport */
    int initial_size;         /* --initial-size: UDP payload of the client's Initial datagrams; 0 = default */
};

struct outcome {
    const char *error_class; /* NULL when the sample succeeded */
    char error[256];
};

/* Keeps the first cause. */
void set_error(struct outcome *o, const char *cls, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The thread's run-queue wait since wait0 into tr->cpu_wait_ns. */
void cpu_wait_since(struct trace *tr, uint64_t wait0);
/* The socket's local port, 0 when the kernel will not say. */
int local_port(int fd);
/* The server's chain, its signature algorithms and the verification result, into tr. */
void read_peer(SSL *ssl, struct trace *tr);

#endif
