/* A rank's identity from its launcher's environment (launcher_env.h). */
#include "launcher_env.h"

#include <errno.h>
#include <stdlib.h>

#include "lm_error.h"

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return LM_EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? LM_EINVAL : 0;
}

/* The first of names[] set and not empty, or NULL. */
static const char *first_set(const char *const *names, const char **var)
{
	for (; *names; names++) {
		const char *v = getenv(*names);

		if (v && *v) {
			*var = *names;
			return v;
		}
	}
	return NULL;
}

int lm_launcher_rank(uint32_t *rank, const char **var, const char **value)
{
	static const char *const names[] = { "LM_RANK", "SLURM_PROCID",
		"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL };
	uint64_t r;

	*var = "LM_RANK";
	if (!(*value = first_set(names, var)))
		return LM_ENOENT;
	if (parse_u64(*value, &r) || r > UINT32_MAX)
		return LM_EINVAL;
	*rank = (uint32_t)r;
	return 0;
}

int lm_launcher_run(uint64_t *run, const char **var, const char **value)
{
	static const char *const lm[] = { "LM_RUN", NULL };
	static const char *const slurm[] = { "SLURM_JOB_START_TIME", NULL };
	uint64_t start, step = 0;
	const char *s;

	*var = "LM_RUN";
	if ((*value = first_set(lm, var)))
		return parse_u64(*value, run) || !*run ? LM_EINVAL : 0;
	if ((*value = first_set(slurm, var))) {
		/* the daemons take only ids larger than the last run's: the
		 * job's start in lemuria-run's scale (nanoseconds since the
		 * epoch, as date +%s%N), a microsecond per step after it */
		s = getenv("SLURM_STEP_ID");
		if (parse_u64(*value, &start) || !start ||
		    start > UINT64_MAX / 1000000000u - 1 ||
		    (s && *s && parse_u64(s, &step)))
			return LM_EINVAL;
		*run = start * 1000000000u + step % 1000000u * 1000u + 1;
		return 0;
	}
	return LM_ENOENT;
}
