#!/usr/bin/env bash
# Benchmarks: the pytest-benchmark suites (each prints a ratio table against references
# measured in the same run, also written to benchmarks/last-run.md), then end-to-end loads.
set -euo pipefail
# numpy's BLAS threads spin between calls and steal the second core from the code measured
export OPENBLAS_NUM_THREADS=1
.venv/bin/python -m pytest -q -p no:cacheprovider benchmarks --benchmark-only \
  --benchmark-columns=median,ops,rounds --benchmark-sort=name "$@"
