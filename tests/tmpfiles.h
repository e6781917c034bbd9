/* Files in a private directory under /tmp, for tests (tmpfiles.c). */
#ifndef LM_TESTS_TMPFILES_H
#define LM_TESTS_TMPFILES_H

#include <stddef.h>

/* The directory tf_dir_create made. */
extern char tf_dir[64];

void tf_dir_create(void);
/* `name` in the directory, into buf. */
void tf_path(char *buf, size_t len, const char *name);
/* Removes the files named (NULL-terminated) and the directory; the
 * rmdir fails, and the test with it, if anything else was left. */
void tf_dir_remove(const char *const *names);
/* Writes `text` to `path`. */
void tf_put(const char *path, const char *text);
/* The whole file (at most len - 1 bytes), "" when missing. */
void tf_get(const char *path, char *buf, size_t len);

#endif
