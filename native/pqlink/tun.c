#define _GNU_SOURCE
#include "tun.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util.h"

int tun_open_in_netns(const char *netns, const char *name)
{
    char path[PATH_MAX];
    if (netns[0] == '/')
        snprintf(path, sizeof(path), "%s", netns);
    else
        snprintf(path, sizeof(path), "/var/run/netns/%s", netns);
    if (strlen(name) >= IFNAMSIZ)
        die_msg("device name '%s' is longer than %d characters", name, IFNAMSIZ - 1);

    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        die_sys("open", "/proc/thread-self/ns/net");
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        die_sys("open", path);
    if (setns(ns, CLONE_NEWNET) < 0)
        die_sys("setns", path);

    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        die_sys("open", "/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die_sys("ioctl(TUNSETIFF)", name);

    if (setns(self, CLONE_NEWNET) < 0)
        die_sys("setns", "/proc/thread-self/ns/net");
    close(ns);
    close(self);
    return fd;
}
