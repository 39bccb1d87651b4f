#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int trace_parse(struct trace *t, const char *text, size_t len, char *err, size_t errlen)
{
    size_t cap = 1024, n = 0, line = 0;
    int64_t *v = malloc(cap * sizeof(*v)), prev = 0;
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        line++;
        size_t a = i, b = end;
        i = end + 1;
        while (a < b && blank(text[a]))
            a++;
        while (b > a && blank(text[b - 1]))
            b--;
        if (a == b && i >= len) /* the file's last line ended with a newline */
            break;
        if (a == b || !(text[a] == '-' || (text[a] >= '0' && text[a] <= '9'))) {
            snprintf(err, errlen, "line %zu: '%.*s' is not a whole number of milliseconds", line,
                     (int)(b - a > 40 ? 40 : b - a), text + a);
            goto fail;
        }
        bool neg = text[a] == '-';
        int64_t ms = 0;
        size_t k = a + neg;
        if (k == b)
            goto not_number;
        for (; k < b; k++) {
            if (text[k] < '0' || text[k] > '9')
                goto not_number;
            ms = ms * 10 + (text[k] - '0');
            if (ms > TRACE_MAX_MS) {
                snprintf(err, errlen, "line %zu: %.*s ms is too large (at most %lld)", line, (int)(b - a), text + a,
                         (long long)TRACE_MAX_MS);
                goto fail;
            }
        }
        if (neg) {
            snprintf(err, errlen, "line %zu: %.*s is negative (times count from the trace's start)", line,
                     (int)(b - a), text + a);
            goto fail;
        }
        if (ms < prev) {
            snprintf(err, errlen, "line %zu: %lld is before the line above (%lld): times must not decrease", line,
                     (long long)ms, (long long)prev);
            goto fail;
        }
        if (n == TRACE_MAX_LINES) {
            snprintf(err, errlen, "line %zu: more than %u lines", line, TRACE_MAX_LINES);
            goto fail;
        }
        if (n == cap) {
            int64_t *bigger = realloc(v, 2 * cap * sizeof(*v));
            if (!bigger) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            v = bigger;
            cap *= 2;
        }
        v[n++] = ms * 1000000;
        prev = ms;
        continue;
    not_number:
        snprintf(err, errlen, "line %zu: '%.*s' is not a whole number of milliseconds", line,
                 (int)(b - a > 40 ? 40 : b - a), text + a);
        goto fail;
    }
    if (!n) {
        snprintf(err, errlen, "line 1: the trace is empty (it needs at least one delivery time)");
        goto fail;
    }
    t->t_ns = v;
    t->n = n;
    t->last_ms = prev;
    /* the trace repeats after its last time; a trace of zeros would repeat in no time */
    t->period_ns = (prev > 0 ? prev : 1) * 1000000;
    return 0;
fail:
    free(v);
    return -1;
}

void trace_free(struct trace *t)
{
    free(t->t_ns);
    t->t_ns = NULL;
    t->n = 0;
}

struct trace_pos trace_seek(const struct trace *t, int64_t epoch, int64_t at)
{
    int64_t rel = at - epoch;
    int64_t loop = rel / t->period_ns;
    if (rel % t->period_ns < 0) /* floor division for times before the epoch */
        loop--;
    int64_t within = rel - loop * t->period_ns;
    size_t lo = 0, hi = t->n; /* first index whose time >= within */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->t_ns[mid] < within)
            lo = mid + 1;
        else
            hi = mid;
    }
    struct trace_pos p = {loop, lo};
    if (lo == t->n)
        return (struct trace_pos){loop + 1, 0};
    /* the last line of the loop before falls on this loop's start when it equals the period
     * (before the epoch there is no loop before) */
    if (lo == 0 && loop > 0 && t->t_ns[t->n - 1] == t->period_ns && within == 0)
        return (struct trace_pos){loop - 1, t->n - 1};
    return p;
}

/* ---- loaded traces, kept for the life of the process ------------------------------------------ */

struct cached {
    struct cached *next;
    struct trace t;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached *cache;

static int read_all(const char *path, char **out, size_t *len, struct stat *st, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) < 0) {
        snprintf(err, errlen, "%s: cannot open the trace: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    char *buf = malloc((size_t)st->st_size + 1);
    size_t have = 0;
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, buf + have, (size_t)st->st_size - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "%s: read: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0 || (have += (size_t)r) == (size_t)st->st_size)
            break;
    }
    close(fd);
    *out = buf;
    *len = have;
    return 0;
}

const struct trace *trace_get(const char *path, char *err, size_t errlen)
{
    if (strlen(path) >= TRACE_PATH_MAX) {
        snprintf(err, errlen, "trace path longer than %d bytes", TRACE_PATH_MAX - 1);
        return NULL;
    }
    char *text;
    size_t len;
    struct stat st;
    if (read_all(path, &text, &len, &st, err, errlen) < 0)
        return NULL;
    pthread_mutex_lock(&cache_lock);
    for (struct cached *c = cache; c; c = c->next)
        if (!strcmp(c->t.path, path) && c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
            c->mtime.tv_sec == st.st_mtim.tv_sec && c->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            pthread_mutex_unlock(&cache_lock);
            free(text);
            return &c->t;
        }
    struct cached *c = calloc(1, sizeof(*c));
    char why[256];
    if (!c || trace_parse(&c->t, text, len, why, sizeof(why)) < 0) {
        if (!c)
            snprintf(why, sizeof(why), "out of memory");
        snprintf(err, errlen, "%s %s", path, why);
        pthread_mutex_unlock(&cache_lock);
        free(c);
        free(text);
        return NULL;
    }
    free(text);
    strcpy(c->t.path, path);
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->size = st.st_size;
    c->mtime = st.st_mtim;
    c->next = cache;
    cache = c;
    pthread_mutex_unlock(&cache_lock);
    return &c->t;
}
