#!/bin/bash
# The report job of a sweep (after all its arrays, whatever their outcome):
# sgreport on the sweep's output directory.
set -eu
exec "${SG_SGSWEEP:?SG_SGSWEEP is set by sgsweep submit}" report "$1"
