/* Files in a private directory, for tests (tmpfiles.h). */
#include "tmpfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"

char tf_dir[64];

void tf_dir_create(void)
{
	snprintf(tf_dir, sizeof(tf_dir), "/tmp/lm-daemon-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tf_dir));
}

void tf_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tf_dir, name);
}

void tf_dir_remove(const char *const *names)
{
	char path[128];

	for (; *names; names++) {
		tf_path(path, sizeof(path), *names);
		unlink(path);
	}
	CU_ASSERT_EQUAL(rmdir(tf_dir), 0);
}

void tf_put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

void tf_get(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}
