/* What one sample needs whatever its transport: the options, its outcome, the helpers both transports use
 * (sample.c), and the table each transport fills (tcp.c, quic.c) for pqtimer.c to pick by --transport.
 * Neither transport calls back into pqtimer.c. */
#ifndef PQTIMER_SAMPLE_H
#define PQTIMER_SAMPLE_H

#include <stdint.h>

#include <openssl/ssl.h>

#include "trace.h"

enum mode { MODE_HANDSHAKE, MODE_PAGE, MODE_REQUESTS, MODE_RESUME, MODE_RESUME_PAGE, MODE_EARLY, MODE_COUNT };
#define COMP_ALGS 3

enum transport { TRANSPORT_TCP, TRANSPORT_QUIC, TRANSPORT_COUNT };

struct options {
    const char *host, *path, *groups, *sigalgs, *cafile, *servername, *claim;
    const char *cert, *key;  /* the client's certificate chain and key (mutual TLS), or NULL */
    const char *webpage; /* --webpage: the page's name, a label (page.h loads it) */
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

/* What a transport does for pqtimer.c: its half of each sample, from the socket to the sample's own JSON
 * fields. One table per transport (tcp_transport in tcp.c, quic_transport in quic.c). */
struct transport_ops {
    const char *name; /* as --transport names it */
    const SSL_METHOD *(*method)(void);
    /* Why pqtimer cannot measure these options over it (exit 3), or NULL. */
    const char *(*refusal)(const struct options *o);
    /* One sample: connect, handshake (resuming `resume` where not NULL), the mode's requests. A failure is
     * recorded in out, never retried; kept (non-NULL for recorded samples) receives the connection when the
     * sample succeeded, for the caller to read and then pass to release. */
    void (*run_sample)(SSL_CTX *ctx, struct options *o, SSL_SESSION *resume, struct trace *tr,
                       struct outcome *out, SSL **kept);
    /* Closes a connection run_sample kept, without waiting for the peer, and frees it. */
    void (*release)(SSL *conn);
    /* The transport's own fields of the sample's JSON line, each as `, "key": value`. */
    void (*print)(const struct options *o, const struct trace *tr);
};

/* Keeps the first cause. */
void set_error(struct outcome *o, const char *cls, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The thread's run-queue wait since wait0 into tr->cpu_wait_ns. */
void cpu_wait_since(struct trace *tr, uint64_t wait0);
/* The calling thread's wait for a CPU since wait0 (cpu_wait_total_ns), UINT64_MAX when the kernel does not say */
uint64_t cpu_wait_since_ns(uint64_t wait0);
/* The socket's local port, 0 when the kernel will not say. */
int local_port(int fd);
/* The server's chain, its signature algorithms and the verification result, into tr. */
void read_peer(SSL *ssl, struct trace *tr);

#endif
