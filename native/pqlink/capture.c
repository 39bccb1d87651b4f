#include "capture.h"

#include <stdlib.h>
#include <time.h>

#include "util.h"

void pcap_open(struct pcap_writer *w, const char *path, uint32_t snaplen)
{
    w->f = fopen(path, "wbe");
    if (!w->f)
        die_sys("fopen", path);
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    w->snaplen = snaplen;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    w->realtime_offset = (int64_t)rt.tv_sec * NS_PER_SEC + rt.tv_nsec - mono_ns();
    /* nanosecond-resolution pcap: magic a1b23c4d, version 2.4, LINKTYPE_RAW (101) */
    uint32_t hdr[6] = {0xa1b23c4d, 2 | (4u << 16), 0, 0, snaplen, 101};
    if (fwrite(hdr, sizeof(hdr), 1, w->f) != 1)
        die_sys("fwrite", path);
}

void pcap_write(struct pcap_writer *w, const struct pkt *p, int64_t mono_now)
{
    int64_t t = mono_now + w->realtime_offset;
    uint32_t incl = p->len < w->snaplen ? p->len : w->snaplen;
    uint32_t rec[4] = {(uint32_t)(t / NS_PER_SEC), (uint32_t)(t % NS_PER_SEC), incl, p->len};
    fwrite(rec, sizeof(rec), 1, w->f);
    fwrite(p->data, 1, incl, w->f);
}

void pcap_close(struct pcap_writer *w)
{
    if (w->f && fclose(w->f) != 0)
        warn_sys("fclose", "pcap");
    w->f = NULL;
}

FILE *droplog_open(const char *path)
{
    FILE *f = fopen(path, "we");
    if (!f)
        die_sys("fopen", path);
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    fputs("# pqlink drop log: mono_ns direction seq reason bytes "
          "(seq counts every packet read in that direction from 0; reason loss|queue|memory)\n",
          f);
    return f;
}
