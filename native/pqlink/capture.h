/* Optional records of what the link did: a pcap per direction of every packet that crossed it
 * (LINKTYPE_RAW, nanosecond timestamps) and a text log of every drop. */
#ifndef PQLINK_CAPTURE_H
#define PQLINK_CAPTURE_H

#include <stdint.h>
#include <stdio.h>

#include "packet.h"

struct pcap_writer {
    FILE *f;
    uint32_t snaplen;
    int64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC at open */
};

/* Dies naming the failed call. */
void pcap_open(struct pcap_writer *w, const char *path, uint32_t snaplen);
void pcap_write(struct pcap_writer *w, const struct pkt *p, int64_t mono_now);
void pcap_close(struct pcap_writer *w);

/* The drop log: a '#' header naming the columns, then "mono_ns dir seq reason bytes" lines. */
FILE *droplog_open(const char *path);

#endif
