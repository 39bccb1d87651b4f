/* Unit tests of pqtimer's HTTP/3 wire format (h3.c): the request's QPACK encoding, :status in every
 * form a server without a dynamic table may send it, and the response parser fed byte by byte. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "h3.h"

static void request_encoding(void) {
    unsigned char out[256];
    size_t n = h3_get_request(out, sizeof out, "server.pqbench.test", "/1k");
    /* HEADERS, length, prefix 0 0, :method GET (17), :scheme https (23), :authority literal, :path literal */
    static const unsigned char want_head[] = {0x01, 0, 0x00, 0x00, 0xC0 | 17, 0xC0 | 23, 0x50, 19};
    CHECK(n == 2 + 2 + 2 + 2 + 19 + 2 + 3);
    CHECK(out[1] == n - 2);
    CHECK(!memcmp(out, want_head, 1) && !memcmp(out + 2, want_head + 2, 6));
    CHECK(!memcmp(out + 8, "server.pqbench.test", 19));
    CHECK(out[27] == 0x51 && out[28] == 3 && !memcmp(out + 29, "/1k", 3));
    /* the root path is one static-table entry */
    n = h3_get_request(out, sizeof out, "a", "/");
    CHECK(n == 2 + 2 + 2 + 3 + 1 && out[n - 1] == (0xC0 | 1));
    /* a request that does not fit is refused, not cut */
    CHECK(h3_get_request(out, 10, "server.pqbench.test", "/1k") == 0);
    CHECK(h3_control_preface(out, sizeof out) == 3 && out[0] == 0x00 && out[1] == 0x04 && out[2] == 0x00);
}

static void status_forms(void) {
    const char *err = NULL;
    static const unsigned char indexed_200[] = {0, 0, 0xC0 | 25};
    static const unsigned char indexed_500[] = {0, 0, 0xFF, 71 - 63}; /* index 71 needs a second byte */
    static const unsigned char literal_302[] = {0, 0, 0x50 | 0x0F, 24 - 15, 3, '3', '0', '2'};
    /* Huffman "201": '2' 00010, '0' 00000, '1' 00001, padded with ones: 00010000 00000011 */
    static const unsigned char huffman_201[] = {0, 0, 0x5F, 24 - 15, 0x80 | 2, 0x10, 0x03};
    /* Huffman "418": '4' 011010, '1' 00001, '8' 011110, padding 111: 01101000 00101111 01111111 */
    static const unsigned char huffman_418[] = {0, 0, 0x5F, 24 - 15, 0x80 | 3, 0x68, 0x2F, 0x7F};
    static const unsigned char named_204[] = {0, 0, 0x27, 0, ':', 's', 't', 'a', 't', 'u', 's', 3, '2', '0', '4'};
    static const unsigned char dynamic[] = {0x02, 0, 0x80};
    static const unsigned char not_status[] = {0, 0, 0xC0 | 17};
    CHECK(h3_qpack_status(indexed_200, sizeof indexed_200, &err) == 200);
    CHECK(h3_qpack_status(indexed_500, sizeof indexed_500, &err) == 500);
    CHECK(h3_qpack_status(literal_302, sizeof literal_302, &err) == 302);
    CHECK(h3_qpack_status(huffman_201, sizeof huffman_201, &err) == 201);
    CHECK(h3_qpack_status(huffman_418, sizeof huffman_418, &err) == 418);
    CHECK(h3_qpack_status(named_204, sizeof named_204, &err) == 204);
    err = NULL;
    CHECK(h3_qpack_status(dynamic, sizeof dynamic, &err) == 0 && err && strstr(err, "dynamic"));
    err = NULL;
    CHECK(h3_qpack_status(not_status, sizeof not_status, &err) == 0 && err);
}

static void response_parser(void) {
    /* an unknown (reserved) frame, an interim 103, the 200, DATA 5 + DATA 300, trailers */
    unsigned char s[512];
    size_t n = 0;
    s[n++] = 0x21; s[n++] = 2; s[n++] = 'x'; s[n++] = 'y';            /* reserved type 0x21 */
    s[n++] = 0x01; s[n++] = 3; s[n++] = 0; s[n++] = 0; s[n++] = 0xC0 | 24; /* 103 */
    s[n++] = 0x01; s[n++] = 3; s[n++] = 0; s[n++] = 0; s[n++] = 0xC0 | 25; /* 200 */
    s[n++] = 0x00; s[n++] = 5; memset(s + n, 'a', 5); n += 5;
    s[n++] = 0x00; s[n++] = 0x41; s[n++] = 0x2C; memset(s + n, 'b', 300); n += 300; /* length 300: two bytes */
    s[n++] = 0x01; s[n++] = 3; s[n++] = 0; s[n++] = 0; s[n++] = 0xC0 | 27; /* trailers: not the status */
    static struct h3_response r;
    h3_response_init(&r);
    for (size_t i = 0; i < n; i++) {
        CHECK(h3_response_feed(&r, s + i, 1));
        if (i + 1 < 12)
            CHECK(!h3_response_complete(&r));
    }
    CHECK(h3_response_complete(&r) && r.status == 200 && r.body == 305);
    /* cut inside a DATA frame: not complete */
    h3_response_init(&r);
    CHECK(h3_response_feed(&r, s, n - 150 - 5));
    CHECK(r.status == 200 && !h3_response_complete(&r));
    /* DATA before any HEADERS is malformed */
    static const unsigned char bad[] = {0x00, 1, 'z'};
    h3_response_init(&r);
    CHECK(!h3_response_feed(&r, bad, sizeof bad) && r.error);
}

int main(void) {
    request_encoding();
    status_forms();
    response_parser();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("test_h3: all checks passed\n");
    return failures != 0;
}
