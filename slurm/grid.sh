#!/bin/bash
# The sweep driver:  sbatch slurm/grid.sh sweeps/paper.yaml
# Runs `sgsweep submit`, which sbatches one array job per group of the sweep
# (finished tasks left out, tasks already queued never twice), one array job
# per analyses entry (slurm/analysis.sh; task k waits for training task k
# alone: --dependency=aftercorr:TRAINJOB --kill-on-invalid-dep=yes, so a
# failed training task cancels its analysis) and one report job that depends
# on all of them (afterany; docs/sweeps.md).  Run it from the repository
# root; the jobs run there too.  It can also be run directly:
#   bash slurm/grid.sh sweeps/paper.yaml
#SBATCH --job-name=sgsweep-grid
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:15:00
#SBATCH --output=sgsweep-grid-%j.out
set -eu
if [ $# -ne 1 ]; then
    echo "usage: sbatch slurm/grid.sh SWEEP.yaml" >&2
    exit 2
fi
sgsweep=${SG_SGSWEEP:-$PWD/build/sgsweep}
if [ ! -x "$sgsweep" ]; then
    echo "grid.sh: $sgsweep not found: run make first (or set SG_SGSWEEP)" >&2
    exit 2
fi
exec "$sgsweep" submit "$1"
