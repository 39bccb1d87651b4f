/* A minimal HTTP/3 (RFC 9114) client's wire format: the control stream's preface, a GET request's HEADERS
 * frame and a response parser. Field sections are QPACK (RFC 9204) without the dynamic table: we advertise
 * a table capacity of 0, so the server may only use static-table references and literals. No I/O here. */
#ifndef PQTIMER_H3_H
#define PQTIMER_H3_H

#include <stddef.h>
#include <stdint.h>

#define H3_FRAME_DATA 0x00
#define H3_FRAME_HEADERS 0x01
#define H3_FRAME_SETTINGS 0x04
#define H3_STREAM_CONTROL 0x00
#define H3_MAX_FIELD_SECTION 16384 /* the response HEADERS frame we keep to read :status */

/* A QUIC variable-length integer (RFC 9000 16), which HTTP/3 frames use too: its length in bytes, 0 when
 * it is not complete in len. */
size_t quic_varint(const unsigned char *p, size_t len, uint64_t *v);

/* The client's control stream opening: its stream type and an empty SETTINGS frame (every setting at
 * its default: no dynamic table, no blocked streams). Returns the bytes written to out (cap >= 3). */
size_t h3_control_preface(unsigned char *out, size_t cap);

/* A HEADERS frame for GET https://authority/path; 0 when it does not fit in cap. */
size_t h3_get_request(unsigned char *out, size_t cap, const char *authority, const char *path);

/* A response read from its request stream, fed as it arrives. */
struct h3_response {
    int status;          /* from the first HEADERS frame; 0 until it is read */
    uint64_t body;       /* DATA payload bytes */
    const char *error;   /* the first malformation; the parser stops there */
    /* the frame being read */
    unsigned char head[16];
    size_t head_n;
    int in_frame;
    uint64_t type, left;
    unsigned char fields[H3_MAX_FIELD_SECTION];
    size_t fields_n;
};

void h3_response_init(struct h3_response *r);
/* Consumes n stream bytes; 0 when they are malformed (r->error says why). */
int h3_response_feed(struct h3_response *r, const unsigned char *p, size_t n);
/* The stream may end here: a status was read and no frame is cut short. */
int h3_response_complete(const struct h3_response *r);

/* QPACK's :status from an encoded field section (its first field line), or 0 and *error. */
int h3_qpack_status(const unsigned char *p, size_t n, const char **error);

#endif
