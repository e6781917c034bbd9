/* Library identity and the clock of the public API. */
#include "lemuria.h"

#include "clock.h"

#define LM_STR2(x) #x
#define LM_STR(x) LM_STR2(x)

const char *lm_version(void)
{
	return LM_STR(LEMURIA_VERSION_MAJOR) "." LM_STR(LEMURIA_VERSION_MINOR);
}

uint64_t lm_clock_us(void)
{
	return lm_now_us();
}
