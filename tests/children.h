/* Child processes of tests, waited for with a bound (children.c). */
#ifndef LM_TESTS_CHILDREN_H
#define LM_TESTS_CHILDREN_H

#include <sys/types.h>

/* The child's exit status, or -1 when it dies of a signal or outlives
 * timeout_ms (it is then killed). */
int tc_wait(pid_t pid, int timeout_ms);

#endif
