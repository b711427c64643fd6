#!/usr/bin/env bash
# Alternate runs of our SGLD benchmark and SGMCMCJax's on the same task, so both see the same
# machine load; quote medians. Ours twice: the default (XLA, exact subsets) and
# SGMCMC_XLA=1 with minibatch_replace=True (like SGMCMCJax: XLA, rows with replacement).
# Usage: benchmarks/compare_sgmcmcjax.sh JAX_PYTHON [ROUNDS]
# (JAX_PYTHON: the python of the venv described in benchmarks/bench_sgmcmcjax.py)
set -euo pipefail
cd "$(dirname "$0")/.."
jax_python=$1
rounds=${2:-3}
for r in $(seq "$rounds"); do
  echo "== round $r"
  .venv/bin/python benchmarks/bench_sgld.py --repeats 3 2>/dev/null | grep "N="
  SGMCMC_XLA=1 .venv/bin/python benchmarks/bench_sgld.py --repeats 3 --replace 2>/dev/null | grep "N="
  "$jax_python" benchmarks/bench_sgmcmcjax.py 2>/dev/null | grep -A3 "^summary" | grep "N="
done
