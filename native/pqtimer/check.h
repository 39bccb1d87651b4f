/* pqtimer's unit tests' one assertion: says which check failed and goes on; main returns failures != 0. */
#ifndef PQTIMER_CHECK_H
#define PQTIMER_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#endif
