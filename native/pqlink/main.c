/* pqlink: a userspace link emulator between two network namespaces.
 *
 * It opens a TUN device in the client namespace and one in the server namespace and forwards
 * packets between them; per direction: loss -> rate limiter with bounded queue -> delay -> write.
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
          "  --control PATH       unix socket for stats, live reconfiguration and quit\n"
          "  --stats PATH         write the final counters (JSON) here at exit\n"
          "  --pcap PREFIX        capture what crossed the link into PREFIX-c2s.pcap, PREFIX-s2c.pcap\n"
          "  --snaplen N          bytes kept per captured packet (default 65535)\n"
          "  --drop-log PATH      one line per dropped packet\n"
          "  --fifo PRIO          run the forwarding threads SCHED_FIFO at PRIO (1-99)\n"
          "  --spin-us N          busy-wait the last N microseconds before each deadline\n"
          "  --keep-awake N       N idle-priority spinning threads keep the CPUs from halting (0-64)\n"
          "  --die-with-parent    exit (and take the devices along) when the parent dies\n"
          "KEY=VALUE sets a parameter of both directions, c2s.KEY=VALUE or s2c.KEY=VALUE of one:\n"
          "  delay_ns jitter_ns reorder(0|1) loss loss_model(none|bernoulli|gemodel)\n"
          "  ge_p ge_r ge_1h ge_1k rate_bps(0=unlimited) overhead queue_packets queue_bytes seed\n",
          f);
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

int main(int argc, char **argv)
{
    const char *client_ns = NULL, *server_ns = NULL, *client_dev = "pqlc", *server_dev = "pqls";
    const char *control_path = NULL, *stats_path = NULL, *pcap_prefix = NULL, *droplog_path = NULL;
    unsigned long snaplen = 65535;
    bool die_with_parent = false;
    static struct link link; /* large (histograms); static keeps it off the stack */
    config_defaults(&link.cfg[0]);
    config_defaults(&link.cfg[1]);

    enum { O_CNS = 256, O_SNS, O_CDEV, O_SDEV, O_CTL, O_STATS, O_PCAP, O_SNAP, O_DROP, O_FIFO, O_SPIN, O_KEEP, O_PDEATH };
    static const struct option opts[] = {
        {"client-netns", required_argument, 0, O_CNS}, {"server-netns", required_argument, 0, O_SNS},
        {"client-dev", required_argument, 0, O_CDEV},  {"server-dev", required_argument, 0, O_SDEV},
        {"control", required_argument, 0, O_CTL},      {"stats", required_argument, 0, O_STATS},
        {"pcap", required_argument, 0, O_PCAP},        {"snaplen", required_argument, 0, O_SNAP},
        {"drop-log", required_argument, 0, O_DROP},    {"fifo", required_argument, 0, O_FIFO},
        {"spin-us", required_argument, 0, O_SPIN},     {"keep-awake", required_argument, 0, O_KEEP},
        {"die-with-parent", no_argument, 0, O_PDEATH},
        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0}};
    int o;
    char *end;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_CNS: client_ns = optarg; break;
        case O_SNS: server_ns = optarg; break;
        case O_CDEV: client_dev = optarg; break;
        case O_SDEV: server_dev = optarg; break;
        case O_CTL: control_path = optarg; break;
        case O_STATS: stats_path = optarg; break;
        case O_PCAP: pcap_prefix = optarg; break;
        case O_DROP: droplog_path = optarg; break;
        case O_SNAP:
            snaplen = strtoul(optarg, &end, 10);
            if (*end || snaplen < 20 || snaplen > 262144)
                die_msg("--snaplen: '%s' is not a number in 20..262144", optarg);
            break;
        case O_FIFO:
            link.fifo_prio = (int)strtol(optarg, &end, 10);
            if (*end || link.fifo_prio < 1 || link.fifo_prio > 99)
                die_msg("--fifo: '%s' is not a priority in 1..99", optarg);
            break;
        case O_SPIN: {
            long us = strtol(optarg, &end, 10);
            if (*end || us < 0 || us > 10000)
                die_msg("--spin-us: '%s' is not a number in 0..10000", optarg);
            link.spin_ns = us * 1000;
            break;
        }
        case O_KEEP:
            link.keep_awake = (int)strtol(optarg, &end, 10);
            if (*end || link.keep_awake < 0 || link.keep_awake > KEEP_AWAKE_MAX)
                die_msg("--keep-awake: '%s' is not a number in 0..%d", optarg, KEEP_AWAKE_MAX);
            break;
        case O_PDEATH: die_with_parent = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    bool changed[2];
    char err[512];
    for (int i = optind; i < argc; i++)
        if (config_apply(link.cfg, changed, argv[i], err, sizeof(err)) < 0)
            die_msg("%s", err);
    if (!client_ns || !server_ns) {
        usage(stderr);
        die_msg("--client-netns and --server-netns are required");
    }

    /* Signals arrive through a signalfd in the main thread only. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
        die_sys("pthread_sigmask", "SIGTERM SIGINT SIGHUP");
    int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sig_fd < 0)
        die_sys("signalfd", "SIGTERM SIGINT SIGHUP");
    if (die_with_parent) {
        pid_t parent = getppid();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
            die_sys("prctl", "PR_SET_PDEATHSIG");
        if (getppid() != parent)
            die_msg("parent exited during start-up");
    }

    link.d[DIR_C2S].in_fd = tun_open_in_netns(client_ns, client_dev);
    link.d[DIR_S2C].in_fd = tun_open_in_netns(server_ns, server_dev);
    link.d[DIR_C2S].out_fd = link.d[DIR_S2C].in_fd;
    link.d[DIR_S2C].out_fd = link.d[DIR_C2S].in_fd;
    link.d[DIR_C2S].in_name = client_dev;
    link.d[DIR_S2C].in_name = server_dev;

    if (link.fifo_prio > 0 && mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
        warn_sys("mlockall", "page faults may add latency"); /* not fatal: only a bit less exact */
    if (droplog_path)
        link.droplog = droplog_open(droplog_path);
    if (pcap_prefix) {
        char path[4096];
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof(path), "%s-%s.pcap", pcap_prefix, dir_names[i]);
            pcap_open(&link.d[i].pcap, path, (uint32_t)snaplen);
        }
    }
    int ctl_fd = control_path ? control_listen(control_path) : -1;

    link_start(&link);
    printf("{\"event\":\"ready\",\"pid\":%d,\"client_dev\":\"%s\",\"server_dev\":\"%s\"}\n", (int)getpid(),
           client_dev, server_dev);
    fflush(stdout);

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
            quit = control_serve(&link, ctl_fd);
    }

    link_stop(&link);
    static char stats[20000];
    if (link_stats_json(&link, stats, sizeof(stats)) < 0)
        snprintf(stats, sizeof(stats), "{\"error\":\"stats too large\"}");
    printf("%s\n", stats);
    fflush(stdout);
    if (stats_path)
        write_file_atomically(stats_path, stats);
    for (int i = 0; i < 2; i++)
        pcap_close(&link.d[i].pcap);
    if (link.droplog && fclose(link.droplog) != 0)
        warn_sys("fclose", droplog_path);
    if (control_path)
        unlink(control_path);
    close(link.d[0].in_fd); /* the TUN devices disappear with their fds */
    close(link.d[1].in_fd);
    return 0;
}
