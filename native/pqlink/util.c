#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void warn_sys(const char *call, const char *what)
{
    int e = errno;
    fprintf(stderr, "pqlink: %s(%s): %s\n", call, what ? what : "", strerror(e));
}

void die_sys(const char *call, const char *what)
{
    warn_sys(call, what);
    exit(1);
}

void die_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pqlink: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}
