/* Error codes shared by every Lemuria module.
 *
 * Functions return 0 on success or a negative LM_E* code; lm_strerror()
 * turns a code into a short English phrase for messages.  The codes are
 * part of the library's public interface, so they are defined once, in
 * liblemuria/lemuria_error.h. */
#ifndef LM_ERROR_H
#define LM_ERROR_H

/* by its path, so that a build of common/ alone (tests/fuzz) finds it */
#include "../liblemuria/lemuria_error.h"

#endif
