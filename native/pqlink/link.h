/* The running link: two directions, each with its own thread, the wire recorder they share, and
 * the requests the control thread passes to them (new parameters, counter resets, stop). */
#ifndef PQLINK_LINK_H
#define PQLINK_LINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "capture.h"
#include "pipeline.h"

#define KEEP_AWAKE_MAX 64
#define LINK_DIR_JSON_MAX (3 * CONFIG_JSON_MAX)   /* one direction's counters, trace and config */
#define LINK_JSON_MAX (2 * LINK_DIR_JSON_MAX + 512) /* link_stats_json's longest answer */

struct link;

struct direction {
    struct link *owner;
    int dir;
    int in_fd, out_fd;
    int wake_fd;  /* eventfd: the control thread has a request */
    int timer_fd; /* absolute CLOCK_MONOTONIC deadline of the next packet */
    int64_t armed;
    pthread_t thread;
    bool started;
    struct pipeline pl;
    struct dir_counters cnt;
    _Atomic(struct dir_config *) pending; /* new parameters, taken by the thread */
    atomic_uint reset_req, reset_done;
    struct pcap_writer pcap;
    FILE *droplog;
    uint8_t *scratch;
    const char *in_name;
    /* Arrival hints. Writing into our output device runs the receiving stack synchronously, so a
     * reply (SYN-ACK, ACK-clocked data) lands in the other direction's input during our write().
     * If that thread sleeps, its wake-up takes 50-150 us on an idle VM; we note when we saw the
     * reply waiting, and it timestamps what it reads first with that instead of its late clock. */
    struct direction *peer;    /* the other direction: its input is our output device */
    atomic_bool sleeping;      /* in poll(), nothing due and input empty */
    _Atomic int64_t hint;      /* when the peer saw our input readable while we slept; 0 = none */
    int64_t last_empty;        /* when our input was last found empty */
    bool woke;                 /* just returned from poll() */
    uint64_t phase_told;       /* client->server: the last trace restart the peer was woken for */
};

struct link {
    struct direction d[2];
    struct dir_config cfg[2]; /* the control thread's copy of the current parameters */
    atomic_bool stop;
    int fifo_prio;   /* 0 = normal scheduling */
    int64_t spin_ns; /* busy-wait this long before each deadline */
    int keep_awake;  /* SCHED_IDLE spinning threads that keep the CPUs out of halt */
    pid_t keepers[KEEP_AWAKE_MAX]; /* keep-awake processes (see link.c) */
    int64_t started_ns;
    FILE *droplog;
    size_t flow_capacity;   /* connections the wire recorder keeps; 0 = off */
    struct flow_table flows; /* shared by both directions (its own lock) */
    struct trace_phase phase; /* where both directions are in their traces (phase.h) */
};

/* Starts the two forwarding threads (dies naming the failed call). */
void link_start(struct link *l);
/* Asks the threads to stop and joins them; kills the keep-awake processes. */
void link_stop(struct link *l);
/* Waits for the keep-awake processes link_stop killed (pqlink exits only without children left). */
void link_reap_keepers(struct link *l);
/* Hands new parameters to the threads and waits until they use them. */
void link_reconfigure(struct link *l, const struct dir_config cfg[2], const bool changed[2]);
/* Zeroes counters, peaks and lateness (waits until both threads did it), then empties the flow table. */
void link_reset(struct link *l);
/* Counters and parameters as JSON into buf. Returns the length, or -1 when buf is too small. */
int link_stats_json(struct link *l, char *buf, size_t len);
int link_config_json(struct link *l, char *buf, size_t len);

#endif
