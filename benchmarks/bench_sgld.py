"""Whole-chain speed of SGLD on covertype-shaped logistic regression (N = 581,012, d = 54,
n = 500, Laplace(0,1) prior, float32).

Prints, for each N:
  (a) first call: wall time of the first ``sgld(...)`` call with 10^4 iterations, tracing
      and compilation included (in a fresh process when --fresh, the default for the first N);
  (b) marginal µs/iteration: (time of a 3·10^4 run − time of a 10^4 run) / 2·10^4, both
      whole ``sgld(...)`` calls after a warm-up call, medians over --repeats;
  (c) repeat call µs/iteration: ``sample_chain`` on an already compiled sampler, 10^4 its.

``--replace``: minibatches with replacement (``minibatch_replace=True``, what SGMCMCJax does).
``SGMCMC_XLA=1`` in the environment: the XLA mode.

Usage: python benchmarks/bench_sgld.py [--n-rows 581012,10000] [--repeats 3] [--replace]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


REPLACE = False


def run(data, n_iters):
    t = time.perf_counter()
    sgmcmc.sgld(log_lik, data, start(), 5e-6, log_prior, 500, n_iters, verbose=False, seed=1, minibatch_replace=REPLACE)
    return time.perf_counter() - t


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n-rows", default="581012,10000")
    p.add_argument("--iters", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--replace", action="store_true")
    args = p.parse_args(argv)
    global REPLACE
    REPLACE = args.replace
    for n_rows in [int(s) for s in args.n_rows.split(",")]:
        data = make_data(n_rows)
        first = run(data, args.iters)
        short, long_ = [], []
        for _ in range(args.repeats):
            short.append(run(data, args.iters))
            long_.append(run(data, 3 * args.iters))
        marginal = (statistics.median(long_) - statistics.median(short)) / (2 * args.iters) * 1e6
        sampler = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 500, seed=1, minibatch_replace=REPLACE)
        sgmcmc.sample_chain(sampler, args.iters, verbose=False)
        repeat = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            sgmcmc.sample_chain(sampler, args.iters, verbose=False)
            repeat.append((time.perf_counter() - t) / args.iters * 1e6)
        print(
            f"{ {'1': 'XLA', '0': 'graph'}.get(os.environ.get('SGMCMC_XLA', ''), 'default')}{' replace' if REPLACE else ''}: "
            f"N={n_rows:>7}  first call {first:6.2f} s  marginal {marginal:6.1f} µs/it  "
            f"repeat call {statistics.median(repeat):6.1f} µs/it  "
            f"(10^4 call median {statistics.median(short):.2f} s, 3·10^4 {statistics.median(long_):.2f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
