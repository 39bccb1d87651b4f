/*
 * The Open Quantum Safe hybrid framing of key shares, public keys and ciphertexts:
 * 4-byte big-endian length of the classical part, classical part, PQ part. The shared secret is
 * classical secret || PQ secret, without a prefix. Other layouts have no prefix, so callers can
 * use the same offsets for every algorithm.
 */
#include "pqprov.h"

#define PREFIX_LEN 4

size_t pqp_hybrid_prefix_len(const struct pqp_alg *a) {
    return a->layout == PQP_LAYOUT_OQS_HYBRID ? PREFIX_LEN : 0;
}

size_t pqp_hybrid_put_prefix(const struct pqp_alg *a, unsigned char *out) {
    if (a->layout != PQP_LAYOUT_OQS_HYBRID)
        return 0;
    size_t c = a->classical_len;
    out[0] = (unsigned char)(c >> 24), out[1] = (unsigned char)(c >> 16);
    out[2] = (unsigned char)(c >> 8), out[3] = (unsigned char)c;
    return PREFIX_LEN;
}

/* The length is fixed per algorithm, so a peer's prefix must state exactly ours. */
int pqp_hybrid_check_prefix(const struct pqp_alg *a, const unsigned char *in) {
    if (a->layout != PQP_LAYOUT_OQS_HYBRID)
        return 1;
    uint32_t clen = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
    if (clen != a->classical_len) {
        PQP_RAISE(PQP_R_BAD_ENCODING, "%s: classical share length %u, expected %zu", a->name, clen, a->classical_len);
        return 0;
    }
    return 1;
}

size_t pqp_hybrid_pq_offset(const struct pqp_alg *a) {
    return a->classical ? pqp_hybrid_prefix_len(a) + a->classical_len : 0;
}
