/* What the stage tests share: packets made by hand and a direction's configuration from key=value pairs. */
#ifndef PQLINK_TEST_SUPPORT_H
#define PQLINK_TEST_SUPPORT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "packet.h"

#define MS 1000000LL
#define US 1000LL

static inline struct pkt *mkpkt(uint32_t len, int64_t t, uint64_t seq)
{
    struct pkt *p = calloc(1, sizeof(*p));
    p->len = len;
    p->t = p->arrival = t;
    p->seq = seq;
    return p;
}

/* The client->server direction's configuration after applying kvs (NULL-terminated) to the defaults. */
static inline struct dir_config cfg_with(const char *const *kvs)
{
    struct dir_config c[2];
    bool changed[2];
    char err[512];
    config_defaults(&c[0]);
    config_defaults(&c[1]);
    for (; kvs && *kvs; kvs++)
        if (config_apply(c, changed, *kvs, err, sizeof(err)) < 0) {
            fprintf(stderr, "config: %s\n", err);
            exit(1);
        }
    return c[0];
}

#endif
