/* pqtimer over QUIC (--transport quic): OpenSSL 3.5's QUIC client on a UDP socket, TLS 1.3 inside it with
 * the same groups, signature algorithms and verification as over TCP, and HTTP/3 for the page modes. */
#ifndef PQTIMER_QUIC_H
#define PQTIMER_QUIC_H

#include <openssl/ssl.h>

#include "pqtimer.h"

/* OpenSSL's client always sends Initial datagrams of this UDP payload size (RFC 9000's minimum); 3.5 has
 * no setting for it (no SSL_VALUE_* for the datagram size, no padding knob). */
#define QUIC_OPENSSL_INITIAL_SIZE 1200

/* Why pqtimer cannot measure these options over QUIC (exit 3), or NULL. */
const char *quic_refusal(const struct options *o);

/* One sample: the handshake, then the page modes' HTTP/3 requests. Like the TCP path's run_sample: a
 * failure is recorded in out, never retried; kept (non-NULL for recorded samples) receives the connection
 * when the sample succeeded, for the caller to read and then pass to quic_release. */
void quic_run_sample(SSL_CTX *ctx, struct options *o, struct trace *tr, struct outcome *out, SSL **kept);

/* Closes a connection quic_run_sample kept (an immediate CONNECTION_CLOSE) and frees it. */
void quic_release(SSL *conn);

/* The sample's QUIC fields for its JSON line: `, "transport": "quic", "quic": {…}, "wire_milestone": …`. */
void quic_print(const struct options *o, const struct trace *tr);

#endif
