/* pqtimer's page mode with further resources (--resource ADDR,NAME,PATH): a web page loaded as a simple browser
 * loads it, over TLS 1.3 on TCP and HTTP/1.1. The document (--path on --host, --servername) comes first on its
 * own connection; once its response's first bytes arrive (where a page's head names its stylesheets, scripts and
 * images), one connection per further origin (each distinct ADDR,NAME; all on --port) opens at once, each in a
 * thread of its own, and writes all of that origin's requests together (pipelined: one round trip for them all,
 * as HTTP/2 would multiplex them). Resources of the document's own origin follow the document on its connection.
 * The page's time ends when the last resource's last byte arrives.
 *
 * The sample's own fields are the document connection's (its phases, TLS, wire join by local port); the page's
 * every connection and request is in "browser", the record the browser clients print of a load
 * (pqbench.endpoints.browsers.timing), so the store and report read both alike. Each connection's start_mono_ns
 * is on CLOCK_MONOTONIC, as a browser's DevTools and pqlink's record have it (the sample's own stays RAW;
 * mono_minus_raw_ns says by how much they differ). */
#ifndef PQTIMER_PAGE_H
#define PQTIMER_PAGE_H

#include "sample.h"

#define PAGE_MAX_RESOURCES 64
#define PAGE_MAX_CONNS 16

/* Adds one --resource ADDR,NAME,PATH; NULL, or why it cannot. */
const char *page_add_resource(const char *arg);
/* How many --resource were given. */
int page_resources(void);
/* One page load: the document's connection is the sample's (tr, out, kept as tcp_transport's run_sample). */
void page_run_sample(SSL_CTX *ctx, struct options *o, struct trace *tr, struct outcome *out, SSL **kept);
/* The page's fields of the sample's JSON line (`, "browser": {...}` …), after page_run_sample. */
void page_print(const struct options *o);

#endif
