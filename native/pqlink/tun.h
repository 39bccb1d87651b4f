/* TUN devices opened inside network namespaces. */
#ifndef PQLINK_TUN_H
#define PQLINK_TUN_H

/* Opens a non-persistent TUN device (IFF_TUN | IFF_NO_PI) called name inside the network
 * namespace netns (a name under /var/run/netns, or a path), then returns the calling thread to
 * its own namespace. The device lives as long as the returned fd: if pqlink dies, it goes too.
 * Dies naming the failed call. */
int tun_open_in_netns(const char *netns, const char *name);

#endif
