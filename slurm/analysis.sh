#!/bin/bash
# One analysis array task of a sweep, submitted by `sgsweep submit` as
#   sbatch --array=... --dependency=aftercorr:TRAINJOB --kill-on-invalid-dep=yes slurm/analysis.sh SWEEP ENTRY
# Its array task id is the training array task id of the run it analyses, so
# aftercorr makes task k wait for training task k alone, and cancels it if
# that one fails.  sgsweep skips the task if its analysis files are newer than
# the run's checkpoint, else runs sgtrain analyze on the run; a failure is
# recorded in RUN/analysis/failed-ENTRY.json (docs/sweeps.md).
set -eu
exec "${SG_SGSWEEP:?SG_SGSWEEP is set by sgsweep submit}" task "$1" --analysis "$2" --index "${SLURM_ARRAY_TASK_ID:?not an array task}"
