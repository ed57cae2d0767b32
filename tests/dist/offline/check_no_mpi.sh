#!/usr/bin/env bash
# Fails, naming what it found, when the executable given loads an MPI library
# or refers to an MPI symbol: the planner and the simulator (dist/plan,
# dist/sim) must build and run on a machine without MPI. Nor may they load
# NCCL, which only dist/gpu links (core, below them, links none).
set -euo pipefail
binary=$1
status=0
if needed=$(readelf -d "$binary" | grep -E 'NEEDED.*(lib(p?mpi|open-pal|open-rte)|mpich)'); then
  echo "$binary loads MPI:"
  echo "$needed"
  status=1
fi
if nccl=$(readelf -d "$binary" | grep -E 'NEEDED.*libnccl'); then
  echo "$binary loads NCCL:"
  echo "$nccl"
  status=1
fi
if symbols=$(nm "$binary" | grep -E ' [A-Za-z] (P?MPI_|ompi_)' | head -5); then
  echo "$binary refers to MPI symbols, for example:"
  echo "$symbols"
  status=1
fi
[[ $status == 0 ]] && echo "$binary: no MPI library, no MPI symbol, no NCCL"
exit $status
