#include "middlebox.h"

#include <string.h>

#define TCP_RST 0x04
#define TCP_ACK 0x10

static uint32_t sum16(const uint8_t *p, uint32_t n, uint32_t sum)
{
    for (; n > 1; p += 2, n -= 2)
        sum += (uint32_t)p[0] << 8 | p[1];
    if (n)
        sum += (uint32_t)p[0] << 8;
    return sum;
}

static uint16_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* The TCP header's offset and length in an IPv4 packet, or 0 when it is not a whole, unfragmented
 * TCP segment. */
static uint32_t tcp_at(const uint8_t *d, uint32_t len, uint32_t *tcp_len)
{
    if (!d || len < 20 || d[0] >> 4 != 4 || d[9] != 6)
        return 0;
    uint32_t ihl = (uint32_t)(d[0] & 15) * 4, total = (uint32_t)d[2] << 8 | d[3];
    if (ihl < 20 || total > len || total < ihl + 20 || ((d[6] & 0x1f) | d[7]) || (d[6] & 0x20))
        return 0; /* a fragment (offset or more-fragments set): not read */
    uint32_t doff = (uint32_t)(d[ihl + 12] >> 4) * 4;
    if (doff < 20 || ihl + doff > total)
        return 0;
    *tcp_len = doff;
    return ihl;
}

int middlebox_client_hello(const uint8_t *d, uint32_t len, uint32_t *record_len, uint32_t *payload_len)
{
    uint32_t doff, ihl = tcp_at(d, len, &doff);
    if (!ihl)
        return 0;
    uint32_t total = (uint32_t)d[2] << 8 | d[3];
    const uint8_t *p = d + ihl + doff;
    uint32_t n = total - ihl - doff;
    /* a handshake record (22) of TLS 1.0-1.3's version bytes whose first message is a ClientHello (1) */
    if (n < 6 || p[0] != 22 || p[1] != 3 || p[2] > 4 || p[5] != 1)
        return 0;
    *record_len = (uint32_t)p[3] << 8 | p[4];
    *payload_len = n;
    return 1;
}

uint32_t middlebox_to_rst(uint8_t *d, uint32_t len)
{
    uint32_t doff, ihl = tcp_at(d, len, &doff);
    if (!ihl)
        return len;
    uint8_t *t = d + ihl;
    uint32_t total = ihl + 20;
    t[12] = 5 << 4; /* no options */
    t[13] = TCP_RST | (t[13] & TCP_ACK);
    t[14] = t[15] = 0; /* window */
    t[18] = t[19] = 0; /* urgent pointer */
    d[2] = (uint8_t)(total >> 8);
    d[3] = (uint8_t)total;
    d[10] = d[11] = 0;
    uint16_t ipsum = fold(sum16(d, ihl, 0));
    d[10] = (uint8_t)(ipsum >> 8);
    d[11] = (uint8_t)ipsum;
    t[16] = t[17] = 0;
    /* pseudo-header: addresses, protocol, TCP length */
    uint32_t sum = sum16(d + 12, 8, 0) + 6 + 20;
    uint16_t tsum = fold(sum16(t, 20, sum));
    t[16] = (uint8_t)(tsum >> 8);
    t[17] = (uint8_t)tsum;
    return total;
}

static struct middlebox_killed flow_of(const uint8_t *d)
{
    uint32_t ihl = (uint32_t)(d[0] & 15) * 4;
    struct middlebox_killed k;
    memcpy(&k.saddr, d + 12, 4);
    memcpy(&k.daddr, d + 16, 4);
    memcpy(&k.sport, d + ihl, 2);
    memcpy(&k.dport, d + ihl + 2, 2);
    return k;
}

static bool was_killed(const struct middlebox_stage *s, struct middlebox_killed k)
{
    for (unsigned i = 0; i < s->killed_n; i++)
        if (!memcmp(&s->killed[i], &k, sizeof k))
            return true;
    return false;
}

static bool addressed(const struct middlebox_stage *s, const uint8_t *d)
{
    uint32_t daddr = (uint32_t)d[16] << 24 | (uint32_t)d[17] << 16 | (uint32_t)d[18] << 8 | d[19];
    return (daddr & s->to_mask) == s->to;
}

/* An IPv4 fragment: more fragments follow (MF) or it is not the first (a fragment offset) */
bool middlebox_ip_fragment(const uint8_t *d, uint32_t len)
{
    return len >= 20 && d[0] >> 4 == 4 && ((uint32_t)d[6] << 8 | d[7]) & 0x3fff;
}

static enum verdict mb_enqueue(struct stage *base, struct pkt *p)
{
    struct middlebox_stage *s = (struct middlebox_stage *)base;
    uint32_t record, payload;
    if (s->action == MBOX_DROP_FRAGMENTS) {
        /* what firewalls that cannot reassemble do: an IKE_SA_INIT too large for the path (it cannot be split
         * at the IKE layer, RFC 7383) never arrives */
        if (middlebox_ip_fragment(p->data, p->len) && addressed(s, p->data)) {
            s->acted++;
            return V_DROP_LOSS;
        }
        fifo_push(&s->passed, p);
        return V_ACCEPT;
    }
    if (s->action != MBOX_OFF && middlebox_client_hello(p->data, p->len, &record, &payload) &&
        addressed(s, p->data)) {
        bool spans = 5 + record > payload, big = s->max_bytes && record > s->max_bytes;
        struct middlebox_killed k = flow_of(p->data);
        /* a reset connection's retransmitted ClientHello passes: the server, which has forgotten the
         * connection, answers it with the RST the client sees */
        if ((spans && s->split) || big) {
            if (s->action == MBOX_RESET && was_killed(s, k)) {
                fifo_push(&s->passed, p);
                return V_ACCEPT;
            }
            s->acted++;
            if (s->action == MBOX_DROP)
                return V_DROP_LOSS;
            p->len = middlebox_to_rst(p->data, p->len);
            s->killed[s->killed_next] = k;
            s->killed_next = (s->killed_next + 1) % MIDDLEBOX_KILLED;
            if (s->killed_n < MIDDLEBOX_KILLED)
                s->killed_n++;
        }
    }
    fifo_push(&s->passed, p);
    return V_ACCEPT;
}

static struct pkt *mb_dequeue(struct stage *base, int64_t now)
{
    (void)now;
    return fifo_pop(&((struct middlebox_stage *)base)->passed); /* no time passes here */
}

static int64_t mb_next_deadline(const struct stage *base)
{
    const struct middlebox_stage *s = (const struct middlebox_stage *)base;
    return s->passed.head ? s->passed.head->t : NEVER_DEADLINE;
}

static void take(struct middlebox_stage *s, const struct dir_config *c)
{
    s->action = c->middlebox;
    s->split = c->middlebox_split;
    s->max_bytes = c->middlebox_max;
    s->to = c->middlebox_to;
    s->to_mask = c->middlebox_to_mask;
}

static int init_op(struct stage *base, const struct dir_config *c, int dir)
{
    (void)dir;
    struct middlebox_stage *s = (struct middlebox_stage *)base;
    *s = (struct middlebox_stage){.base = {&middlebox_stage_ops}};
    take(s, c);
    return 0;
}

static void configure_op(struct stage *base, const struct dir_config *old, const struct dir_config *c, int dir)
{
    (void)old;
    (void)dir;
    take((struct middlebox_stage *)base, c);
}

static void restart_op(struct stage *base, const struct dir_config *c, int dir)
{
    (void)c;
    (void)dir;
    struct middlebox_stage *s = (struct middlebox_stage *)base;
    s->acted = 0;
    s->killed_n = s->killed_next = 0;
}

static void destroy_op(struct stage *base, pkt_sink_fn sink, void *ctx)
{
    struct middlebox_stage *s = (struct middlebox_stage *)base;
    struct pkt *p;
    while ((p = fifo_pop(&s->passed)))
        sink(ctx, p);
}

const struct stage_ops middlebox_stage_ops = {
    .name = "middlebox",
    .init = init_op,
    .configure = configure_op,
    .restart = restart_op,
    .enqueue = mb_enqueue,
    .dequeue = mb_dequeue,
    .next_deadline = mb_next_deadline,
    .peaks = NULL, /* packets pass at once */
    .destroy = destroy_op,
};
