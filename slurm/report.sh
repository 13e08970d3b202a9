#!/bin/bash
# The report job of a sweep (after all its training and analysis arrays,
# whatever their outcome: afterany): sgreport on the sweep's output
# directory, with the analysis tables from RUN/analysis/*.json.
set -eu
exec "${SG_SGSWEEP:?SG_SGSWEEP is set by sgsweep submit}" report "$1"
