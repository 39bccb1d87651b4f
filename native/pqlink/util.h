/* Small helpers shared by pqlink's units: monotonic time, counters, error reporting. */
#ifndef PQLINK_UTIL_H
#define PQLINK_UTIL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_SEC 1000000000LL
#define NEVER_DEADLINE INT64_MAX

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

static inline struct timespec ns_to_timespec(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / NS_PER_SEC, .tv_nsec = ns % NS_PER_SEC};
    return ts;
}

/* Counters have one writer (the direction's thread) and are read by the control thread:
 * a relaxed load+store is enough and costs the same as a plain increment. */
typedef _Atomic uint64_t counter_t;
static inline void cnt_add(counter_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}
static inline void cnt_set(counter_t *c, uint64_t v) { atomic_store_explicit(c, v, memory_order_relaxed); }
static inline uint64_t cnt_get(const counter_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }
static inline void cnt_max(counter_t *c, uint64_t v)
{
    if (v > cnt_get(c))
        cnt_set(c, v);
}

/* Prints "pqlink: <syscall>(<what>): <strerror>" and exits 1; every failing call names itself. */
_Noreturn void die_sys(const char *call, const char *what);
_Noreturn void die_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warn_sys(const char *call, const char *what);

#endif
