/* check.h: the tests' CHECK.  A condition that does not hold prints
 * "FAIL: <condition>: <message>" and counts in `failures`, which the test's
 * main turns into its exit status; the test goes on, so one run reports
 * every check that failed.  The count is atomic: tests check from several
 * threads. */
#ifndef TRAINSHIM_TESTS_CHECK_H
#define TRAINSHIM_TESTS_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            printf("FAIL: %s: ", #cond);                        \
            printf(__VA_ARGS__);                                \
            printf("\n");                                       \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED); \
        }                                                       \
    } while (0)
#endif
