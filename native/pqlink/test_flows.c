/* Unit tests of the wire recorder (flows.c), alone and behind the pipeline, on a virtual clock. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "flows.h"
#include "pipeline.h"

#include "check.h"

#define MS 1000000LL
#define C2S DIR_C2S
#define S2C DIR_S2C
enum { F_FIN = 0x01, F_SYN = 0x02, F_RST = 0x04, F_PSH = 0x08, F_ACK = 0x10 };

/* ---- packets -------------------------------------------------------------------------------- */

struct ep {
    const char *addr; /* IPv4 or IPv6 text */
    uint16_t port;
};

static const struct ep CLIENT = {"10.9.0.1", 40000}, SERVER = {"10.9.0.2", 4433};

struct raw {
    uint8_t b[2048];
    size_t len;
};

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16), put16(p + 2, v); }

/* An IP packet from src to dst carrying a transport header of hlen bytes and payload bytes. */
static uint8_t *ip_packet(struct raw *r, struct ep src, struct ep dst, uint8_t proto, size_t hlen, uint32_t payload)
{
    memset(r, 0, sizeof(*r));
    bool v6 = strchr(src.addr, ':') != NULL;
    size_t ip = v6 ? 40 : 20;
    r->len = ip + hlen + payload;
    if (v6) {
        r->b[0] = 0x60;
        put16(r->b + 4, (uint32_t)(hlen + payload));
        r->b[6] = proto;
        r->b[7] = 64;
        inet_pton(AF_INET6, src.addr, r->b + 8);
        inet_pton(AF_INET6, dst.addr, r->b + 24);
    } else {
        r->b[0] = 0x45;
        put16(r->b + 2, (uint32_t)r->len);
        put16(r->b + 6, 0x4000); /* DF */
        r->b[8] = 64;
        r->b[9] = proto;
        inet_pton(AF_INET, src.addr, r->b + 12);
        inet_pton(AF_INET, dst.addr, r->b + 16);
    }
    uint8_t *l4 = r->b + ip;
    put16(l4, src.port);
    put16(l4 + 2, dst.port);
    return l4;
}

static struct raw tcp(struct ep src, struct ep dst, uint32_t seq, uint8_t flags, uint32_t payload)
{
    struct raw r;
    uint8_t *h = ip_packet(&r, src, dst, IPPROTO_TCP, 20, payload);
    put32(h + 4, seq);
    h[12] = 5 << 4;
    h[13] = flags;
    return r;
}

static struct raw udp(struct ep src, struct ep dst, uint32_t payload)
{
    struct raw r;
    uint8_t *h = ip_packet(&r, src, dst, IPPROTO_UDP, 8, payload);
    put16(h + 4, 8 + payload);
    return r;
}

/* A QUIC long-header packet opening a UDP datagram of `payload` bytes (at least 23): first byte
 * (0xc0 = v1 Initial, 0xe0 = v1 Handshake), version, 8-byte DCID and SCID filled with one byte each. */
static struct raw quic_long(struct ep src, struct ep dst, uint32_t payload, uint8_t first, uint32_t version,
                            uint8_t dcid, uint8_t scid)
{
    struct raw r = udp(src, dst, payload);
    uint8_t *q = r.b + r.len - payload;
    q[0] = first;
    put32(q + 1, version);
    q[5] = 8;
    memset(q + 6, dcid, 8);
    q[14] = 8;
    memset(q + 15, scid, 8);
    return r;
}

static struct raw initial(struct ep src, struct ep dst, uint32_t payload, uint8_t dcid, uint8_t scid)
{
    return quic_long(src, dst, payload, 0xc0, 1, dcid, scid);
}

/* A 1-RTT packet: short header (first bit clear). */
static struct raw quic_short(struct ep src, struct ep dst, uint32_t payload)
{
    struct raw r = udp(src, dst, payload);
    r.b[r.len - payload] = 0x40;
    return r;
}

/* The link's number for the next packet of each direction, as the pipeline gives it. */
static uint64_t next_id[2];

/* The client's packets arrive at the link; the server's arrive, then are delivered `delay` later.
 * Each returns the packet's number. */
static uint64_t c2s(struct flow_table *t, struct raw r, int64_t now)
{
    uint64_t id = next_id[C2S]++;
    flows_note(t, C2S, FLOW_ARRIVAL, r.b, r.len, id, now);
    return id;
}
static uint64_t s2c(struct flow_table *t, struct raw r, int64_t now, int64_t delay)
{
    uint64_t id = next_id[S2C]++;
    flows_note(t, S2C, FLOW_ARRIVAL, r.b, r.len, id, now);
    flows_note(t, S2C, FLOW_DELIVERY, r.b, r.len, id, now + delay);
    return id;
}

/* The table's records, as the control command would write them. */
struct dump {
    char *text;
    size_t len;
    struct flows_summary sum;
    int rc;
};

static struct dump dump(struct flow_table *t)
{
    struct dump d = {0};
    FILE *f = open_memstream(&d.text, &d.len);
    d.rc = flows_write_json(t, f, &d.sum);
    fclose(f);
    return d;
}

static struct flow *only(struct flow_table *t) { return t->used == 1 ? &t->flows[0] : NULL; }

/* ---- a strict little JSON checker (the output must load in any parser) ---------------------- */

static const char *json_value(const char *s);

static const char *json_ws(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return s;
}

static const char *json_string(const char *s)
{
    if (*s++ != '"')
        return NULL;
    for (; *s != '"'; s++) {
        if (!*s || (unsigned char)*s < 0x20)
            return NULL;
        if (*s == '\\' && !*++s)
            return NULL;
    }
    return s + 1;
}

static const char *json_number(const char *s)
{
    const char *start = s;
    if (*s == '-')
        s++;
    if (!isdigit((unsigned char)*s))
        return NULL;
    if (*s == '0' && isdigit((unsigned char)s[1]))
        return NULL; /* no leading zeros */
    while (isdigit((unsigned char)*s) || *s == '.' || *s == 'e' || *s == 'E' || *s == '+' || (*s == '-' && s > start))
        s++;
    return s;
}

static const char *json_items(const char *s, char close, bool keyed)
{
    s = json_ws(s + 1);
    if (*s == close)
        return s + 1;
    for (;;) {
        if (keyed) {
            if (!(s = json_string(json_ws(s))) || *(s = json_ws(s)) != ':')
                return NULL;
            s++;
        }
        if (!(s = json_value(s)))
            return NULL;
        s = json_ws(s);
        if (*s == close)
            return s + 1;
        if (*s++ != ',')
            return NULL;
    }
}

static const char *json_value(const char *s)
{
    s = json_ws(s);
    switch (*s) {
    case '{': return json_items(s, '}', true);
    case '[': return json_items(s, ']', false);
    case '"': return json_string(s);
    case 'n': return strncmp(s, "null", 4) ? NULL : s + 4;
    case 't': return strncmp(s, "true", 4) ? NULL : s + 4;
    case 'f': return strncmp(s, "false", 5) ? NULL : s + 5;
    default: return json_number(s);
    }
}

/* Every line of text is one JSON object; returns how many, or -1 at the first bad one. */
static int json_lines(const char *text)
{
    int n = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        if (!nl || *line != '{')
            return -1;
        const char *end = json_value(line);
        if (!end || end != nl)
            return -1;
        n++;
        line = nl + 1;
    }
    return n;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_parse_and_canonical_key(void)
{
    struct flow_pkt a, b;
    struct raw up = tcp(CLIENT, SERVER, 1, F_SYN, 0), down = tcp(SERVER, CLIENT, 9, F_SYN | F_ACK, 0);
    CHECK(flow_parse(up.b, up.len, C2S, &a) == 0 && flow_parse(down.b, down.len, S2C, &b) == 0, "parse");
    CHECK(!memcmp(&a.key, &b.key, sizeof(a.key)), "both directions give one key");
    CHECK(a.key.client_port == 40000 && a.key.server_port == 4433 && a.key.family == 4 && a.syn && !a.ack,
          "client is the c2s source: port %u, flags", a.key.client_port);

    struct ep c6 = {"fd00::1", 40000}, s6 = {"fd00::2", 443};
    struct raw v6up = udp(c6, s6, 100), v6down = udp(s6, c6, 1200);
    CHECK(flow_parse(v6up.b, v6up.len, C2S, &a) == 0 && flow_parse(v6down.b, v6down.len, S2C, &b) == 0 &&
              !memcmp(&a.key, &b.key, sizeof(a.key)) && a.key.family == 6 && a.payload == 100 && b.payload == 1200,
          "IPv6 UDP key and payload");

    /* a hop-by-hop options header is skipped; a fragment header is not tracked */
    struct raw hbh;
    uint8_t *h = ip_packet(&hbh, c6, s6, 0, 8 + 20, 10); /* next header 0: hop-by-hop options */
    memset(h, 0, 8 + 20);
    h[0] = IPPROTO_TCP; /* its next header; length 0 = 8 bytes */
    put16(h + 8, c6.port);
    put16(h + 10, s6.port);
    h[8 + 12] = 5 << 4;
    CHECK(flow_parse(hbh.b, hbh.len, C2S, &a) == 0 && a.key.client_port == 40000 && a.payload == 10,
          "hop-by-hop skipped: port %u payload %u", a.key.client_port, a.payload);
    hbh.b[6] = 44;
    CHECK(flow_parse(hbh.b, hbh.len, C2S, &a) < 0, "IPv6 fragment header not tracked");

    struct raw frag = tcp(CLIENT, SERVER, 1, F_ACK, 100);
    put16(frag.b + 6, 0x2000); /* more fragments */
    CHECK(flow_parse(frag.b, frag.len, C2S, &a) < 0, "IPv4 fragment not tracked");
    struct raw icmp;
    ip_packet(&icmp, CLIENT, SERVER, IPPROTO_ICMP, 8, 56);
    CHECK(flow_parse(icmp.b, icmp.len, C2S, &a) < 0, "ICMP not tracked");
    struct raw shortp = tcp(CLIENT, SERVER, 1, F_ACK, 0);
    CHECK(flow_parse(shortp.b, 30, C2S, &a) < 0, "truncated TCP header");
    CHECK(flow_parse(shortp.b, 10, C2S, &a) < 0 && flow_parse(NULL, 0, C2S, &a) < 0, "runt packets");
}

/* A TLS-like exchange: ClientHello, the server's flight of three segments with the client's pure
 * ACK in the middle, client Finished, then FINs. */
static void test_flights_and_milestones(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    const int64_t d = 10 * MS; /* one-way delay of the server's packets to the client */
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 1000 * MS);
    s2c(&t, tcp(SERVER, CLIENT, 900, F_SYN | F_ACK, 0), 1010 * MS, d);
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK, 0), 1020 * MS);
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK, 300), 1021 * MS); /* ClientHello */
    s2c(&t, tcp(SERVER, CLIENT, 901, F_ACK, 0), 1031 * MS, d); /* pure ACK: no flight */
    s2c(&t, tcp(SERVER, CLIENT, 901, F_ACK, 1448), 1032 * MS, d);
    s2c(&t, tcp(SERVER, CLIENT, 2349, F_ACK | F_PSH, 1448), 1033 * MS, d); /* the end of one write */
    c2s(&t, tcp(CLIENT, SERVER, 401, F_ACK, 0), 1043 * MS);      /* the client's pure ACK */
    s2c(&t, tcp(SERVER, CLIENT, 3797, F_ACK | F_PSH, 500), 1034 * MS, d); /* delivered after that ACK */
    c2s(&t, tcp(CLIENT, SERVER, 401, F_ACK, 80), 1050 * MS);     /* client Finished */
    s2c(&t, tcp(SERVER, CLIENT, 4297, F_ACK, 0), 1060 * MS, d);
    c2s(&t, tcp(CLIENT, SERVER, 481, F_ACK | F_FIN, 0), 1080 * MS);
    s2c(&t, tcp(SERVER, CLIENT, 4297, F_ACK | F_FIN, 0), 1090 * MS, d);

    struct flow *f = only(&t);
    CHECK(f != NULL, "one connection, %zu recorded", t.used);
    if (!f)
        return;
    CHECK(f->open_ns == 1000 * MS && f->syn_ns == 1000 * MS, "open %lld syn %lld", (long long)f->open_ns,
          (long long)f->syn_ns);
    CHECK(f->synack_ns == 1020 * MS, "SYN-ACK when delivered: %lld", (long long)f->synack_ns);
    CHECK(f->fin_ns == 1080 * MS, "first FIN at the client: %lld", (long long)f->fin_ns);
    CHECK(f->nflights == 3 && f->flights_overflow == 0, "%u flights", f->nflights);
    const struct flight *fl = f->flights;
    CHECK(fl[0].dir == C2S && fl[0].packets == 1 && fl[0].bytes == 300 && fl[0].first_ns == 1021 * MS,
          "ClientHello flight: dir %u, %u packets, %llu bytes", fl[0].dir, fl[0].packets,
          (unsigned long long)fl[0].bytes);
    CHECK(fl[1].dir == S2C && fl[1].packets == 3 && fl[1].pushes == 2 && fl[1].bytes == 3396 &&
              fl[1].first_ns == 1042 * MS && fl[1].last_ns == 1044 * MS,
          "server flight (delivery times, the client's ACK inside): %u packets, %u pushes, %llu bytes, %lld..%lld",
          fl[1].packets, fl[1].pushes, (unsigned long long)fl[1].bytes, (long long)fl[1].first_ns, (long long)fl[1].last_ns);
    CHECK(fl[2].dir == C2S && fl[2].packets == 1 && fl[2].bytes == 80 && fl[2].first_ns == 1050 * MS,
          "client Finished flight");
    const struct flow_side *c = &f->side[C2S], *s = &f->side[S2C];
    CHECK(c->packets == 6 && c->payload_bytes == 380 && c->bytes == 6 * 40 + 380 && c->first_ns == 1000 * MS &&
              c->last_ns == 1080 * MS,
          "c2s: %llu packets, %llu payload, %llu bytes", (unsigned long long)c->packets,
          (unsigned long long)c->payload_bytes, (unsigned long long)c->bytes);
    CHECK(s->packets == 7 && s->payload_bytes == 3396 && s->first_ns == 1020 * MS && s->last_ns == 1100 * MS,
          "s2c: %llu packets, %llu payload", (unsigned long long)s->packets, (unsigned long long)s->payload_bytes);
    CHECK(!c->retrans && !s->retrans && !c->lost && !s->lost, "no retransmissions or drops");

    /* 16 more alternating flights: 16 in all are kept, the other 3 counted */
    for (int i = 0; i < 16; i++) {
        if (i % 2)
            c2s(&t, tcp(CLIENT, SERVER, 481 + (uint32_t)i * 10, F_ACK, 10), 1200 * MS + i * MS);
        else
            s2c(&t, tcp(SERVER, CLIENT, 4297 + (uint32_t)i * 10, F_ACK, 10), 1200 * MS + i * MS, d);
    }
    CHECK(f->nflights == 16 && f->flights_overflow == 3, "%u flights, %llu more", f->nflights,
          (unsigned long long)f->flights_overflow);
    flows_destroy(&t);
}

static void test_retransmissions(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 0);
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 1000 * MS); /* SYN again, same ISN */
    s2c(&t, tcp(SERVER, CLIENT, 900, F_SYN | F_ACK, 0), 1001 * MS, 1);
    s2c(&t, tcp(SERVER, CLIENT, 900, F_SYN | F_ACK, 0), 1002 * MS, 1);
    struct flow *f = only(&t);
    CHECK(f && f->side[C2S].retrans == 1 && f->side[S2C].retrans == 1 && f->syn_ns == 0,
          "repeated SYN and SYN-ACK: one connection, one retransmission each");
    if (!f)
        return;
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK, 1000), 1003 * MS); /* 101..1101 */
    c2s(&t, tcp(CLIENT, SERVER, 1101, F_ACK, 1000), 1004 * MS); /* ..2101 */
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK, 1000), 1005 * MS); /* the first again */
    c2s(&t, tcp(CLIENT, SERVER, 1101, F_ACK, 1000), 1006 * MS); /* ends at the highest end: again */
    c2s(&t, tcp(CLIENT, SERVER, 1601, F_ACK, 1000), 1007 * MS); /* overlaps, but brings new data */
    c2s(&t, tcp(CLIENT, SERVER, 2601, F_ACK, 0), 1008 * MS);    /* pure ACK below nothing */
    CHECK(f->side[C2S].retrans == 3, "c2s retrans %llu (want 3)", (unsigned long long)f->side[C2S].retrans);

    /* sequence numbers wrap: 0xfffff000 + 3 * 2048 passes 2^32 */
    uint32_t isn = 0xfffff000u;
    struct ep c2 = {"10.9.0.1", 40002};
    c2s(&t, tcp(c2, SERVER, isn, F_SYN, 0), 2000 * MS);
    uint32_t seq = isn + 1;
    for (int i = 0; i < 4; i++, seq += 2048)
        c2s(&t, tcp(c2, SERVER, seq, F_ACK, 2048), 2001 * MS + i);
    struct flow *w = &t.flows[1];
    CHECK(w->side[C2S].retrans == 0, "new data across the wrap counted as retransmission (%llu)",
          (unsigned long long)w->side[C2S].retrans);
    c2s(&t, tcp(c2, SERVER, isn + 1, F_ACK, 2048), 2010 * MS);        /* before the wrap */
    c2s(&t, tcp(c2, SERVER, isn + 1 + 2 * 2048, F_ACK, 2048), 2011 * MS); /* after it */
    c2s(&t, tcp(c2, SERVER, seq, F_ACK, 100), 2012 * MS);              /* new */
    CHECK(w->side[C2S].retrans == 2, "retransmissions across the wrap: %llu (want 2)",
          (unsigned long long)w->side[C2S].retrans);

    /* UDP repeats nothing */
    struct ep c3 = {"10.9.0.1", 40003};
    for (int i = 0; i < 3; i++)
        c2s(&t, udp(c3, SERVER, 500), 3000 * MS);
    CHECK(t.used == 3 && t.flows[2].side[C2S].retrans == 0 && t.flows[2].open_ns == 3000 * MS &&
              t.flows[2].nflights == 1 && t.flows[2].flights[0].bytes == 1500,
          "UDP: opened by its first datagram, one flight, no retransmissions");
    flows_destroy(&t);
}

static void test_port_reuse_is_a_new_connection(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 0);
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK | F_FIN, 0), 1 * MS);
    c2s(&t, tcp(CLIENT, SERVER, 5000, F_SYN, 0), 2 * MS); /* the same ports, a new ISN */
    s2c(&t, tcp(SERVER, CLIENT, 70, F_SYN | F_ACK, 0), 3 * MS, 1 * MS);
    CHECK(t.used == 2 && t.flows[0].retired && !t.flows[1].retired, "two connections, %zu", t.used);
    CHECK(t.flows[1].open_ns == 2 * MS && t.flows[1].synack_ns == 4 * MS && t.flows[0].synack_ns == FLOW_NO_TIME &&
              t.flows[1].side[C2S].retrans == 0,
          "the new one takes the later packets");
    flows_destroy(&t);
}

/* Drops as the pipeline's callback saw them: [connection][dir], connection 0 = client port 40000. */
static int g_lost[2][2], g_queued[2][2];

static int out_ok(void *ctx, struct pkt *p, int64_t now) { return 0; }

static void log_drop(void *ctx, const struct pkt *p, enum verdict why, int64_t now)
{
    int dir = *(const int *)ctx;
    struct flow_pkt fp;
    int conn = flow_parse(p->data, p->len, dir, &fp) == 0 && fp.key.client_port == 40000 ? 0 : 1;
    (why == V_DROP_LOSS ? g_lost : g_queued)[conn][dir]++;
}

static void input(struct pipeline *pl, struct raw r, int64_t now)
{
    struct pkt *p = pkt_get(&pl->pool, (uint32_t)r.len);
    memcpy(p->data, r.b, r.len);
    p->len = (uint32_t)r.len;
    pipeline_input(pl, p, now);
}

static void drain(struct pipeline *pl)
{
    for (int64_t next; (next = pipeline_next_deadline(pl)) != NEVER_DEADLINE;)
        pipeline_pump(pl, next);
}

/* Two connections through real pipelines: loss in both directions, a small queue towards the client. */
static void test_drops_attributed(void)
{
    static struct dir_counters cnt[2];
    static int dirs[2] = {C2S, S2C};
    struct flow_table t;
    flows_init(&t, 16);
    memset(g_lost, 0, sizeof(g_lost));
    memset(g_queued, 0, sizeof(g_queued));
    const char *kv[] = {"loss=0.3", "seed=5", "s2c.rate_bps=1000000", "s2c.queue_packets=4", "delay_ns=1000000", NULL};
    struct dir_config cfg[2];
    bool changed[2];
    char err[256];
    config_defaults(&cfg[0]);
    config_defaults(&cfg[1]);
    for (const char *const *k = kv; *k; k++)
        config_apply(cfg, changed, *k, err, sizeof(err));
    struct pipeline pl[2];
    for (int d = 0; d < 2; d++) {
        pipeline_init(&pl[d], d, &cfg[d], &cnt[d]);
        pl[d].output = out_ok;
        pl[d].on_drop = log_drop;
        pl[d].ctx = &dirs[d];
        pl[d].flows = &t;
    }
    struct ep other = {"10.9.0.1", 40001};
    for (int i = 0; i < 200; i++) {
        struct ep c = i % 2 ? other : CLIENT;
        input(&pl[C2S], tcp(c, SERVER, 1 + (uint32_t)i * 100, F_ACK, 100), i * MS);
        input(&pl[S2C], tcp(SERVER, c, 1 + (uint32_t)i * 1000, F_ACK, 1000), i * MS); /* 8 ms each at 1 Mbit/s */
    }
    drain(&pl[C2S]);
    drain(&pl[S2C]);
    CHECK(t.used == 2, "%zu connections", t.used);
    int delivered = 0;
    for (int k = 0; k < 2 && t.used == 2; k++) {
        const struct flow *f = &t.flows[k];
        int conn = f->key.client_port == 40000 ? 0 : 1;
        for (int d = 0; d < 2; d++)
            CHECK(f->side[d].lost == (uint64_t)g_lost[conn][d] && f->side[d].queue_drops == (uint64_t)g_queued[conn][d],
                  "connection %d %s: lost %llu/%d, queue %llu/%d", conn, dir_names[d],
                  (unsigned long long)f->side[d].lost, g_lost[conn][d], (unsigned long long)f->side[d].queue_drops,
                  g_queued[conn][d]);
        CHECK(f->side[C2S].packets == 100, "every c2s packet seen at the client, dropped or not: %llu",
              (unsigned long long)f->side[C2S].packets);
        CHECK(f->side[S2C].packets + f->side[S2C].lost + f->side[S2C].queue_drops == 100,
              "s2c: only delivered packets reach the client");
        CHECK(f->side[C2S].queue_drops == 0, "no queue towards the server");
        delivered += (int)f->side[S2C].packets;
    }
    CHECK(g_lost[0][C2S] && g_lost[1][S2C] && g_queued[0][S2C] && g_queued[1][S2C],
          "the test saw every kind of drop");
    CHECK((uint64_t)delivered == cnt_get(&cnt[S2C].fwd_packets), "deliveries match the pipeline's counter");
    for (int d = 0; d < 2; d++)
        pipeline_destroy(&pl[d]);
    flows_destroy(&t);
}

static void test_table_full_and_reset(void)
{
    struct flow_table t;
    flows_init(&t, 2);
    struct raw icmp;
    ip_packet(&icmp, CLIENT, SERVER, IPPROTO_ICMP, 8, 56);
    for (uint16_t port = 40000; port < 40003; port++) {
        struct ep c = {"10.9.0.1", port};
        c2s(&t, tcp(c, SERVER, 1, F_SYN, 0), port);
        s2c(&t, tcp(SERVER, c, 1, F_SYN | F_ACK, 0), port, 1);
        c2s(&t, tcp(c, SERVER, 2, F_ACK, 10), port);
    }
    c2s(&t, icmp, 5);
    struct dump d = dump(&t);
    CHECK(d.rc == 0 && d.sum.flows == 2 && d.sum.untracked_flows == 1 && d.sum.untracked_packets == 4,
          "capacity 2: %llu recorded, %llu turned away (once each), %llu untracked packets (3 + ICMP)",
          (unsigned long long)d.sum.flows, (unsigned long long)d.sum.untracked_flows,
          (unsigned long long)d.sum.untracked_packets);
    free(d.text);

    flows_reset(&t);
    d = dump(&t);
    CHECK(d.rc == 0 && d.sum.flows == 0 && d.sum.untracked_flows == 0 && d.sum.untracked_packets == 0 && d.len == 0,
          "reset empties the table");
    free(d.text);
    struct ep c = {"10.9.0.1", 40002}; /* turned away before the reset, welcome after it */
    c2s(&t, tcp(c, SERVER, 1, F_SYN, 0), 10);
    CHECK(t.used == 1 && t.flows[0].key.client_port == 40002 && t.flows[0].open_ns == 10, "recording again");
    flows_destroy(&t);

    struct flow_table off;
    flows_init(&off, 0);
    c2s(&off, tcp(CLIENT, SERVER, 1, F_SYN, 0), 1);
    d = dump(&off);
    CHECK(d.rc == 0 && d.sum.flows == 0 && d.len == 0 && off.used == 0, "capacity 0: the recorder is off");
    free(d.text);
    flows_destroy(&off);
}

static void test_json(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 5);
    s2c(&t, tcp(SERVER, CLIENT, 900, F_SYN | F_ACK, 0), 6, 1);
    c2s(&t, tcp(CLIENT, SERVER, 101, F_ACK, 300), 8);
    struct ep c6 = {"fd00::1", 5353}, s6 = {"fd00::2", 53};
    struct raw dgram = udp(c6, s6, 40);
    uint64_t id = c2s(&t, dgram, 9);
    flows_note(&t, C2S, FLOW_LOST, dgram.b, dgram.len, id, 9); /* seen at the client, then lost */
    struct dump d = dump(&t);
    CHECK(json_lines(d.text) == 2, "two JSON lines:\n%s", d.text);
    CHECK(strstr(d.text, "{\"proto\":\"tcp\",\"client\":\"10.9.0.1:40000\",\"server\":\"10.9.0.2:4433\","
                         "\"open_ns\":5,\"syn_ns\":5,\"synack_ns\":7,\"fin_ns\":null,"
                         "\"c2s\":{\"first_ns\":5,\"last_ns\":8,\"packets\":2,\"bytes\":380,\"payload_bytes\":300,"
                         "\"retrans\":0,\"lost\":0,\"queue_drops\":0,\"late_max_ns\":0},"
                         "\"s2c\":{\"first_ns\":7,\"last_ns\":7,\"packets\":1,\"bytes\":40,\"payload_bytes\":0,"
                         "\"retrans\":0,\"lost\":0,\"queue_drops\":0,\"late_max_ns\":0},"
                         "\"flights\":[{\"dir\":\"c2s\",\"first_ns\":8,\"last_ns\":8,\"packets\":1,\"pushes\":0,\"bytes\":300}],"
                         "\"flights_overflow\":0}\n"),
          "TCP line:\n%s", d.text);
    CHECK(strstr(d.text, "{\"proto\":\"udp\",\"client\":\"[fd00::1]:5353\",\"server\":\"[fd00::2]:53\","
                         "\"open_ns\":9,\"syn_ns\":null,\"synack_ns\":null,\"fin_ns\":null,") &&
              strstr(d.text, "\"s2c\":{\"first_ns\":null,\"last_ns\":null,\"packets\":0,") &&
              strstr(d.text, "\"lost\":1,\"queue_drops\":0,\"late_max_ns\":0},\"s2c\""),
          "UDP over IPv6 line:\n%s", d.text);
    CHECK(json_lines("{\"a\":1}\n{\"a\":}\n") < 0 && json_lines("{\"a\":[1,null]}\n") == 1, "the checker checks");
    free(d.text);

    /* the file: created 0600, and an existing file is truncated and made 0600 */
    char path[] = "/tmp/pqlink-flows-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "old old old old old old old\n", 28) == 28 && fchmod(fd, 0644) == 0, "scratch file");
    close(fd);
    struct flows_summary sum;
    char err[256] = "";
    CHECK(flows_write_file(&t, path, &sum, err, sizeof(err)) == 0 && sum.flows == 2, "write: %s", err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
    FILE *f = fopen(path, "r");
    char text[8192] = "";
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[n] = 0;
    if (f)
        fclose(f);
    CHECK(json_lines(text) == 2 && !strstr(text, "old"), "file content:\n%s", text);
    unlink(path);
    CHECK(flows_write_file(&t, "/nonexistent-dir/flows.jsonl", &sum, err, sizeof(err)) < 0 &&
              strstr(err, "open(/nonexistent-dir/flows.jsonl)"),
          "the error names the failed call: %s", err);
    flows_destroy(&t);
}

/* How late the link released each side's packets: the latest per direction, a client packet's lateness
 * recorded without moving its client-side time (the client saw it when it arrived). */
static void test_link_lateness(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    c2s(&t, tcp(CLIENT, SERVER, 100, F_SYN, 0), 1000 * MS);
    s2c(&t, tcp(SERVER, CLIENT, 900, F_SYN | F_ACK, 0), 1010 * MS, 10 * MS);
    struct raw hello = tcp(CLIENT, SERVER, 101, F_ACK | F_PSH, 300);
    uint64_t id = c2s(&t, hello, 1021 * MS);
    flows_delivered(&t, C2S, hello.b, hello.len, id, 1031 * MS + 2 * MS, 2 * MS); /* released 2 ms late */
    struct raw answer = tcp(SERVER, CLIENT, 901, F_ACK | F_PSH, 1448);
    flows_note(&t, S2C, FLOW_ARRIVAL, answer.b, answer.len, 7, 1040 * MS);
    flows_delivered(&t, S2C, answer.b, answer.len, 7, 1050 * MS + 300000, 300000);
    const struct flow *f = only(&t);
    CHECK(f && f->side[C2S].late_max_ns == 2 * MS && f->side[S2C].late_max_ns == 300000,
          "late c2s %llu s2c %llu", f ? (unsigned long long)f->side[C2S].late_max_ns : 0,
          f ? (unsigned long long)f->side[S2C].late_max_ns : 0);
    CHECK(f && f->side[C2S].last_ns == 1021 * MS && f->side[S2C].last_ns == 1050 * MS + 300000,
          "client-side times: c2s at arrival, s2c at delivery");
    struct dump d = dump(&t);
    CHECK(d.text && strstr(d.text, "\"late_max_ns\":2000000") && strstr(d.text, "\"late_max_ns\":300000"),
          "JSON: %s", d.text ? d.text : "");
    free(d.text);
    flows_destroy(&t);
}

/* ---- UDP: datagrams one by one ------------------------------------------------------------- */

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_quic_parse(void)
{
    struct flow_pkt a, b;
    struct raw r = initial(CLIENT, SERVER, 1200, 0x11, 0xa1);
    CHECK(flow_parse(r.b, r.len, C2S, &a) == 0 && a.quic_initial && a.quic_scid, "v1 Initial");
    r = initial(CLIENT, SERVER, 1200, 0x22, 0xa1); /* another destination ID, as after a Retry */
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && b.quic_initial && b.quic_scid == a.quic_scid,
          "the signature follows the source connection ID only");
    r = initial(CLIENT, SERVER, 1200, 0x11, 0xb2);
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && b.quic_initial && b.quic_scid != a.quic_scid, "another SCID");
    r = quic_long(CLIENT, SERVER, 1200, 0xd0, 0x6b3343cf, 0x11, 0xa1); /* QUIC v2: Initial is type 1 */
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && b.quic_initial, "v2 Initial");
    r = quic_long(CLIENT, SERVER, 1200, 0xc0, 0x6b3343cf, 0x11, 0xa1); /* type 0 is v2's 0-RTT */
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "v2 0-RTT is no Initial");
    r = quic_long(CLIENT, SERVER, 1200, 0xe0, 1, 0x11, 0xa1);
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "Handshake is no Initial");
    r = quic_long(CLIENT, SERVER, 1200, 0xc0, 0, 0x11, 0xa1);
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "Version Negotiation is no Initial");
    r = quic_short(CLIENT, SERVER, 1200);
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "short header");
    r = initial(CLIENT, SERVER, 1200, 0x11, 0xa1);
    r.b[20 + 8 + 5] = 21; /* a DCID longer than QUIC allows */
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "DCID length 21");
    r = initial(CLIENT, SERVER, 20, 0x11, 0xa1); /* the SCID runs past the datagram */
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial, "truncated Initial");
    r = udp(CLIENT, SERVER, 0);
    CHECK(flow_parse(r.b, r.len, C2S, &b) == 0 && !b.quic_initial && b.payload == 0, "empty datagram");
}

/* A QUIC-like exchange noted by hand: per direction datagrams and payload bytes, the list with each
 * client datagram's fate (settled by its number, in any order), server drops only counted. */
static void test_udp_record(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    struct raw hello = initial(CLIENT, SERVER, 1200, 0x11, 0xa1);
    uint64_t id = c2s(&t, hello, 1000 * MS);
    flows_delivered(&t, C2S, hello.b, hello.len, id, 1010 * MS, 0); /* settles it: delivered */
    s2c(&t, initial(SERVER, CLIENT, 1200, 0xa1, 0x55), 1015 * MS, 10 * MS); /* at the client at 1025 */
    struct raw gone = quic_long(SERVER, CLIENT, 1200, 0xe0, 1, 0xa1, 0x55);
    flows_note(&t, S2C, FLOW_ARRIVAL, gone.b, gone.len, 100, 1015100000);
    flows_note(&t, S2C, FLOW_LOST, gone.b, gone.len, 100, 1015100000); /* never reaches the client */
    s2c(&t, quic_long(SERVER, CLIENT, 1100, 0xe0, 1, 0xa1, 0x55), 1015200000, 10 * MS);
    struct raw ack = initial(CLIENT, SERVER, 50, 0x55, 0xa1), fin = quic_long(CLIENT, SERVER, 50, 0xe0, 1, 0x55, 0xa1);
    uint64_t a = c2s(&t, ack, 1030 * MS), b = c2s(&t, fin, 1031 * MS);
    /* the server thread takes the lock after the client's, with an earlier time */
    s2c(&t, quic_short(SERVER, CLIENT, 300), 1019500000, 10 * MS);
    flows_note(&t, C2S, FLOW_QUEUE_DROP, fin.b, fin.len, b, 1031 * MS); /* the later one first */
    flows_note(&t, C2S, FLOW_LOST, ack.b, ack.len, a, 1030 * MS);
    c2s(&t, quic_short(CLIENT, SERVER, 80), 1032 * MS); /* still in the link when written */

    struct flow *f = only(&t);
    CHECK(f != NULL, "one connection, %zu recorded", t.used);
    if (!f)
        return;
    const struct flow_side *c = &f->side[C2S], *sv = &f->side[S2C];
    CHECK(c->packets == 4 && c->payload_bytes == 1380 && c->bytes == 1380 + 4 * 28 && c->lost == 1 &&
              c->queue_drops == 1,
          "c2s: %llu datagrams, %llu payload, %llu lost, %llu queue drops", (unsigned long long)c->packets,
          (unsigned long long)c->payload_bytes, (unsigned long long)c->lost, (unsigned long long)c->queue_drops);
    CHECK(sv->packets == 3 && sv->payload_bytes == 2600 && sv->lost == 1 && sv->first_ns == 1025 * MS,
          "s2c: %llu delivered, %llu payload, %llu lost", (unsigned long long)sv->packets,
          (unsigned long long)sv->payload_bytes, (unsigned long long)sv->lost);
    /* flights follow the order the table heard of the datagrams (the late-noted 300 bytes make one) */
    CHECK(f->open_ns == 1000 * MS && f->syn_ns == FLOW_NO_TIME && f->nflights == 5 && f->flights[1].packets == 2 &&
              f->flights[2].packets == 2 && f->flights[4].packets == 1,
          "open %lld, %u flights", (long long)f->open_ns, f->nflights);
    CHECK(f->ndgrams == 7 && f->dgrams_overflow == 0, "%u datagrams listed", f->ndgrams);
    struct dump d = dump(&t);
    CHECK(json_lines(d.text) == 1, "one JSON line:\n%s", d.text);
    CHECK(d.text && strstr(d.text, "\"flights_overflow\":0,\"datagrams\":["
                                   "[\"c2s\",1000000000,1200,\"delivered\"],"
                                   "[\"s2c\",1025000000,1200,\"delivered\"],"
                                   "[\"s2c\",1025200000,1100,\"delivered\"],"
                                   "[\"s2c\",1029500000,300,\"delivered\"],"
                                   "[\"c2s\",1030000000,50,\"lost\"],"
                                   "[\"c2s\",1031000000,50,\"queue_drop\"],"
                                   "[\"c2s\",1032000000,80,\"in_flight\"]],"
                                   "\"datagrams_overflow\":0}\n"),
          "datagrams in time order with their fates:\n%s", d.text);
    free(d.text);
    flows_destroy(&t);
}

/* The list keeps a connection's first FLOW_DGRAMS datagrams; a pool shared by the table, refilled
 * at a reset, holds them (a quarter chunk per connection of capacity, at least one whole list). */
static void test_udp_list_bounds(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    CHECK(t.dgram_chunks == FLOW_DGRAMS / FLOW_DGRAM_CHUNK, "pool of %zu chunks", t.dgram_chunks);
    struct ep a = {"10.9.0.1", 41000}, b = {"10.9.0.1", 41001};
    for (int i = 0; i < 100; i++)
        c2s(&t, quic_short(a, SERVER, 100), i * MS);
    for (int i = 0; i < 200; i++)
        c2s(&t, quic_short(b, SERVER, 200), 1000 * MS + i * MS); /* gets the pool's last 4 chunks */
    for (int i = 0; i < 50; i++)
        c2s(&t, quic_short(a, SERVER, 100), 2000 * MS + i * MS); /* fills its chunk, finds no more */
    struct ep tc = {"10.9.0.1", 41002};
    c2s(&t, tcp(tc, SERVER, 1, F_SYN, 0), 3000 * MS);
    c2s(&t, tcp(tc, SERVER, 2, F_ACK, 500), 3001 * MS);
    CHECK(t.used == 3, "%zu connections", t.used);
    if (t.used != 3)
        return;
    const struct flow *fa = &t.flows[0], *fb = &t.flows[1];
    CHECK(fa->ndgrams == 128 && fa->dgrams_overflow == 22 && fa->side[C2S].packets == 150,
          "a: %u listed, %llu more", fa->ndgrams, (unsigned long long)fa->dgrams_overflow);
    CHECK(fb->ndgrams == 128 && fb->dgrams_overflow == 72 && fb->side[C2S].packets == 200,
          "b: %u listed, %llu more", fb->ndgrams, (unsigned long long)fb->dgrams_overflow);
    CHECK(t.flows[2].ndgrams == 0, "TCP lists nothing");
    struct dump d = dump(&t);
    char *second = d.text ? strchr(d.text, '\n') : NULL, *third = second ? strchr(second + 1, '\n') : NULL;
    CHECK(second && third && json_lines(d.text) == 3, "three lines:\n%s", d.text);
    if (second && third) {
        *second = *third = 0;
        CHECK(count_of(d.text, "[\"c2s\",") == 128 && strstr(d.text, "[\"c2s\",2027000000,100,\"in_flight\"]],"
                                                                   "\"datagrams_overflow\":22}"),
              "a's list: its first 128, the last at 2027 ms");
        CHECK(count_of(second + 1, "[\"c2s\",") == 128 && strstr(second + 1, "\"datagrams_overflow\":72}"),
              "b's list");
        CHECK(!strstr(third + 1, "datagrams") && strstr(third + 1, "\"flights_overflow\":0}"),
              "the TCP record is unchanged: %s", third + 1);
    }
    free(d.text);

    flows_reset(&t);
    for (int i = 0; i < 300; i++)
        c2s(&t, quic_short(b, SERVER, 1472), i * MS);
    const struct flow *f = only(&t);
    CHECK(f && f->ndgrams == FLOW_DGRAMS && f->dgrams_overflow == 300 - FLOW_DGRAMS,
          "after a reset: %u listed, %llu more", f ? f->ndgrams : 0, f ? (unsigned long long)f->dgrams_overflow : 0);
    d = dump(&t);
    CHECK(d.text && count_of(d.text, "[\"c2s\",") == FLOW_DGRAMS && strstr(d.text, "\"datagrams_overflow\":44}"),
          "the bound in JSON");
    free(d.text);
    flows_destroy(&t);
}

/* A client Initial with a new source connection ID on known ports is a new connection (a port the
 * kernel handed out again); its retransmissions, its Initials after the server's, other packets are not. */
static void test_udp_port_reuse(void)
{
    struct flow_table t;
    flows_init(&t, 16);
    c2s(&t, initial(CLIENT, SERVER, 1200, 0x11, 0xa1), 0);
    c2s(&t, initial(CLIENT, SERVER, 1200, 0x11, 0xa1), 300 * MS); /* retransmitted */
    s2c(&t, initial(SERVER, CLIENT, 1200, 0xa1, 0x55), 301 * MS, MS);
    c2s(&t, initial(CLIENT, SERVER, 1200, 0x55, 0xa1), 303 * MS); /* to the server's ID now */
    c2s(&t, quic_short(CLIENT, SERVER, 40), 304 * MS);
    CHECK(t.used == 1 && t.flows[0].side[C2S].packets == 4, "one connection so far: %zu", t.used);
    c2s(&t, initial(CLIENT, SERVER, 1250, 0x33, 0xb2), 900 * MS);
    s2c(&t, initial(SERVER, CLIENT, 1200, 0xb2, 0x66), 901 * MS, MS);
    CHECK(t.used == 2 && t.flows[0].retired && !t.flows[1].retired && t.flows[1].open_ns == 900 * MS &&
              t.flows[1].side[S2C].packets == 1 && t.flows[1].ndgrams == 2 && t.flows[0].ndgrams == 5,
          "a new SCID on the same ports starts a new record: %zu", t.used);
    /* other UDP (no QUIC) keeps one record */
    struct ep dns = {"10.9.0.1", 5353};
    c2s(&t, udp(dns, SERVER, 40), 0);
    c2s(&t, udp(dns, SERVER, 40), 1);
    CHECK(t.used == 3 && t.flows[2].side[C2S].packets == 2, "plain UDP");
    flows_destroy(&t);
}

/* ---- UDP through the pipeline --------------------------------------------------------------- */

/* What the pipeline did with each packet of a direction, by its number. */
struct fates {
    int64_t out_ns[1024]; /* when delivered, 0 if not */
    int why[1024];        /* 0 delivered or not yet, else V_DROP_* */
};

static int fates_out(void *ctx, struct pkt *p, int64_t now)
{
    ((struct fates *)ctx)->out_ns[p->seq] = now;
    return 0;
}

static void fates_drop(void *ctx, const struct pkt *p, enum verdict why, int64_t now)
{
    ((struct fates *)ctx)->why[p->seq] = (int)why;
}

/* UDP payload sizes of the datagrams the tests send: a pure ACK, a 1200-byte Initial, a full MTU. */
static const uint32_t DGRAM_SIZES[3] = {60, 1200, 1472};

/* n client packets into one direction: UDP datagrams of DGRAM_SIZES, or TCP segments of the same IP
 * size; `gap` apart, in bursts of `burst` at one instant. */
static void send_sized(struct pipeline *pl, bool as_udp, int n, int64_t t0, int64_t gap, int burst)
{
    for (int i = 0; i < n; i++) {
        uint32_t size = DGRAM_SIZES[i % 3];
        struct raw r = as_udp ? quic_short(CLIENT, SERVER, size) : tcp(CLIENT, SERVER, 1 + (uint32_t)i * 2000, F_ACK, size - 12);
        int64_t at = t0 + (i / burst) * gap;
        int64_t next;
        while ((next = pipeline_next_deadline(pl)) != NEVER_DEADLINE && next <= at)
            pipeline_pump(pl, next);
        input(pl, r, at);
    }
}

/* Loss, rate and delay see packets, not protocols: datagrams of 60, 1200 and 1472 bytes meet
 * exactly what TCP segments of the same size meet with the same seed; spaced out, each leaves after
 * its serialisation (size + overhead at the rate) and the delay. */
static void test_datagrams_meet_the_link_as_segments(void)
{
    const char *configs[2][8] = {
        {"loss=0.1", "seed=11", "rate_bps=10000000", "overhead=38", "delay_ns=5000000", NULL},
        {"loss_model=gemodel", "ge_p=0.05", "ge_r=0.3", "seed=12", "rate_bps=2000000", "queue_packets=8",
         "delay_ns=5000000", NULL}};
    static struct fates got[2][2]; /* [config][udp] */
    static struct dir_counters cnt;
    memset(got, 0, sizeof(got));
    for (int k = 0; k < 2; k++) {
        struct dir_config cfg[2];
        bool changed[2];
        char err[256];
        config_defaults(&cfg[0]);
        config_defaults(&cfg[1]);
        for (const char *const *kv = configs[k]; *kv; kv++)
            CHECK(config_apply(cfg, changed, *kv, err, sizeof(err)) == 0, "%s: %s", *kv, err);
        if (k == 1)
            cfg[C2S].jitter_ns = 2 * MS, cfg[C2S].reorder = true; /* jitter draws too, in any order */
        for (int u = 0; u < 2; u++) {
            struct flow_table t;
            flows_init(&t, 16);
            memset(&cnt, 0, sizeof(cnt));
            struct pipeline pl;
            pipeline_init(&pl, C2S, &cfg[C2S], &cnt);
            pl.output = fates_out;
            pl.on_drop = fates_drop;
            pl.ctx = &got[k][u];
            pl.flows = &t;
            if (k == 0)
                send_sized(&pl, u, 300, 0, 2 * MS, 1); /* 1538 bytes take 1.23 ms: never a queue */
            else
                send_sized(&pl, u, 600, 0, 40 * MS, 12); /* bursts of 12 into a queue of 8 */
            drain(&pl);
            const struct flow *f = only(&t);
            CHECK(f && f->side[C2S].lost == cnt_get(&cnt.lost) && f->side[C2S].queue_drops == cnt_get(&cnt.queue_drops),
                  "the record counts the link's drops");
            pipeline_destroy(&pl);
            flows_destroy(&t);
        }
        int n = k == 0 ? 300 : 600, lost[3] = {0}, delivered[3] = {0}, queued = 0, same = 0;
        for (int i = 0; i < n; i++) {
            same += got[k][0].out_ns[i] == got[k][1].out_ns[i] && got[k][0].why[i] == got[k][1].why[i];
            lost[i % 3] += got[k][1].why[i] == V_DROP_LOSS;
            queued += got[k][1].why[i] == V_DROP_QUEUE;
            delivered[i % 3] += got[k][1].out_ns[i] != 0;
        }
        CHECK(same == n, "config %d: %d of %d packets met the same as a TCP segment of their size", k, same, n);
        for (int s = 0; s < 3; s++)
            CHECK(lost[s] > 0 && delivered[s] > 0, "config %d: %u-byte datagrams: %d lost, %d delivered", k,
                  DGRAM_SIZES[s], lost[s], delivered[s]);
        CHECK(k == 0 ? queued == 0 : queued > 0, "config %d: %d queue drops", k, queued);
    }
    /* spaced out: arrival (2 ms apart) + (IP bytes + 38) * 8 bits at 10 Mbit/s + 5 ms */
    int exact = 0, n = 0;
    for (int i = 0; i < 300; i++) {
        if (!got[0][1].out_ns[i])
            continue;
        int64_t ip = DGRAM_SIZES[i % 3] + 28, want = i * 2 * MS + (ip + 38) * 8 * 100 + 5 * MS;
        n++;
        exact += got[0][1].out_ns[i] == want;
        if (got[0][1].out_ns[i] != want && exact + 1 == n)
            fprintf(stderr, "datagram %d (%lld IP bytes) out at %lld, want %lld\n", i, (long long)ip,
                    (long long)got[0][1].out_ns[i], (long long)want);
    }
    CHECK(n > 200 && exact == n, "%d of %d delivered datagrams left at arrival + serialisation + delay", exact, n);
}

/* Each client datagram's fate in the list is what the link did with it, settled as it happens. */
static void test_udp_fates_through_the_pipeline(void)
{
    static struct dir_counters cnt;
    static struct fates got;
    memset(&cnt, 0, sizeof(cnt));
    memset(&got, 0, sizeof(got));
    struct flow_table t;
    flows_init(&t, 16);
    struct dir_config c = {0};
    const char *kv[] = {"loss=0.2", "seed=5", "rate_bps=1000000", "queue_packets=4", "delay_ns=1000000", NULL};
    struct dir_config cfg[2];
    bool changed[2];
    char err[256];
    config_defaults(&cfg[0]);
    config_defaults(&cfg[1]);
    for (const char *const *k = kv; *k; k++)
        config_apply(cfg, changed, *k, err, sizeof(err));
    c = cfg[C2S];
    struct pipeline pl;
    pipeline_init(&pl, C2S, &c, &cnt);
    pl.output = fates_out;
    pl.on_drop = fates_drop;
    pl.ctx = &got;
    pl.flows = &t;
    send_sized(&pl, true, 200, 0, MS, 1); /* 1500 IP bytes take 12 ms at 1 Mbit/s: overload */
    const struct flow *f = only(&t);
    CHECK(f && f->ndgrams == 200 && f->dgram_unsettled < 200, "in flight before the link drains");
    int in_flight = 0;
    for (unsigned i = 0; f && i < f->ndgrams; i++)
        in_flight += t.dgrams[f->dgram_chunks[i / FLOW_DGRAM_CHUNK] * FLOW_DGRAM_CHUNK + i % FLOW_DGRAM_CHUNK].fate ==
                     DGRAM_IN_FLIGHT;
    CHECK(in_flight > 0 && (uint64_t)in_flight == cnt_get(&cnt.in_flight), "%d listed in flight, the link holds %llu",
          in_flight, (unsigned long long)cnt_get(&cnt.in_flight));
    drain(&pl);
    int agree = 0, kinds[4] = {0};
    for (unsigned i = 0; f && i < f->ndgrams; i++) {
        const struct flow_dgram *d = &t.dgrams[f->dgram_chunks[i / FLOW_DGRAM_CHUNK] * FLOW_DGRAM_CHUNK +
                                               i % FLOW_DGRAM_CHUNK];
        int want = got.why[i] == V_DROP_LOSS ? DGRAM_LOST : got.why[i] ? DGRAM_QUEUE_DROP : DGRAM_DELIVERED;
        agree += d->fate == want && d->id == i && d->bytes == DGRAM_SIZES[i % 3] && d->t_ns == (int64_t)i * MS;
        kinds[d->fate]++;
    }
    CHECK(agree == 200, "%d of 200 datagrams listed with the link's fate", agree);
    CHECK(kinds[DGRAM_LOST] > 0 && kinds[DGRAM_QUEUE_DROP] > 0 && kinds[DGRAM_DELIVERED] > 0 && !kinds[DGRAM_IN_FLIGHT],
          "fates: %d delivered, %d lost, %d queue drops, %d in flight", kinds[DGRAM_DELIVERED], kinds[DGRAM_LOST],
          kinds[DGRAM_QUEUE_DROP], kinds[DGRAM_IN_FLIGHT]);
    pipeline_destroy(&pl);
    flows_destroy(&t);
}

int main(void)
{
    test_parse_and_canonical_key();
    test_flights_and_milestones();
    test_retransmissions();
    test_port_reuse_is_a_new_connection();
    test_drops_attributed();
    test_table_full_and_reset();
    test_json();
    test_link_lateness();
    test_quic_parse();
    test_udp_record();
    test_udp_list_bounds();
    test_udp_port_reuse();
    test_datagrams_meet_the_link_as_segments();
    test_udp_fates_through_the_pipeline();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
