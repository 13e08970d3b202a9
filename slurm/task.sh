#!/bin/bash
# One array task of a sweep, submitted by `sgsweep submit` as
#   sbatch --array=... --requeue --signal=B:USR1@MARGIN slurm/task.sh SWEEP GROUP
# sgsweep skips the task if its result.json is valid, else runs sgtrain
# (through srun for multi-GPU tasks).  At the time-limit warning (SIGUSR1 to
# this batch shell, which exec makes sgsweep itself) sgtrain checkpoints and
# sgsweep requeues the task, which then resumes.
set -eu
exec "${SG_SGSWEEP:?SG_SGSWEEP is set by sgsweep submit}" task "$1" --group "$2" --index "${SLURM_ARRAY_TASK_ID:?not an array task}"
