/* Unit tests of the pipelined HTTP/1.1 response reader (http1.c): three responses back to back, fed whole, byte by
 * byte and split at every point; an empty body; what is not a response, or more than was asked for. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "http1.h"

static const char three[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello"
                            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
                            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n\r\n\r\nabcdefgh";

static void check_three(const struct http1_reader *r, const struct http1_response *resp) {
    CHECK(!r->error);
    CHECK(r->begun == 3 && r->done == 3);
    CHECK(resp[0].status == 200 && resp[0].body == 5);
    CHECK(resp[1].status == 404 && resp[1].body == 0);
    CHECK(resp[2].status == 200 && resp[2].body == 12); /* a body may hold what looks like a head's end */
}

static void whole_and_split(void) {
    size_t n = sizeof three - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        struct http1_response resp[3];
        struct http1_reader r;
        http1_init(&r, resp, 3);
        CHECK(http1_feed(&r, three, cut) && http1_feed(&r, three + cut, n - cut));
        check_three(&r, resp);
    }
    struct http1_response resp[3];
    struct http1_reader r;
    http1_init(&r, resp, 3);
    for (size_t i = 0; i < n; i++) {
        CHECK(http1_feed(&r, three + i, 1));
        if (i == 0)
            CHECK(r.begun == 1 && r.done == 0); /* the first byte begins the first response */
        if (i + 1 == strstr(three, "HTTP/1.1 404") - three)
            CHECK(r.done == 1 && r.begun == 1); /* the first ended, the second not begun */
    }
    check_three(&r, resp);
}

static void refusals(void) {
    struct http1_response resp[1];
    struct http1_reader r;
    http1_init(&r, resp, 1);
    CHECK(!http1_feed(&r, "SSH-2.0-x\r\n\r\n", 13) && r.error);
    http1_init(&r, resp, 1);
    CHECK(!http1_feed(&r, "HTTP/1.1 200 OK\r\n\r\n", 19) && strstr(r.error, "Content-Length"));
    http1_init(&r, resp, 1);
    const char two[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxH";
    CHECK(!http1_feed(&r, two, sizeof two - 1) && r.done == 1 && strstr(r.error, "more bytes"));
    CHECK(!http1_feed(&r, "x", 1)); /* stays failed */
    static char big[HTTP1_MAX_HEAD + 10];
    memset(big, 'a', sizeof big);
    http1_init(&r, resp, 1);
    CHECK(!http1_feed(&r, big, sizeof big) && strstr(r.error, "too long"));
}

int main(void) {
    whole_and_split();
    refusals();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
