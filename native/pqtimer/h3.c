#include "h3.h"

#include <string.h>

/* ---- integers: QUIC's variable-length ones (frames) and HPACK's prefixed ones (QPACK) ---------- */

static size_t varint_put(unsigned char *out, size_t cap, uint64_t v) {
    size_t n = v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
    if (n > cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        out[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    out[0] |= (unsigned char)((n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3) << 6);
    return n;
}

size_t quic_varint(const unsigned char *p, size_t len, uint64_t *v) {
    if (!len)
        return 0;
    size_t n = (size_t)1 << (p[0] >> 6);
    if (n > len)
        return 0;
    uint64_t x = p[0] & 0x3f;
    for (size_t i = 1; i < n; i++)
        x = x << 8 | p[i];
    *v = x;
    return n;
}

/* An integer with an N-bit prefix (RFC 7541 5.1) whose first byte already holds `flags` above the prefix. */
static size_t prefixed_put(unsigned char *out, size_t cap, int bits, unsigned char flags, uint64_t v) {
    uint64_t max = (1u << bits) - 1;
    size_t n = 0;
    if (!cap)
        return 0;
    if (v < max) {
        out[n++] = flags | (unsigned char)v;
        return n;
    }
    out[n++] = flags | (unsigned char)max;
    for (v -= max; v >= 128; v >>= 7) {
        if (n >= cap)
            return 0;
        out[n++] = (unsigned char)(0x80 | (v & 0x7f));
    }
    if (n >= cap)
        return 0;
    out[n++] = (unsigned char)v;
    return n;
}

static size_t prefixed_get(const unsigned char *p, size_t len, int bits, uint64_t *v) {
    if (!len)
        return 0;
    uint64_t max = (1u << bits) - 1, x = p[0] & max;
    size_t n = 1;
    if (x == max) {
        for (int shift = 0;; shift += 7) {
            if (n >= len || shift > 56)
                return 0;
            x += (uint64_t)(p[n] & 0x7f) << shift;
            if (!(p[n++] & 0x80))
                break;
        }
    }
    *v = x;
    return n;
}

/* ---- requests --------------------------------------------------------------------------------- */

size_t h3_control_preface(unsigned char *out, size_t cap) {
    if (cap < 3)
        return 0;
    out[0] = H3_STREAM_CONTROL;
    out[1] = H3_FRAME_SETTINGS;
    out[2] = 0; /* no settings: all at their defaults */
    return 3;
}

/* RFC 9204 Appendix A: the static table entries a GET uses. */
#define QPACK_AUTHORITY 0      /* :authority (name) */
#define QPACK_PATH_ROOT 1      /* :path / */
#define QPACK_METHOD_GET 17    /* :method GET */
#define QPACK_SCHEME_HTTPS 23  /* :scheme https */

/* A literal field line naming a static-table entry, its value unencoded (not Huffman). */
static size_t literal_with_name(unsigned char *out, size_t cap, unsigned name, const char *value) {
    size_t n = prefixed_put(out, cap, 4, 0x50 /* 01, N=0, T=1: static */, name), vlen = strlen(value);
    size_t m = n ? prefixed_put(out + n, cap - n, 7, 0x00 /* H=0 */, vlen) : 0;
    if (!m || n + m + vlen > cap)
        return 0;
    memcpy(out + n + m, value, vlen);
    return n + m + vlen;
}

static size_t indexed_static(unsigned char *out, size_t cap, unsigned index) {
    return prefixed_put(out, cap, 6, 0xC0 /* 1, T=1: static */, index);
}

size_t h3_get_request(unsigned char *out, size_t cap, const char *authority, const char *path) {
    unsigned char fields[1024];
    size_t n = 0, k;
    fields[n++] = 0; /* Required Insert Count: no dynamic table */
    fields[n++] = 0; /* Sign and Delta Base */
#define PUT(call) do { if (!(k = (call))) return 0; n += k; } while (0)
    PUT(indexed_static(fields + n, sizeof fields - n, QPACK_METHOD_GET));
    PUT(indexed_static(fields + n, sizeof fields - n, QPACK_SCHEME_HTTPS));
    PUT(literal_with_name(fields + n, sizeof fields - n, QPACK_AUTHORITY, authority));
    if (!strcmp(path, "/"))
        PUT(indexed_static(fields + n, sizeof fields - n, QPACK_PATH_ROOT));
    else
        PUT(literal_with_name(fields + n, sizeof fields - n, QPACK_PATH_ROOT, path));
#undef PUT
    size_t t = varint_put(out, cap, H3_FRAME_HEADERS);
    size_t l = t ? varint_put(out + t, cap - t, n) : 0;
    if (!l || t + l + n > cap)
        return 0;
    memcpy(out + t + l, fields, n);
    return t + l + n;
}

/* ---- responses -------------------------------------------------------------------------------- */

/* :status values of the static table (RFC 9204 Appendix A), by index; 0 = not a :status entry. */
static int static_status(uint64_t index) {
    static const int low[] = {103, 200, 304, 404, 503};          /* 24..28 */
    static const int high[] = {100, 204, 206, 302, 400, 403, 421, 425, 500}; /* 63..71 */
    if (index >= 24 && index <= 28)
        return low[index - 24];
    if (index >= 63 && index <= 71)
        return high[index - 63];
    return 0;
}

/* Three decimal digits, Huffman-coded (RFC 7541 Appendix B: '0'..'2' are 5 bits 00000..00010, '3'..'9'
 * are 6 bits 011001..011111) and padded with ones. */
static int huffman_status(const unsigned char *p, size_t n) {
    uint64_t bits = 0;
    size_t have = 0;
    for (size_t i = 0; i < n && i < 8; i++, have += 8)
        bits = bits << 8 | p[i];
    int status = 0;
    for (int d = 0; d < 3; d++) {
        if (have < 5)
            return 0;
        unsigned five = (unsigned)(bits >> (have - 5)) & 0x1f;
        if (five <= 2) {
            status = status * 10 + (int)five;
            have -= 5;
            continue;
        }
        if (have < 6)
            return 0;
        unsigned six = (unsigned)(bits >> (have - 6)) & 0x3f;
        if (six < 0x19)
            return 0;
        status = status * 10 + 3 + (int)(six - 0x19);
        have -= 6;
    }
    return status;
}

static int string_status(const unsigned char *p, size_t n, const char **error) {
    uint64_t len;
    size_t k = prefixed_get(p, n, 7, &len);
    if (!k || len > n - k) {
        *error = "QPACK: the :status value is cut short";
        return 0;
    }
    int status = 0;
    if (p[0] & 0x80)
        status = huffman_status(p + k, (size_t)len);
    else if (len == 3)
        for (int i = 0; i < 3; i++)
            status = p[k + i] >= '0' && p[k + i] <= '9' ? status * 10 + (p[k + i] - '0') : -1000;
    if (status < 100 || status > 999) {
        *error = "QPACK: the :status value is not a three-digit code";
        return 0;
    }
    return status;
}

int h3_qpack_status(const unsigned char *p, size_t n, const char **error) {
    uint64_t ric, base;
    size_t k = prefixed_get(p, n, 8, &ric);
    if (!k) {
        *error = "QPACK: empty field section";
        return 0;
    }
    if (ric) {
        *error = "QPACK: the server referred to a dynamic table we did not allow";
        return 0;
    }
    size_t m = prefixed_get(p + k, n - k, 7, &base);
    if (!m || k + m >= n) {
        *error = "QPACK: no field line";
        return 0;
    }
    p += k + m;
    n -= k + m;
    uint64_t index;
    if (p[0] & 0x80) { /* indexed field line */
        if (!(p[0] & 0x40) || !prefixed_get(p, n, 6, &index)) {
            *error = "QPACK: a dynamic-table reference";
            return 0;
        }
        int s = static_status(index);
        if (!s)
            *error = "QPACK: the first field is not :status";
        return s;
    }
    if ((p[0] & 0xC0) == 0x40) { /* literal with a name reference */
        size_t j = prefixed_get(p, n, 4, &index);
        if (!(p[0] & 0x10) || !j) {
            *error = "QPACK: a dynamic-table reference";
            return 0;
        }
        if (!static_status(index)) {
            *error = "QPACK: the first field is not :status";
            return 0;
        }
        return string_status(p + j, n - j, error);
    }
    if ((p[0] & 0xE0) == 0x20) { /* literal name: only unencoded ":status" */
        uint64_t len;
        size_t j = prefixed_get(p, n, 3, &len);
        if (!j || (p[0] & 0x08) || len != 7 || j + 7 > n || memcmp(p + j, ":status", 7)) {
            *error = "QPACK: the first field is not :status";
            return 0;
        }
        return string_status(p + j + 7, n - j - 7, error);
    }
    *error = "QPACK: a dynamic-table reference";
    return 0;
}

void h3_response_init(struct h3_response *r) {
    r->status = 0;
    r->body = 0;
    r->error = NULL;
    r->head_n = 0;
    r->in_frame = 0;
    r->fields_n = 0;
}

static void frame_done(struct h3_response *r) {
    r->in_frame = 0;
    if (r->type == H3_FRAME_HEADERS && !r->status) {
        r->status = h3_qpack_status(r->fields, r->fields_n, &r->error);
        if (!r->status && !r->error)
            r->error = "QPACK: no :status";
        if (r->status >= 100 && r->status < 200)
            r->status = 0; /* an interim response: the final one follows */
    }
}

int h3_response_feed(struct h3_response *r, const unsigned char *p, size_t n) {
    while (n && !r->error) {
        if (!r->in_frame) {
            r->head[r->head_n++] = *p++;
            n--;
            uint64_t type, len;
            size_t a = quic_varint(r->head, r->head_n, &type);
            size_t b = a ? quic_varint(r->head + a, r->head_n - a, &len) : 0;
            if (!b) {
                if (r->head_n == sizeof r->head)
                    r->error = "HTTP/3: malformed frame header";
                continue;
            }
            r->head_n = 0;
            r->type = type;
            r->left = len;
            r->in_frame = 1;
            if (type == H3_FRAME_HEADERS && !r->status) {
                if (len > sizeof r->fields) {
                    r->error = "HTTP/3: response headers too long";
                    break;
                }
                r->fields_n = 0;
            }
            if (type == H3_FRAME_DATA && !r->status) {
                r->error = "HTTP/3: DATA before the response's HEADERS";
                break;
            }
            if (!len)
                frame_done(r);
            continue;
        }
        size_t take = n < r->left ? n : (size_t)r->left;
        if (r->type == H3_FRAME_DATA)
            r->body += take;
        else if (r->type == H3_FRAME_HEADERS && !r->status) {
            memcpy(r->fields + r->fields_n, p, take);
            r->fields_n += take;
        }
        p += take;
        n -= take;
        r->left -= take;
        if (!r->left)
            frame_done(r);
    }
    return !r->error;
}

int h3_response_complete(const struct h3_response *r) {
    return !r->error && r->status && !r->in_frame && !r->head_n;
}
