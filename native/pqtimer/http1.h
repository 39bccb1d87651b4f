/* HTTP/1.1 responses read back to back from one connection: a page mode writes all of an origin's requests at
 * once (pipelined, RFC 9112 9.3) and a server answers them in order, so one read may end one response and start
 * the next. Fed the bytes as they arrive, the reader says how many responses have begun and ended, each with
 * its status and body size. Bodies must carry a Content-Length (nginx's static files do). No I/O here. */
#ifndef PQTIMER_HTTP1_H
#define PQTIMER_HTTP1_H

#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_HEAD 8192

struct http1_response {
    int status;
    uint64_t body; /* bytes of the body received */
};

struct http1_reader {
    struct http1_response *resp; /* where each response goes, in order */
    int cap;                     /* how many responses are expected */
    int begun, done;             /* responses whose first byte came; … whose last byte came */
    char head[HTTP1_MAX_HEAD + 1];
    size_t head_n;
    int in_body;
    uint64_t remaining; /* body bytes still to come of the response being read */
    const char *error;  /* why the stream is not what was expected (NULL while it is) */
};

void http1_init(struct http1_reader *r, struct http1_response *resp, int cap);
/* Takes n more bytes of the stream; 0 (and r->error) when they cannot be responses to what was asked. */
int http1_feed(struct http1_reader *r, const char *p, size_t n);

#endif
