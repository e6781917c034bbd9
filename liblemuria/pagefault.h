/* The SIGSEGV handler and the fault service of the region (pagefault.c),
 * installed by region.c once the region is mapped. */
#ifndef LM_PAGEFAULT_H
#define LM_PAGEFAULT_H

#include <stddef.h>

/* Installs the handler, keeping the action it replaces to chain faults
 * that are not the region's to it.  Returns 0, or LM_EIO with the reason
 * in err. */
int lm_pagefault_install(char *err, size_t errlen);

/* Puts back the action lm_pagefault_install found. */
void lm_pagefault_remove(void);

#endif
