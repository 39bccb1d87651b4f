/* pqtimer over QUIC (--transport quic): OpenSSL 3.5's QUIC client on a UDP socket, TLS 1.3 inside it with
 * the same groups, signature algorithms and verification as over TCP, and HTTP/3 for the page modes. */
#ifndef PQTIMER_QUIC_H
#define PQTIMER_QUIC_H

#include "sample.h"

/* OpenSSL's client always sends Initial datagrams of this UDP payload size (RFC 9000's minimum); 3.5 has
 * no setting for it (no SSL_VALUE_* for the datagram size, no padding knob). */
#define QUIC_OPENSSL_INITIAL_SIZE 1200

/* Refuses resumption and other Initial sizes; its samples print `, "transport": "quic", "quic": {…}` and
 * their own wire milestone. */
extern const struct transport_ops quic_transport;

#endif
