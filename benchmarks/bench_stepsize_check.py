"""The stepsize check before sampling (issue 29.3): its cost against a 10^4-iteration run.

Covertype-shaped logistic regression (N = 581,012, d = 55, n = 500, float32), plain SGLD from
zero at a stable stepsize. Timed in one process, alternating, medians of ``--repeats``:
* ``check``: ``sgmcmc.stability.check.check_before_sampling`` on a fresh sampler (row
  subsample, Lanczos, the noise pass; first call includes tracing its functions, repeat calls
  not);
* ``run``: ``sgmcmc.sgld(..., n_iters=10_000, check_stepsize=False)`` (compile + 10^4 iterations),
  and its marginal per-iteration cost ``(T(3·10^4) − T(10^4)) / 2·10^4`` on a prepared sampler.
Target: check ≤ 5 % of the run.
usage: python benchmarks/bench_stepsize_check.py [--rows 581012] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.stability.check import check_before_sampling  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = make_data(args.rows)
    eps = 2e-6  # stable at the start (mu 0.89 at beta = 0, the largest curvature)
    first_check, checks, runs = None, [], []
    for r in range(args.repeats):
        sampler = sgmcmc.sgld_setup(log_lik, data, start(), eps, log_prior=log_prior, minibatch_size=500, seed=r)
        sampler.reset()
        t0 = time.perf_counter()
        result = check_before_sampling(sampler)
        elapsed = time.perf_counter() - t0
        if first_check is None:
            first_check = elapsed
        else:
            checks.append(elapsed)
        t0 = time.perf_counter()
        sgmcmc.sgld(log_lik, data, start(), eps, log_prior=log_prior, minibatch_size=500, n_iters=10_000,
                    verbose=False, seed=r, check_stepsize=False)
        runs.append(time.perf_counter() - t0)
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), eps, log_prior=log_prior, minibatch_size=500, seed=9,
                                check_stepsize=False)
    sgmcmc.sample_chain(sampler, 2_000, verbose=False)
    marg = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        sgmcmc.sample_chain(sampler, 10_000, verbose=False)
        t1 = time.perf_counter()
        sgmcmc.sample_chain(sampler, 30_000, verbose=False)
        t2 = time.perf_counter()
        marg.append(((t2 - t1) - (t1 - t0)) / 20_000 * 1e6)
    check = statistics.median(checks) if checks else first_check
    run = statistics.median(runs)
    print(f"rows {args.rows:,}; check subsample {result.rows or args.rows:,} rows; mu {result.scaled_curvature:.3g}, "
          f"noise q {result.noise:.3g}, sd ratio {result.sd_ratio:.3g}")
    print(f"check: first call {first_check:.2f} s, repeat median {check:.2f} s")
    print(f"sgld 10^4 iterations (compile included): median {run:.2f} s; marginal {statistics.median(marg):.1f} us/it")
    print(f"check / run: first {first_check / run:.1%}, repeat {check / run:.1%}; "
          f"against 10^4 marginal iterations only: {check / (statistics.median(marg) * 1e-2):.1%}")


if __name__ == "__main__":
    main()
