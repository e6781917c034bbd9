/* LEMURIA_PROFILE's lines gathered per run (tools/rankprofile.h). */
#include "rankprofile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm_error.h"

static int profile_on(void)
{
	const char *env = getenv("LEMURIA_PROFILE");

	return env && *env && strcmp(env, "0") != 0;
}

int lm_rankprofile_begin(char *dir, size_t len, char *why, size_t wlen)
{
	const char *tmp = getenv("TMPDIR");

	if (!profile_on())
		return 0;
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(dir, len, "%s/lemuria-profile.XXXXXX", tmp) >=
	    len) {
		snprintf(why, wlen, "TMPDIR \"%s\" is too long", tmp);
		return LM_EINVAL;
	}
	if (!mkdtemp(dir)) {
		snprintf(why, wlen, "cannot make %s: %s", dir,
			 strerror(errno));
		return LM_EIO;
	}
	if (setenv("LM_PROFILE_DIR", dir, 1) != 0) {
		snprintf(why, wlen, "cannot set LM_PROFILE_DIR: %s",
			 strerror(errno));
		rmdir(dir);
		return LM_ENOMEM;
	}
	return 1;
}

void lm_rankprofile_end(const char *dir, const uint32_t *ranks, size_t n,
			FILE *out)
{
	char path[4200], line[2048];

	for (size_t i = 0; i < n; i++) {
		FILE *f;
		bool any = false;

		snprintf(path, sizeof(path), "%s/%u", dir, ranks[i]);
		if ((f = fopen(path, "r"))) {
			while (fgets(line, sizeof(line), f)) {
				fputs(line, out);
				any = true;
			}
			fclose(f);
			unlink(path);
		}
		if (!any) /* it died, or never finalized */
			fprintf(out, "lemuria-profile rank=%u missing=1\n",
				ranks[i]);
	}
	rmdir(dir);
	unsetenv("LM_PROFILE_DIR");
}
