/* Delivery traces in mahimahi's format: one integer a line, milliseconds from the trace's start,
 * each line one opportunity to deliver up to one packet's worth of bytes (1500 by default); a time
 * repeated k times is k opportunities in that millisecond. The trace loops with a period equal to
 * its last time (at least 1 ms: a trace whose times are all 0 repeats every millisecond).
 *
 * A loaded trace is immutable and kept for the life of the process (trace_get interns it by path,
 * size and modification time), so configurations can point at it freely across threads. */
#ifndef PQLINK_TRACE_H
#define PQLINK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_PATH_MAX 1024
#define TRACE_MAX_LINES 20000000u
#define TRACE_MAX_MS 1000000000000LL /* 31 years: keeps every time in ns inside int64 */

struct trace {
    char path[TRACE_PATH_MAX];
    int64_t *t_ns; /* opportunity times from the start, ns, non-decreasing */
    size_t n;
    int64_t period_ns;
    int64_t last_ms;
};

/* Parses text (len bytes) into t; returns 0, or -1 with "line N: ..." in err. t->path is left as is. */
int trace_parse(struct trace *t, const char *text, size_t len, char *err, size_t errlen);
/* The trace at path, loaded once (again if the file changed). Returns NULL with the reason
 * ("<path> line N: ...", or the failed system call) in err. */
const struct trace *trace_get(const char *path, char *err, size_t errlen);
void trace_free(struct trace *t);

/* A position in a looping trace: opportunity idx of loop `loop`, counted from epoch. */
struct trace_pos {
    int64_t loop;
    size_t idx;
};

static inline int64_t trace_time(const struct trace *t, int64_t epoch, struct trace_pos p)
{
    return epoch + p.loop * t->period_ns + t->t_ns[p.idx];
}

/* The offset a phase fraction u in [0, 1) stands for: whole milliseconds into the period. */
static inline int64_t trace_offset_ns(const struct trace *t, double u)
{
    return (int64_t)(u * (double)(t->period_ns / 1000000)) * 1000000;
}

/* The first opportunity at or after time `at`. */
struct trace_pos trace_seek(const struct trace *t, int64_t epoch, int64_t at);

static inline void trace_advance(const struct trace *t, struct trace_pos *p)
{
    if (++p->idx == t->n) {
        p->idx = 0;
        p->loop++;
    }
}

#endif
