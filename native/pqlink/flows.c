#define _GNU_SOURCE
#include "flows.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define SPILL 0x80000000u

_Static_assert(sizeof(struct flow_key) == 40, "flow_key is hashed as five 64-bit words");
_Static_assert(FLOW_MAX_CAPACITY < SPILL / 2, "index entries must not reach the SPILL bit");

/* ---- parsing ---------------------------------------------------------------------------------- */

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

#define QUIC_V2 0x6b3343cfu /* RFC 9369: its Initial is long-header type 1, not 0 */

/* A QUIC Initial (RFC 9000 §17.2, RFC 9369 §3.2): the long-header bit, a version other than 0
 * (Version Negotiation), the Initial type of that version, connection IDs of at most 20 bytes
 * inside the datagram. *scid gets a signature of the source connection ID. Only the first packet of
 * the datagram counts: a client's first datagram of a connection starts with its Initial. */
static bool quic_initial(const uint8_t *d, size_t n, uint64_t *scid)
{
    if (n < 7 || !(d[0] & 0x80))
        return false;
    uint32_t version = be32(d + 1);
    unsigned type = (d[0] >> 4) & 3;
    if (!version || type != (version == QUIC_V2 ? 1u : 0u))
        return false;
    size_t dcil = d[5];
    if (dcil > 20 || 7 + dcil > n)
        return false;
    size_t scil = d[6 + dcil];
    if (scil > 20 || 7 + dcil + scil > n)
        return false;
    uint64_t h = (1469598103934665603ULL ^ scil) * 1099511628211ULL;
    for (size_t i = 0; i < scil; i++)
        h = (h ^ d[7 + dcil + i]) * 1099511628211ULL;
    *scid = h | 1; /* 0 means none */
    return true;
}

int flow_parse(const uint8_t *pkt, size_t len, int dir, struct flow_pkt *out)
{
    memset(out, 0, sizeof(*out));
    if (!pkt || len < 20)
        return -1;
    const uint8_t *src, *dst;
    size_t alen, l4, end; /* address length, transport header offset, end of the IP packet */
    uint8_t proto;
    if (pkt[0] >> 4 == 4) {
        size_t ihl = (size_t)(pkt[0] & 15) * 4;
        end = be16(pkt + 2);
        if (ihl < 20 || end < ihl || end > len)
            return -1;
        if (be16(pkt + 6) & 0x3fff)
            return -1; /* a fragment (more fragments, or an offset): no transport header to trust */
        proto = pkt[9];
        src = pkt + 12, dst = pkt + 16, alen = 4, l4 = ihl;
        out->key.family = 4;
    } else if (pkt[0] >> 4 == 6) {
        if (len < 40)
            return -1;
        end = 40 + (size_t)be16(pkt + 4);
        if (end > len)
            return -1;
        proto = pkt[6];
        l4 = 40;
        /* hop-by-hop, routing and destination options only carry a length we can skip; anything
         * else (fragment, ESP, ...) hides the transport header */
        for (int i = 0; i < 8 && (proto == 0 || proto == 43 || proto == 60); i++) {
            if (l4 + 8 > end)
                return -1;
            proto = pkt[l4];
            l4 += ((size_t)pkt[l4 + 1] + 1) * 8;
        }
        src = pkt + 8, dst = pkt + 24, alen = 16;
        out->key.family = 6;
    } else {
        return -1;
    }
    if (proto == IPPROTO_TCP) {
        if (l4 + 20 > end)
            return -1;
        size_t doff = (size_t)(pkt[l4 + 12] >> 4) * 4;
        if (doff < 20 || l4 + doff > end)
            return -1;
        uint8_t flags = pkt[l4 + 13];
        out->payload = (uint32_t)(end - l4 - doff);
        out->seq = be32(pkt + l4 + 4);
        out->fin = flags & 0x01;
        out->syn = flags & 0x02;
        out->rst = flags & 0x04;
        out->ack = flags & 0x10;
        out->psh = flags & 0x08;
    } else if (proto == IPPROTO_UDP) {
        if (l4 + 8 > end)
            return -1;
        out->payload = (uint32_t)(end - l4 - 8);
        out->quic_initial = quic_initial(pkt + l4 + 8, out->payload, &out->quic_scid);
    } else {
        return -1;
    }
    uint16_t sport = be16(pkt + l4), dport = be16(pkt + l4 + 2);
    bool c2s = dir == DIR_C2S;
    out->key.proto = proto;
    out->key.client_port = c2s ? sport : dport;
    out->key.server_port = c2s ? dport : sport;
    memcpy(out->key.client, c2s ? src : dst, alen);
    memcpy(out->key.server, c2s ? dst : src, alen);
    out->ip_len = (uint32_t)len;
    return 0;
}

/* ---- the table -------------------------------------------------------------------------------- */

int flows_init(struct flow_table *t, size_t capacity)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    if (!capacity)
        return 0;
    /* Connections turned away when full keep their key (up to as many again), so each is counted
     * once; the index stays under half full with both, which keeps probe sequences short. */
    size_t slots = 16;
    while (slots < 4 * capacity)
        slots <<= 1;
    /* Datagram lists: a quarter chunk per connection of capacity (enough for a handshake's
     * datagrams in every one), at least one whole list. */
    size_t chunks = capacity / 4 < FLOW_DGRAMS / FLOW_DGRAM_CHUNK ? FLOW_DGRAMS / FLOW_DGRAM_CHUNK : capacity / 4;
    t->flows = calloc(capacity, sizeof(*t->flows));
    t->spill = calloc(capacity, sizeof(*t->spill));
    t->index = calloc(slots, sizeof(*t->index));
    t->dgrams = calloc(chunks * FLOW_DGRAM_CHUNK, sizeof(*t->dgrams));
    if (!t->flows || !t->spill || !t->index || !t->dgrams) {
        flows_destroy(t);
        return -1;
    }
    t->capacity = t->spill_capacity = capacity;
    t->dgram_chunks = chunks;
    t->mask = slots - 1;
    return 0;
}

void flows_destroy(struct flow_table *t)
{
    free(t->flows);
    free(t->spill);
    free(t->index);
    free(t->dgrams);
    t->flows = NULL;
    t->spill = NULL;
    t->index = NULL;
    t->dgrams = NULL;
    t->capacity = 0;
    pthread_mutex_destroy(&t->lock);
}

void flows_reset(struct flow_table *t)
{
    if (!t->capacity)
        return;
    pthread_mutex_lock(&t->lock);
    memset(t->index, 0, (t->mask + 1) * sizeof(*t->index));
    t->used = t->spill_used = t->dgram_chunks_used = 0;
    t->untracked_flows = t->untracked_packets = 0;
    pthread_mutex_unlock(&t->lock);
}

static uint64_t key_hash(const struct flow_key *k)
{
    uint64_t w[5], h = 0x9e3779b97f4a7c15ULL;
    memcpy(w, k, sizeof(w));
    for (int i = 0; i < 5; i++) {
        h = (h ^ w[i]) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    return h;
}

static bool key_eq(const struct flow_key *a, const struct flow_key *b) { return !memcmp(a, b, sizeof(*a)); }

/* The index slot of key's current connection (or of its turned-away key), else the empty slot
 * where it belongs. Retired connections are passed over: a new one on the same ports follows. */
static uint32_t *find(struct flow_table *t, const struct flow_key *k)
{
    for (size_t i = key_hash(k) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t v = t->index[i];
        if (!v)
            return &t->index[i];
        if (v & SPILL) {
            if (key_eq(&t->spill[(v & ~SPILL) - 1], k))
                return &t->index[i];
        } else if (!t->flows[v - 1].retired && key_eq(&t->flows[v - 1].key, k)) {
            return &t->index[i];
        }
    }
}

static void flow_start(struct flow *f, const struct flow_key *k)
{
    memset(f, 0, sizeof(*f));
    f->key = *k;
    f->open_ns = f->syn_ns = f->synack_ns = f->fin_ns = FLOW_NO_TIME;
    for (int d = 0; d < 2; d++)
        f->side[d].first_ns = f->side[d].last_ns = FLOW_NO_TIME;
    f->flight_dir = -1;
}

/* The record of key's connection, a new one if needed (*created set); NULL once the table is full. */
static struct flow *record_for(struct flow_table *t, const struct flow_key *k, bool *created)
{
    uint32_t *slot = find(t, k);
    *created = false;
    if (*slot & SPILL)
        return NULL;
    if (*slot)
        return &t->flows[*slot - 1];
    if (t->used == t->capacity) {
        if (t->spill_used < t->spill_capacity) { /* beyond that, untracked_flows is a lower bound */
            t->spill[t->spill_used++] = *k;
            *slot = SPILL | (uint32_t)t->spill_used;
            t->untracked_flows++;
        }
        return NULL;
    }
    struct flow *f = &t->flows[t->used++];
    flow_start(f, k);
    *slot = (uint32_t)t->used;
    *created = true;
    return f;
}

/* ---- what each packet tells ------------------------------------------------------------------- */

static bool seq_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; } /* modulo 2^32 */

/* A client SYN on known ports with a new initial sequence number is a new connection (a port
 * reused after TIME_WAIT, or the first SYN after a reset caught the old one's last packets); so is
 * a client QUIC Initial with a source connection ID other than the one the record has (a client
 * keeps its SCID through retransmissions and a Retry, and draws a new one per connection). */
static bool new_connection(const struct flow *f, const struct flow_pkt *p)
{
    const struct flow_side *c = &f->side[DIR_C2S];
    if (p->key.proto == IPPROTO_UDP)
        return p->quic_initial && f->quic_scid && f->quic_scid != p->quic_scid;
    return p->syn && !p->ack && (!c->syn_seen || c->isn != p->seq);
}

/* Retransmissions, judged at the arrival into the link where the sender's behaviour shows: a
 * repeated SYN (or SYN-ACK), or payload that ends at or before the highest sequence end seen. */
static void note_sender(struct flow_side *s, const struct flow_pkt *p)
{
    if (p->key.proto != IPPROTO_TCP)
        return;
    uint32_t end = p->seq + p->payload + p->syn + p->fin;
    bool rexmit;
    if (p->syn) {
        rexmit = s->syn_seen;
        if (!s->syn_seen)
            s->isn = p->seq;
        s->syn_seen = true;
    } else {
        rexmit = p->payload && s->seq_valid && !seq_before(s->seq_high, end);
    }
    s->retrans += rexmit;
    if (!s->seq_valid || seq_before(s->seq_high, end))
        s->seq_high = end;
    s->seq_valid = true;
}

/* Pure ACKs neither start nor end a flight; payload going the other way ends it. */
static void note_flight(struct flow *f, int dir, uint32_t payload, bool push, int64_t now)
{
    if (f->flight_dir != dir) {
        f->flight_dir = (int8_t)dir;
        if (f->nflights == FLOW_FLIGHTS) {
            f->flights_overflow++;
            return;
        }
        f->flights[f->nflights++] = (struct flight){.first_ns = now, .dir = (uint8_t)dir};
    } else if (f->flights_overflow) {
        return; /* the flight in progress is one of the uncounted ones */
    }
    struct flight *fl = &f->flights[f->nflights - 1];
    fl->last_ns = now;
    fl->packets++;
    fl->pushes += push;
    fl->bytes += payload;
}

static struct flow_dgram *dgram_at(struct flow_table *t, const struct flow *f, unsigned i)
{
    return &t->dgrams[(size_t)f->dgram_chunks[i / FLOW_DGRAM_CHUNK] * FLOW_DGRAM_CHUNK + i % FLOW_DGRAM_CHUNK];
}

/* Lists a datagram while the connection has room and the pool a chunk; counts it otherwise. The
 * pool only refills at a reset, so a list is always its connection's first datagrams. */
static void list_dgram(struct flow_table *t, struct flow *f, int dir, const struct flow_pkt *p, uint64_t id,
                       int64_t now)
{
    unsigned i = f->ndgrams;
    if (i == FLOW_DGRAMS || f->dgrams_overflow) {
        f->dgrams_overflow++;
        return;
    }
    if (i % FLOW_DGRAM_CHUNK == 0) {
        if (t->dgram_chunks_used == t->dgram_chunks) {
            f->dgrams_overflow++;
            return;
        }
        f->dgram_chunks[i / FLOW_DGRAM_CHUNK] = (uint32_t)t->dgram_chunks_used++;
    }
    *dgram_at(t, f, i) = (struct flow_dgram){.t_ns = now, .id = (uint32_t)id, .bytes = (uint16_t)p->payload,
                                             .dir = (uint8_t)dir,
                                             .fate = dir == DIR_C2S ? DGRAM_IN_FLIGHT : DGRAM_DELIVERED};
    f->ndgrams++;
}

/* What the link did with the client's datagram id. Deliveries come mostly in order, so the one
 * sought is usually the first unsettled. */
static void settle_dgram(struct flow_table *t, struct flow *f, uint64_t id, enum dgram_fate fate)
{
    for (unsigned i = f->dgram_unsettled; i < f->ndgrams; i++) {
        struct flow_dgram *d = dgram_at(t, f, i);
        if (d->dir == DIR_C2S && d->fate == DGRAM_IN_FLIGHT && d->id == (uint32_t)id) {
            d->fate = (uint8_t)fate;
            break;
        }
    }
    while (f->dgram_unsettled < f->ndgrams && dgram_at(t, f, f->dgram_unsettled)->fate != DGRAM_IN_FLIGHT)
        f->dgram_unsettled++;
}

/* The packet as a capture at the client shows it, at time now. */
static void note_client_side(struct flow_table *t, struct flow *f, int dir, const struct flow_pkt *p, uint64_t id,
                             int64_t now)
{
    struct flow_side *s = &f->side[dir];
    if (f->open_ns == FLOW_NO_TIME || now < f->open_ns) /* the two threads may take the lock out of order */
        f->open_ns = now;
    if (s->first_ns == FLOW_NO_TIME)
        s->first_ns = now;
    s->last_ns = now;
    s->packets++;
    s->bytes += p->ip_len;
    s->payload_bytes += p->payload;
    if (p->key.proto == IPPROTO_TCP) {
        if (dir == DIR_C2S && p->syn && !p->ack && f->syn_ns == FLOW_NO_TIME)
            f->syn_ns = now;
        if (dir == DIR_S2C && p->syn && p->ack && f->synack_ns == FLOW_NO_TIME)
            f->synack_ns = now;
        if ((p->fin || p->rst) && f->fin_ns == FLOW_NO_TIME)
            f->fin_ns = now;
    } else {
        if (dir == DIR_C2S && p->quic_initial && !f->quic_scid)
            f->quic_scid = p->quic_scid;
        list_dgram(t, f, dir, p, id, now);
    }
    if (p->payload)
        note_flight(f, dir, p->payload, p->psh, now);
}

static void note(struct flow_table *t, int dir, enum flow_event ev, const uint8_t *pkt, size_t len, uint64_t id,
                 int64_t now, int64_t late);

void flows_note(struct flow_table *t, int dir, enum flow_event ev, const uint8_t *pkt, size_t len, uint64_t id,
                int64_t now)
{
    note(t, dir, ev, pkt, len, id, now, 0);
}

void flows_delivered(struct flow_table *t, int dir, const uint8_t *pkt, size_t len, uint64_t id, int64_t now,
                     int64_t late)
{
    note(t, dir, FLOW_DELIVERY, pkt, len, id, now, late);
}

static void note(struct flow_table *t, int dir, enum flow_event ev, const uint8_t *pkt, size_t len, uint64_t id,
                 int64_t now, int64_t late)
{
    if (!t->capacity)
        return;
    struct flow_pkt p;
    bool parsed = flow_parse(pkt, len, dir, &p) == 0;
    if (!parsed && ev != FLOW_ARRIVAL)
        return; /* untracked packets are counted once, at their arrival */
    bool client_dgram = dir == DIR_C2S && p.key.proto == IPPROTO_UDP;
    if (ev == FLOW_DELIVERY && dir == DIR_C2S && late <= 0 && !client_dgram)
        return; /* the client saw its own packets when they arrived; only their lateness is news
                   (and a datagram's fate, for its list) */
    pthread_mutex_lock(&t->lock);
    bool created = false;
    struct flow *f = parsed ? record_for(t, &p.key, &created) : NULL;
    if (f && !created && ev == FLOW_ARRIVAL && dir == DIR_C2S && new_connection(f, &p)) {
        f->retired = true;
        f = record_for(t, &p.key, &created);
    }
    if (!f) {
        if (ev == FLOW_ARRIVAL)
            t->untracked_packets++;
    } else if (ev == FLOW_ARRIVAL) {
        note_sender(&f->side[dir], &p);
        if (dir == DIR_C2S)
            note_client_side(t, f, dir, &p, id, now);
    } else if (ev == FLOW_DELIVERY) {
        if (late > 0 && (uint64_t)late > f->side[dir].late_max_ns)
            f->side[dir].late_max_ns = (uint64_t)late;
        if (dir == DIR_S2C)
            note_client_side(t, f, dir, &p, id, now);
        else if (client_dgram)
            settle_dgram(t, f, id, DGRAM_DELIVERED);
    } else {
        f->side[dir].lost += ev == FLOW_LOST;
        f->side[dir].queue_drops += ev == FLOW_QUEUE_DROP;
        if (client_dgram)
            settle_dgram(t, f, id, ev == FLOW_LOST ? DGRAM_LOST : DGRAM_QUEUE_DROP);
    }
    pthread_mutex_unlock(&t->lock);
}

/* ---- JSON ------------------------------------------------------------------------------------- */

static void put_time(FILE *out, const char *name, int64_t t)
{
    if (t == FLOW_NO_TIME)
        fprintf(out, "\"%s\":null", name);
    else
        fprintf(out, "\"%s\":%lld", name, (long long)t);
}

static void put_endpoint(FILE *out, const char *name, const struct flow_key *k, const uint8_t *addr, uint16_t port)
{
    char a[INET6_ADDRSTRLEN] = "?";
    inet_ntop(k->family == 4 ? AF_INET : AF_INET6, addr, a, sizeof(a));
    fprintf(out, k->family == 4 ? "\"%s\":\"%s:%u\"" : "\"%s\":\"[%s]:%u\"", name, a, port);
}

static void put_side(FILE *out, const char *name, const struct flow_side *s)
{
    fprintf(out, "\"%s\":{", name);
    put_time(out, "first_ns", s->first_ns);
    fputc(',', out);
    put_time(out, "last_ns", s->last_ns);
    fprintf(out, ",\"packets\":%llu,\"bytes\":%llu,\"payload_bytes\":%llu,\"retrans\":%llu,\"lost\":%llu,"
                 "\"queue_drops\":%llu,\"late_max_ns\":%llu}",
            (unsigned long long)s->packets, (unsigned long long)s->bytes, (unsigned long long)s->payload_bytes,
            (unsigned long long)s->retrans, (unsigned long long)s->lost, (unsigned long long)s->queue_drops,
            (unsigned long long)s->late_max_ns);
}

static const char *const fate_names[] = {"in_flight", "delivered", "lost", "queue_drop"};

/* dgrams: the connection's listed datagrams (f->ndgrams), in the order the table received them. */
static void put_flow(FILE *out, const struct flow *f, struct flow_dgram *dgrams)
{
    fprintf(out, "{\"proto\":\"%s\",", f->key.proto == IPPROTO_TCP ? "tcp" : "udp");
    put_endpoint(out, "client", &f->key, f->key.client, f->key.client_port);
    fputc(',', out);
    put_endpoint(out, "server", &f->key, f->key.server, f->key.server_port);
    const char *names[] = {"open_ns", "syn_ns", "synack_ns", "fin_ns"};
    const int64_t times[] = {f->open_ns, f->syn_ns, f->synack_ns, f->fin_ns};
    for (int i = 0; i < 4; i++) {
        fputc(',', out);
        put_time(out, names[i], times[i]);
    }
    for (int d = 0; d < 2; d++) {
        fputc(',', out);
        put_side(out, dir_names[d], &f->side[d]);
    }
    fputs(",\"flights\":[", out);
    for (uint32_t i = 0; i < f->nflights; i++) {
        const struct flight *fl = &f->flights[i];
        fprintf(out, "%s{\"dir\":\"%s\",\"first_ns\":%lld,\"last_ns\":%lld,\"packets\":%u,\"pushes\":%u,"
                "\"bytes\":%llu}", i ? "," : "", dir_names[fl->dir], (long long)fl->first_ns, (long long)fl->last_ns,
                fl->packets, fl->pushes, (unsigned long long)fl->bytes);
    }
    fprintf(out, "],\"flights_overflow\":%llu", (unsigned long long)f->flights_overflow);
    if (f->key.proto == IPPROTO_UDP) {
        /* The two threads may take the lock a little out of their clocks' order: list by time
         * (a stable insertion sort; the list is nearly sorted). */
        for (unsigned i = 1; i < f->ndgrams; i++) {
            struct flow_dgram d = dgrams[i];
            unsigned j = i;
            for (; j > 0 && dgrams[j - 1].t_ns > d.t_ns; j--)
                dgrams[j] = dgrams[j - 1];
            dgrams[j] = d;
        }
        fputs(",\"datagrams\":[", out);
        for (unsigned i = 0; i < f->ndgrams; i++)
            fprintf(out, "%s[\"%s\",%lld,%u,\"%s\"]", i ? "," : "", dir_names[dgrams[i].dir],
                    (long long)dgrams[i].t_ns, dgrams[i].bytes, fate_names[dgrams[i].fate]);
        fprintf(out, "],\"datagrams_overflow\":%llu", (unsigned long long)f->dgrams_overflow);
    }
    fputs("}\n", out);
}

int flows_write_json(struct flow_table *t, FILE *out, struct flows_summary *sum)
{
    memset(sum, 0, sizeof(*sum));
    if (!t->capacity)
        return 0;
    /* One record at a time under the lock, written outside it: the forwarding threads wait at most
     * for one copy, never for the file. */
    struct flow f;
    struct flow_dgram dgrams[FLOW_DGRAMS];
    for (size_t i = 0;; i++) {
        pthread_mutex_lock(&t->lock);
        bool more = i < t->used;
        if (more) {
            f = t->flows[i];
            for (unsigned k = 0; k < f.ndgrams; k++)
                dgrams[k] = *dgram_at(t, &f, k);
        }
        pthread_mutex_unlock(&t->lock);
        if (!more)
            break;
        put_flow(out, &f, dgrams);
        sum->flows++;
    }
    pthread_mutex_lock(&t->lock);
    sum->untracked_flows = t->untracked_flows;
    sum->untracked_packets = t->untracked_packets;
    pthread_mutex_unlock(&t->lock);
    return ferror(out) ? -1 : 0;
}

int flows_write_file(struct flow_table *t, const char *path, struct flows_summary *sum, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "open(%s): %s", path, strerror(errno));
        return -1;
    }
    if (fchmod(fd, 0600) < 0) { /* an existing file keeps its mode through O_CREAT */
        snprintf(err, errlen, "fchmod(%s): %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    FILE *out = fdopen(fd, "w");
    if (!out) {
        snprintf(err, errlen, "fdopen(%s): %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    int rc = flows_write_json(t, out, sum);
    int e = errno;
    if (fclose(out) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc < 0)
        snprintf(err, errlen, "write(%s): %s", path, strerror(e));
    return rc;
}
