"""A second whole-chain call with the same model and settings (issue 31.3): what it costs with the
compiled programs reused (``sgmcmc/api/reuse.py``) and without (``SGMCMC_REUSE=0``'s path, by
clearing the cache before each call), timed alternately in one process.

Covertype-shaped logistic regression (N = 581,012 by default, d = 55, n = 500, float32), from
zero. Per method: the first call (traces and compiles), then ``--repeats`` pairs of calls with
new seeds, one reusing and one fresh; ``--iters`` iterations each. The floor of a second call
is its iterations alone, ``iters × marginal``, plus the checks that read the data (the NaN scan
and the trial evaluation), which every call repeats; printed beside it.
usage: python benchmarks/bench_compile_reuse.py [--rows 581012] [--iters 1000] [--repeats 3]
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
from sgmcmc import checks  # noqa: E402
from sgmcmc.api import reuse  # noqa: E402

CASES = {
    "sgld, check_stepsize=False": dict(method="sgld", stepsize=2e-6, check_stepsize=False),
    "sgld (with its stepsize check)": dict(method="sgld", stepsize=2e-6),
    "sghmc": dict(method="sghmc", stepsize=2e-7),
    "sgldcv (mode search + check)": dict(method="sgldcv", stepsize=2e-6, opt_stepsize=1e-6),
}


def call(data, case: dict, iters: int, seed: int) -> float:
    options = dict(case)
    method = options.pop("method")
    t0 = time.perf_counter()
    getattr(sgmcmc, method)(
        log_lik, data, start(), log_prior=log_prior, minibatch_size=500, n_iters=iters, seed=seed, verbose=False,
        **options,
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = make_data(args.rows)
    t0 = time.perf_counter()
    checks.check_dataset(data)
    scan = time.perf_counter() - t0
    print(f"N = {args.rows:,}, {args.iters} iterations per call; the dataset check alone (every call): {scan:.3f} s")
    print(f"{'case':34s} {'first':>7s} {'fresh':>7s} {'reused':>7s}  reused/fresh")
    for name, case in CASES.items():
        reuse.clear_compiled_cache()
        first = call(data, case, args.iters, seed=100)
        fresh, reused = [], []
        for r in range(args.repeats):
            reused.append(call(data, case, args.iters, seed=r))  # the cache holds the previous call's sampler
            reuse.clear_compiled_cache()
            fresh.append(call(data, case, args.iters, seed=r))  # builds, traces, compiles (then kept)
        f, u = statistics.median(fresh), statistics.median(reused)
        print(f"{name:34s} {first:7.2f} {f:7.2f} {u:7.2f}  {u / f:.2f}", flush=True)


if __name__ == "__main__":
    main()
