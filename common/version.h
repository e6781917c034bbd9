/* The project's version as the programs print it (--version): the one
 * lemuria.h states for the library. */
#ifndef LM_VERSION_H
#define LM_VERSION_H

#include "lemuria.h"

#define LM_VERSION_STR2(x) #x
#define LM_VERSION_STR(x) LM_VERSION_STR2(x)
#define LM_VERSION_STRING                                                     \
	LM_VERSION_STR(LEMURIA_VERSION_MAJOR)                                 \
	"." LM_VERSION_STR(LEMURIA_VERSION_MINOR)

#endif
