/* pqlink: a userspace link emulator between two network namespaces.
 *
 * It opens a TUN device in the client namespace and one in the server namespace and forwards
 * packets between them; per direction: loss -> queue (drop-tail, CoDel or PIE) in front of a fixed
 * rate or a delivery trace -> delay -> write.
 * Addresses, MTU and routes of the devices are set up by the caller (pqbench.testbed) after the
 * "ready" line. SIGTERM/SIGINT (or "quit" on the control socket) end it cleanly; the final
 * counters go to stdout and to --stats. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "control.h"
#include "link.h"
#include "tun.h"
#include "util.h"

static void usage(FILE *f)
{
    fputs("usage: pqlink --client-netns NS --server-netns NS [options] [KEY=VALUE ...]\n"
          "  --client-dev NAME    TUN device in the client namespace (default pqlc)\n"
          "  --server-dev NAME    TUN device in the server namespace (default pqls)\n"
          "  --control PATH       unix socket for stats, flows, live reconfiguration and quit\n"
          "  --stats PATH         write the final counters (JSON) here at exit\n"
          "  --pcap PREFIX        capture what crossed the link into PREFIX-c2s.pcap, PREFIX-s2c.pcap\n"
          "  --snaplen N          bytes kept per captured packet (default 65535)\n"
          "  --drop-log PATH      one line per dropped packet\n"
          "  --flows N            connections the wire recorder keeps (default 65536; 0 = recorder off)\n"
          "  --fifo PRIO          run the forwarding threads SCHED_FIFO at PRIO (1-99)\n"
          "  --spin-us N          busy-wait the last N microseconds before each deadline\n"
          "  --keep-awake N       N idle-priority spinning threads keep the CPUs from halting (0-64)\n"
          "  --die-with-parent    exit (and take the devices along) when the parent dies\n"
          "KEY=VALUE sets a parameter of both directions, c2s.KEY=VALUE or s2c.KEY=VALUE of one:\n"
          "  delay_ns jitter_ns reorder(0|1) loss loss_model(none|bernoulli|gemodel)\n"
          "  ge_p ge_r ge_1h ge_1k rate_bps(0=unlimited) overhead queue_packets queue_bytes seed\n"
          "  trace(PATH|none: mahimahi delivery trace instead of rate_bps) trace_bytes(default 1500)\n"
          "  aqm(droptail|codel|pie) codel_target_ns codel_interval_ns pie_target_ns pie_tupdate_ns\n"
          "  pie_max_burst_ns pie_alpha pie_beta ecn(0|1)\n",
          f);
}

/* What the command line asks for besides the link's own settings (those go into struct link). */
struct options {
    const char *client_ns, *server_ns, *client_dev, *server_dev;
    const char *control_path, *stats_path, *pcap_prefix, *droplog_path;
    unsigned long snaplen;
    bool die_with_parent;
};

/* A whole number in lo..hi, or exit naming the option (what: "number", "priority"). */
static long parse_range(const char *opt, const char *text, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        die_msg("%s: '%s' is not a %s in %ld..%ld", opt, text, what, lo, hi);
    return v;
}

static void parse_options(int argc, char **argv, struct options *o, struct link *l)
{
    *o = (struct options){.client_dev = "pqlc", .server_dev = "pqls", .snaplen = 65535};
    config_defaults(&l->cfg[0]);
    config_defaults(&l->cfg[1]);
    l->flow_capacity = 65536;

    enum { O_CNS = 256, O_SNS, O_CDEV, O_SDEV, O_CTL, O_STATS, O_PCAP, O_SNAP, O_DROP, O_FLOWS, O_FIFO, O_SPIN,
           O_KEEP, O_PDEATH };
    static const struct option opts[] = {
        {"client-netns", required_argument, 0, O_CNS}, {"server-netns", required_argument, 0, O_SNS},
        {"client-dev", required_argument, 0, O_CDEV},  {"server-dev", required_argument, 0, O_SDEV},
        {"control", required_argument, 0, O_CTL},      {"stats", required_argument, 0, O_STATS},
        {"pcap", required_argument, 0, O_PCAP},        {"snaplen", required_argument, 0, O_SNAP},
        {"drop-log", required_argument, 0, O_DROP},    {"flows", required_argument, 0, O_FLOWS},
        {"fifo", required_argument, 0, O_FIFO},        {"spin-us", required_argument, 0, O_SPIN},
        {"keep-awake", required_argument, 0, O_KEEP},  {"die-with-parent", no_argument, 0, O_PDEATH},
        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_CNS: o->client_ns = optarg; break;
        case O_SNS: o->server_ns = optarg; break;
        case O_CDEV: o->client_dev = optarg; break;
        case O_SDEV: o->server_dev = optarg; break;
        case O_CTL: o->control_path = optarg; break;
        case O_STATS: o->stats_path = optarg; break;
        case O_PCAP: o->pcap_prefix = optarg; break;
        case O_DROP: o->droplog_path = optarg; break;
        case O_SNAP: o->snaplen = (unsigned long)parse_range("--snaplen", optarg, "number", 20, 262144); break;
        case O_FLOWS: l->flow_capacity = (size_t)parse_range("--flows", optarg, "number", 0, FLOW_MAX_CAPACITY); break;
        case O_FIFO: l->fifo_prio = (int)parse_range("--fifo", optarg, "priority", 1, 99); break;
        case O_SPIN: l->spin_ns = parse_range("--spin-us", optarg, "number", 0, 10000) * 1000; break;
        case O_KEEP: l->keep_awake = (int)parse_range("--keep-awake", optarg, "number", 0, KEEP_AWAKE_MAX); break;
        case O_PDEATH: o->die_with_parent = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    bool changed[2];
    char err[512];
    for (int i = optind; i < argc; i++)
        if (config_apply(l->cfg, changed, argv[i], err, sizeof(err)) < 0)
            die_msg("%s", err);
    if (!o->client_ns || !o->server_ns) {
        usage(stderr);
        die_msg("--client-netns and --server-netns are required");
    }
}

/* Signals arrive through a signalfd in the main thread only; returns its fd. */
static int take_signals(bool die_with_parent)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
        die_sys("pthread_sigmask", "SIGTERM SIGINT SIGHUP");
    int fd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (fd < 0)
        die_sys("signalfd", "SIGTERM SIGINT SIGHUP");
    if (die_with_parent) {
        pid_t parent = getppid();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
            die_sys("prctl", "PR_SET_PDEATHSIG");
        if (getppid() != parent)
            die_msg("parent exited during start-up");
    }
    return fd;
}

/* The TUN devices, the optional records (drop log, pcap) and memory locking. */
static void set_up(struct link *l, const struct options *o)
{
    l->d[DIR_C2S].in_fd = tun_open_in_netns(o->client_ns, o->client_dev);
    l->d[DIR_S2C].in_fd = tun_open_in_netns(o->server_ns, o->server_dev);
    l->d[DIR_C2S].out_fd = l->d[DIR_S2C].in_fd;
    l->d[DIR_S2C].out_fd = l->d[DIR_C2S].in_fd;
    l->d[DIR_C2S].in_name = o->client_dev;
    l->d[DIR_S2C].in_name = o->server_dev;

    if (l->fifo_prio > 0 && mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
        warn_sys("mlockall", "page faults may add latency"); /* not fatal: only a bit less exact */
    if (o->droplog_path)
        l->droplog = droplog_open(o->droplog_path);
    if (o->pcap_prefix) {
        char path[4096];
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof(path), "%s-%s.pcap", o->pcap_prefix, dir_names[i]);
            pcap_open(&l->d[i].pcap, path, (uint32_t)o->snaplen);
        }
    }
}

/* Serves the control socket until a signal or "quit". */
static void event_loop(struct link *l, int sig_fd, int ctl_fd)
{
    struct pollfd pfd[2] = {{sig_fd, POLLIN, 0}, {ctl_fd, POLLIN, 0}};
    for (bool quit = false; !quit;) {
        if (poll(pfd, ctl_fd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            die_sys("poll", "control");
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sig_fd, &si, sizeof(si)) == sizeof(si))
                quit = true;
        }
        if (!quit && ctl_fd >= 0 && (pfd[1].revents & POLLIN))
            quit = control_serve(l, ctl_fd);
    }
}

static void write_file_atomically(const char *path, const char *text)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f) {
        warn_sys("fopen", tmp);
        return;
    }
    fputs(text, f);
    fputc('\n', f);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        warn_sys("rename", path);
}

/* Stops the threads, reports the final counters and closes everything (the devices go last). */
static void shut_down(struct link *l, const struct options *o)
{
    link_stop(l);
    static char stats[LINK_JSON_MAX];
    if (link_stats_json(l, stats, sizeof(stats)) < 0)
        snprintf(stats, sizeof(stats), "{\"error\":\"stats too large\"}");
    printf("%s\n", stats);
    fflush(stdout);
    if (o->stats_path)
        write_file_atomically(o->stats_path, stats);
    for (int i = 0; i < 2; i++)
        pcap_close(&l->d[i].pcap);
    if (l->droplog && fclose(l->droplog) != 0)
        warn_sys("fclose", o->droplog_path);
    if (o->control_path)
        unlink(o->control_path);
    close(l->d[0].in_fd); /* the TUN devices disappear with their fds */
    close(l->d[1].in_fd);
    link_reap_keepers(l); /* last: the counters and the devices never wait for the helpers */
}

int main(int argc, char **argv)
{
    static struct link link; /* large (histograms); static keeps it off the stack */
    struct options o;
    parse_options(argc, argv, &o, &link);
    int sig_fd = take_signals(o.die_with_parent);
    set_up(&link, &o);
    int ctl_fd = o.control_path ? control_listen(o.control_path) : -1;
    link_start(&link);
    printf("{\"event\":\"ready\",\"pid\":%d,\"client_dev\":\"%s\",\"server_dev\":\"%s\"}\n", (int)getpid(),
           o.client_dev, o.server_dev);
    fflush(stdout);
    event_loop(&link, sig_fd, ctl_fd);
    shut_down(&link, &o);
    return 0;
}
