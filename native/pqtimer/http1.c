/* Pipelined HTTP/1.1 responses, parsed as they arrive (see http1.h). */
#define _GNU_SOURCE
#include "http1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void http1_init(struct http1_reader *r, struct http1_response *resp, int cap) {
    memset(r, 0, sizeof *r);
    r->resp = resp;
    r->cap = cap;
    memset(resp, 0, sizeof *resp * (size_t)cap);
}

static int fail(struct http1_reader *r, const char *why) {
    r->error = why;
    return 0;
}

/* The head is complete (its blank line at head[len - 4]): status and Content-Length of response r->done. */
static int parse_head(struct http1_reader *r, size_t len) {
    r->head[len] = '\0';
    struct http1_response *resp = &r->resp[r->done];
    if (sscanf(r->head, "HTTP/1.%*d %d", &resp->status) != 1)
        return fail(r, "not an HTTP/1.1 response");
    char *cl = strcasestr(r->head, "\r\nContent-Length:");
    if (!cl)
        return fail(r, "response without Content-Length");
    char *end;
    long long v = strtoll(cl + 17, &end, 10);
    if (v < 0 || end == cl + 17)
        return fail(r, "bad Content-Length");
    r->remaining = (uint64_t)v;
    r->in_body = 1;
    return 1;
}

int http1_feed(struct http1_reader *r, const char *p, size_t n) {
    if (r->error)
        return 0;
    while (n) {
        if (r->done >= r->cap)
            return fail(r, "more bytes than the responses asked for");
        if (r->begun == r->done)
            r->begun++; /* this response's first byte */
        if (r->in_body) {
            size_t take = n < r->remaining ? n : (size_t)r->remaining;
            r->resp[r->done].body += take;
            r->remaining -= take;
            p += take;
            n -= take;
        } else {
            /* copy head bytes one at a time up to the blank line: what follows it is body, or the next response */
            while (n && !r->in_body) {
                if (r->head_n >= HTTP1_MAX_HEAD)
                    return fail(r, "response headers too long");
                r->head[r->head_n++] = *p++;
                n--;
                if (r->head_n >= 4 && !memcmp(r->head + r->head_n - 4, "\r\n\r\n", 4) && !parse_head(r, r->head_n))
                    return 0;
            }
        }
        if (r->in_body && !r->remaining) { /* this response ended */
            r->in_body = 0;
            r->head_n = 0;
            r->done++;
        }
    }
    return 1;
}
