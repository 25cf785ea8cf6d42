/* check.h -- the CHECK macro of the compiler's unit tests: counts a failure and says where and
 * why, without stopping (so one run reports every broken case). main() returns failures != 0. */
#ifndef CUVIL_TEST_CHECK_H
#define CUVIL_TEST_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

#endif
