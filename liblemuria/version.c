/* Library identity and the clock of the public API. */
#include "lemuria.h"

#include "clock.h"
#include "version.h"

const char *lm_version(void)
{
	return LM_VERSION_STRING;
}

uint64_t lm_clock_us(void)
{
	return lm_now_us();
}
