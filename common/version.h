/* The project's version as the programs print it (--version).  lemuria.h
 * states the same numbers for the library's users; liblemuria/version.c
 * checks at build time that the two agree. */
#ifndef LM_VERSION_H
#define LM_VERSION_H

#define LM_VERSION_MAJOR 0
#define LM_VERSION_MINOR 1

#define LM_VERSION_STR2(x) #x
#define LM_VERSION_STR(x) LM_VERSION_STR2(x)
#define LM_VERSION_STRING                                                     \
	LM_VERSION_STR(LM_VERSION_MAJOR) "." LM_VERSION_STR(LM_VERSION_MINOR)

#endif
