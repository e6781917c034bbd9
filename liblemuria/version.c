/* Library identity and the clock of the public API. */
#include "lemuria.h"

#include "clock.h"
#include "version.h"

_Static_assert(LEMURIA_VERSION_MAJOR == LM_VERSION_MAJOR &&
		       LEMURIA_VERSION_MINOR == LM_VERSION_MINOR,
	       "lemuria.h and common/version.h give different versions");

const char *lm_version(void)
{
	return LM_VERSION_STRING;
}

uint64_t lm_clock_us(void)
{
	return lm_now_us();
}
