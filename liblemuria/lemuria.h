/* lemuria.h: the public interface of liblemuria.
 *
 * Lemuria is a hierarchical software distributed shared memory: programs
 * linked with liblemuria share one address space across clusters of
 * machines (see README.md and docs/).  This header grows with the client
 * runtime; what it declares today is implemented and tested. */
#ifndef LEMURIA_H
#define LEMURIA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LEMURIA_VERSION_MAJOR 0
#define LEMURIA_VERSION_MINOR 1

/* "MAJOR.MINOR" of the library actually linked. */
const char *lm_version(void);

/* A short English phrase for an error code returned by any lm_ call
 * (0 or negative).  Never NULL. */
const char *lm_strerror(int err);

/* Monotonic time in microseconds (for timing program phases; the SPLASH-2
 * CLOCK macro maps onto it). */
uint64_t lm_clock_us(void);

#ifdef __cplusplus
}
#endif

#endif
