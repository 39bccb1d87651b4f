/* pqtimer over TCP: TLS 1.3 on a TCP socket, HTTP/1.1 for the page modes, resumption and 0-RTT. */
#ifndef PQTIMER_TCP_H
#define PQTIMER_TCP_H

#include "sample.h"

extern const struct transport_ops tcp_transport;

/* What the page mode (page.c) opens its further connections with. */
/* Waits until fd is ready for events or the deadline (CLOCK_MONOTONIC_RAW ns) passes: 0 then. */
int wait_fd(int fd, short events, uint64_t deadline);
/* A connected non-blocking TCP socket to host:port (TCP_NODELAY), or -1 with the error in out. */
int tcp_dial(const char *host, int port, uint64_t deadline, struct outcome *out);
/* The error class of a failed SSL call (ret) into out: verification, a close, or TLS's own. */
void ssl_failure(SSL *ssl, int ret, struct outcome *out, const char *during);

#endif
