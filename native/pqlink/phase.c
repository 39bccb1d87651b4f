#include "phase.h"

#include <string.h>

#include "config.h"
#include "flows.h"

#define PHASE_STREAM 1001 /* apart from loss, jitter and PIE */

static uint64_t u_to_bits(double u)
{
    union { double d; uint64_t b; } x = {.d = u};
    return x.b;
}

void phase_init(struct trace_phase *ph, uint64_t seed)
{
    memset(ph, 0, sizeof(*ph));
    phase_reseed(ph, seed);
}

void phase_reseed(struct trace_phase *ph, uint64_t seed)
{
    rng_seed(&ph->rng, seed, PHASE_STREAM);
    cnt_set(&ph->restarts, 0);
    atomic_store_explicit(&ph->first_u_bits, 0, memory_order_relaxed);
    atomic_store_explicit(&ph->last_u_bits, 0, memory_order_relaxed);
    memset(ph->recent, 0, sizeof(ph->recent));
    ph->next_recent = 0;
}

void phase_restart(struct trace_phase *ph, int64_t now)
{
    double u = rng_uniform(&ph->rng);
    uint64_t s = atomic_load_explicit(&ph->seq, memory_order_relaxed);
    atomic_store_explicit(&ph->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&ph->at, now, memory_order_relaxed);
    atomic_store_explicit(&ph->u_bits, u_to_bits(u), memory_order_relaxed);
    atomic_store_explicit(&ph->gen, atomic_load_explicit(&ph->gen, memory_order_relaxed) + 1, memory_order_relaxed);
    atomic_store_explicit(&ph->seq, s + 2, memory_order_release);
    if (cnt_get(&ph->restarts) == 0)
        atomic_store_explicit(&ph->first_u_bits, u_to_bits(u), memory_order_relaxed);
    atomic_store_explicit(&ph->last_u_bits, u_to_bits(u), memory_order_relaxed);
    cnt_add(&ph->restarts, 1);
}

/* A signature of (connection, initial sequence number) for a SYN, of (connection, the client's
 * source connection ID) for a QUIC Initial: a retransmission repeats it, and so do the client's
 * later Initials (after the server's first one or a Retry, which change only the destination ID). */
static uint64_t connection_signature(const struct flow_pkt *fp)
{
    const uint8_t *k = (const uint8_t *)&fp->key;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof(fp->key); i++)
        h = (h ^ k[i]) * 1099511628211ULL;
    uint64_t id = fp->key.proto == 6 ? fp->seq : fp->quic_scid;
    h = (h ^ (uint32_t)id) * 1099511628211ULL;
    h = (h ^ (id >> 32)) * 1099511628211ULL;
    return h | 1; /* 0 marks an empty slot */
}

/* What opens a client connection: a TCP SYN without ACK, or a QUIC Initial. */
static bool opens_connection(const struct flow_pkt *fp)
{
    return fp->key.proto == 6 ? fp->syn && !fp->ack : fp->quic_initial;
}

bool phase_note(struct trace_phase *ph, const uint8_t *pkt, size_t len, int64_t now)
{
    if (len < 20 || !atomic_load_explicit(&ph->active, memory_order_relaxed))
        return false;
    struct flow_pkt fp;
    if (flow_parse(pkt, len, DIR_C2S, &fp) < 0 || !opens_connection(&fp))
        return false;
    uint64_t sig = connection_signature(&fp);
    for (unsigned i = 0; i < PHASE_RECENT; i++)
        if (ph->recent[i] == sig)
            return false;
    ph->recent[ph->next_recent] = sig;
    ph->next_recent = (ph->next_recent + 1) % PHASE_RECENT;
    phase_restart(ph, now);
    return true;
}

bool phase_poll(struct trace_phase *ph, uint64_t *seen, int64_t *at, double *u)
{
    if (atomic_load_explicit(&ph->gen, memory_order_relaxed) == *seen)
        return false;
    for (;;) {
        uint64_t s1 = atomic_load_explicit(&ph->seq, memory_order_acquire);
        if (s1 & 1)
            continue;
        uint64_t g = atomic_load_explicit(&ph->gen, memory_order_relaxed);
        int64_t t = atomic_load_explicit(&ph->at, memory_order_relaxed);
        uint64_t b = atomic_load_explicit(&ph->u_bits, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&ph->seq, memory_order_relaxed) != s1)
            continue;
        if (g == *seen)
            return false;
        *seen = g;
        *at = t;
        *u = phase_bits_to_u(b);
        return true;
    }
}
