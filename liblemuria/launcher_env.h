/* Who a rank is and which run it joins, from its environment: what
 * lemuria-run sets (LM_RANK, LM_RUN), else what another launcher gives
 * every process it starts (issue 42: ranks started by Slurm's srun or
 * Open MPI's mpirun take part as they are). */
#ifndef LM_LIBLEMURIA_LAUNCHER_ENV_H
#define LM_LIBLEMURIA_LAUNCHER_ENV_H

#include <stdint.h>

/* The rank: LM_RANK, else SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK
 * or PMI_RANK, the first one set.  *var names the variable it came from
 * (for messages).  0, LM_ENOENT (none set), LM_EINVAL (not a number:
 * *var and *value say which). */
int lm_launcher_rank(uint32_t *rank, const char **var, const char **value);

/* The run id, the same in every rank of a run and larger than the
 * daemons' last (they refuse older ones): LM_RUN, else under Slurm one
 * made of SLURM_JOB_START_TIME and SLURM_STEP_ID in lemuria-run's scale
 * (nanoseconds since the epoch).  Open MPI gives no such time: mpirun's
 * ranks need LM_RUN exported (date +%s%N).  *var as above.  0,
 * LM_ENOENT, LM_EINVAL. */
int lm_launcher_run(uint64_t *run, const char **var, const char **value);

#endif
