/* The little DER that keys need: AlgorithmIdentifier (OID, no parameters), SubjectPublicKeyInfo
 * and PKCS#8 PrivateKeyInfo (version 0, privateKey = secret key || public key). Written and read
 * here rather than with d2i_X509_PUBKEY, which would call back into the decoders. */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/objects.h>

#include "pqprov.h"

static size_t len_size(size_t n) {
    return n < 0x80 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 4;
}

static unsigned char *put_header(unsigned char *p, unsigned char tag, size_t n) {
    *p++ = tag;
    size_t ls = len_size(n);
    if (ls == 1) {
        *p++ = (unsigned char)n;
    } else {
        *p++ = (unsigned char)(0x80 | (ls - 1));
        for (size_t i = ls - 1; i > 0; i--)
            *p++ = (unsigned char)(n >> (8 * (i - 1)));
    }
    return p;
}

static size_t tlv_size(size_t n) {
    return 1 + len_size(n) + n;
}

static size_t oid_content(const struct pqp_alg *alg, unsigned char *out, size_t cap) {
    ASN1_OBJECT *obj = alg->oid ? OBJ_txt2obj(alg->oid, 1) : NULL;
    size_t n = obj ? OBJ_length(obj) : 0;
    if (n && n <= cap)
        memcpy(out, OBJ_get0_data(obj), n);
    ASN1_OBJECT_free(obj);
    return n <= cap ? n : 0;
}

size_t pqp_der_algorithm_id(const struct pqp_alg *alg, unsigned char *out, size_t cap) {
    unsigned char oid[48];
    size_t n = oid_content(alg, oid, sizeof oid);
    if (!n || tlv_size(tlv_size(n)) > cap)
        return 0;
    unsigned char *p = put_header(out, 0x30, tlv_size(n));
    p = put_header(p, 0x06, n);
    memcpy(p, oid, n);
    return (size_t)(p + n - out);
}

size_t pqp_der_spki(const struct pqp_alg *alg, const unsigned char *pub, size_t len, unsigned char **out) {
    unsigned char algid[64];
    size_t an = pqp_der_algorithm_id(alg, algid, sizeof algid);
    if (!an)
        return 0;
    size_t body = an + tlv_size(len + 1), total = tlv_size(body);
    unsigned char *der = OPENSSL_malloc(total), *p = der;
    if (!der)
        return 0;
    p = put_header(p, 0x30, body);
    memcpy(p, algid, an);
    p = put_header(p + an, 0x03, len + 1);
    *p++ = 0; /* no unused bits */
    memcpy(p, pub, len);
    *out = der;
    return total;
}

size_t pqp_der_p8(const struct pqp_alg *alg, const unsigned char *priv, size_t len, unsigned char **out) {
    unsigned char algid[64];
    size_t an = pqp_der_algorithm_id(alg, algid, sizeof algid);
    if (!an)
        return 0;
    size_t body = 3 + an + tlv_size(len), total = tlv_size(body);
    unsigned char *der = OPENSSL_secure_malloc(total), *p = der;
    if (!der)
        return 0;
    p = put_header(p, 0x30, body);
    *p++ = 0x02, *p++ = 0x01, *p++ = 0x00; /* version 0 */
    memcpy(p, algid, an);
    p = put_header(p + an, 0x04, len);
    memcpy(p, priv, len);
    *out = der;
    return total;
}

/* Reads one TLV with the expected tag; returns its content and advances *p. */
static int get(const unsigned char **p, const unsigned char *end, unsigned char tag, const unsigned char **content,
               size_t *n) {
    const unsigned char *q = *p;
    if (end - q < 2 || *q++ != tag)
        return 0;
    size_t len = *q++;
    if (len & 0x80) {
        size_t ls = len & 0x7f;
        if (ls == 0 || ls > 3 || (size_t)(end - q) < ls)
            return 0;
        for (len = 0; ls; ls--)
            len = len << 8 | *q++;
    }
    if ((size_t)(end - q) < len)
        return 0;
    *content = q;
    *n = len;
    *p = q + len;
    return 1;
}

static const struct pqp_alg *get_algorithm(const unsigned char **p, const unsigned char *end) {
    const unsigned char *seq, *oid, *q;
    size_t seq_len, oid_len;
    if (!get(p, end, 0x30, &seq, &seq_len))
        return NULL;
    q = seq;
    if (!get(&q, seq + seq_len, 0x06, &oid, &oid_len) || q != seq + seq_len) /* parameters absent */
        return NULL;
    return pqp_alg_by_oid_der(oid, oid_len);
}

const struct pqp_alg *pqp_der_parse_spki(const unsigned char *der, size_t len, const unsigned char **body,
                                         size_t *body_len) {
    const unsigned char *p = der, *end = der + len, *seq, *bits;
    size_t seq_len, bits_len;
    if (!get(&p, end, 0x30, &seq, &seq_len) || p != end)
        return NULL;
    p = seq;
    end = seq + seq_len;
    const struct pqp_alg *alg = get_algorithm(&p, end);
    if (!alg || !get(&p, end, 0x03, &bits, &bits_len) || p != end || bits_len < 1 || bits[0] != 0)
        return NULL;
    *body = bits + 1;
    *body_len = bits_len - 1;
    return alg;
}

const struct pqp_alg *pqp_der_parse_p8(const unsigned char *der, size_t len, const unsigned char **body,
                                       size_t *body_len) {
    const unsigned char *p = der, *end = der + len, *seq, *ver, *oct;
    size_t seq_len, ver_len, oct_len;
    if (!get(&p, end, 0x30, &seq, &seq_len) || p != end)
        return NULL;
    p = seq;
    end = seq + seq_len;
    if (!get(&p, end, 0x02, &ver, &ver_len) || ver_len != 1 || ver[0] != 0)
        return NULL;
    const struct pqp_alg *alg = get_algorithm(&p, end);
    if (!alg || !get(&p, end, 0x04, &oct, &oct_len)) /* optional attributes after it are ignored */
        return NULL;
    *body = oct;
    *body_len = oct_len;
    return alg;
}
