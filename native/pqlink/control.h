/* The control socket: a unix stream socket taking one command per line, answering one JSON
 * object per line.
 *   stats             counters and parameters of both directions (flushes pcap and drop log)
 *   config            parameters only
 *   set K=V [K=V...]  change parameters live (all or nothing; keys as on the command line,
 *                     "c2s." or "s2c." prefix for one direction)
 *   reset             zero counters, peaks and lateness; empty the flow table
 *   flows PATH        write the recorded connections to PATH (JSON lines, mode 0600)
 *   quit              exit as on SIGTERM
 */
#ifndef PQLINK_CONTROL_H
#define PQLINK_CONTROL_H

#include <stdbool.h>

#include "link.h"

/* Creates, binds and listens; dies naming the failed call. */
int control_listen(const char *path);
/* Serves one connection until the peer closes it. Returns true when asked to quit. */
bool control_serve(struct link *l, int listen_fd);
/* Handles one command line; the reply (JSON, no newline) goes to out. Exposed for tests. */
bool control_command(struct link *l, char *line, char *out, size_t outlen);

#endif
