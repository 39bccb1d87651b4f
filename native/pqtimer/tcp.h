/* pqtimer over TCP: TLS 1.3 on a TCP socket, HTTP/1.1 for the page modes, resumption and 0-RTT. */
#ifndef PQTIMER_TCP_H
#define PQTIMER_TCP_H

#include "sample.h"

extern const struct transport_ops tcp_transport;

#endif
