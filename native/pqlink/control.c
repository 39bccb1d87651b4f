#define _GNU_SOURCE
#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

int control_listen(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        die_msg("control socket path '%s' is too long", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die_sys("socket", "AF_UNIX");
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die_sys("bind", path);
    if (listen(fd, 8) < 0)
        die_sys("listen", path);
    return fd;
}

static void json_error(char *out, size_t outlen, const char *msg)
{
    size_t n = (size_t)snprintf(out, outlen, "{\"ok\":false,\"error\":\"");
    for (const char *s = msg; *s && n + 3 < outlen; s++) {
        if (*s == '"' || *s == '\\')
            out[n++] = '\\';
        out[n++] = *s;
    }
    snprintf(out + n, outlen - n, "\"}");
}

/* flows PATH: the rest of the line is the path (it may hold spaces). */
static void flows_command(struct link *l, char *path, char *out, size_t outlen)
{
    while (path && (*path == ' ' || *path == '\t'))
        path++;
    if (!path || !*path) {
        json_error(out, outlen, "flows needs the path of the file to write");
        return;
    }
    if (!l->flow_capacity) {
        json_error(out, outlen, "the flow recorder is off (pqlink was started with --flows 0)");
        return;
    }
    struct flows_summary sum;
    char err[512];
    if (flows_write_file(&l->flows, path, &sum, err, sizeof(err)) < 0) {
        json_error(out, outlen, err);
        return;
    }
    snprintf(out, outlen,
             "{\"ok\":true,\"flows\":%llu,\"untracked_flows\":%llu,\"untracked_packets\":%llu,"
             "\"clock\":\"CLOCK_MONOTONIC\",\"now_ns\":%lld}",
             (unsigned long long)sum.flows, (unsigned long long)sum.untracked_flows,
             (unsigned long long)sum.untracked_packets, (long long)mono_ns());
}

bool control_command(struct link *l, char *line, char *out, size_t outlen)
{
    char *save = NULL, *cmd = strtok_r(line, " \t\r\n", &save);
    char body[LINK_JSON_MAX];
    if (!cmd) {
        json_error(out, outlen, "empty command (allowed: stats config set reset flows quit)");
    } else if (!strcmp(cmd, "stats")) {
        if (l->droplog)
            fflush(l->droplog);
        for (int i = 0; i < 2; i++) /* stdio locks the FILE against the writing thread */
            if (l->d[i].pcap.f)
                fflush(l->d[i].pcap.f);
        if (link_stats_json(l, body, sizeof(body)) < 0)
            json_error(out, outlen, "stats too large");
        else
            snprintf(out, outlen, "{\"ok\":true,\"stats\":%s}", body);
    } else if (!strcmp(cmd, "config")) {
        link_config_json(l, body, sizeof(body));
        snprintf(out, outlen, "{\"ok\":true,\"config\":%s}", body);
    } else if (!strcmp(cmd, "set")) {
        struct dir_config cfg[2] = {l->cfg[0], l->cfg[1]};
        bool changed[2] = {false, false};
        char err[512];
        char *kv;
        int count = 0;
        while ((kv = strtok_r(NULL, " \t\r\n", &save))) {
            count++;
            if (config_apply(cfg, changed, kv, err, sizeof(err)) < 0) {
                json_error(out, outlen, err);
                return false; /* nothing applied */
            }
        }
        if (!count) {
            json_error(out, outlen, "set needs key=value arguments");
            return false;
        }
        link_reconfigure(l, cfg, changed);
        link_config_json(l, body, sizeof(body));
        snprintf(out, outlen, "{\"ok\":true,\"config\":%s}", body);
    } else if (!strcmp(cmd, "reset")) {
        link_reset(l);
        snprintf(out, outlen, "{\"ok\":true}");
    } else if (!strcmp(cmd, "flows")) {
        flows_command(l, strtok_r(NULL, "\r\n", &save), out, outlen);
    } else if (!strcmp(cmd, "quit")) {
        snprintf(out, outlen, "{\"ok\":true}");
        return true;
    } else {
        json_error(out, outlen, "unknown command (allowed: stats config set reset flows quit)");
    }
    return false;
}

bool control_serve(struct link *l, int listen_fd)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            warn_sys("accept4", "control socket");
        return false;
    }
    /* a client that stalls must not stall the control thread for long */
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[8192], out[LINK_JSON_MAX + 64];
    size_t have = 0;
    bool quit = false;
    while (!quit) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = 0;
        char *nl;
        while (!quit && (nl = memchr(buf, '\n', have))) {
            *nl = 0;
            quit = control_command(l, buf, out, sizeof(out) - 1);
            size_t len = strlen(out);
            out[len++] = '\n';
            if (write(fd, out, len) != (ssize_t)len)
                break;
            size_t used = (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have - used);
            have -= used;
            buf[have] = 0;
        }
        if (have == sizeof(buf) - 1) {
            json_error(out, sizeof(out), "command line too long");
            break;
        }
    }
    close(fd);
    return quit;
}
