"""Every sampler with ``minibatch_replace=True``, one chain: graph mode against XLA (issue 11).

Covertype-shaped logistic regression (``--rows`` rows, n = 500, float32). Per sampler and mode:
the first ``sample_chain`` call of ``--iters`` iterations (compilation included) and the marginal
µs/iteration of later calls ((t(3n) − t(n)) / 2n, medians of ``--repeats``), and whether a
CompilationWarning (fallback to graph mode) was raised.

    python benchmarks/xla_replace_samplers.py [--rows 100000] [--iters 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402

CASES = {
    "sgld": ("sgld", dict(stepsize=1e-5)),
    "sghmc": ("sghmc", dict(stepsize=1e-6)),
    "sgnht": ("sgnht", dict(stepsize=1e-6)),
    "psgld": ("psgld", dict(stepsize=1e-5)),
    "hamcmc": ("hamcmc", dict(stepsize=1e-6)),
    "sgldcv": ("sgldcv", dict(stepsize=1e-5, opt_stepsize=1e-6, n_iters_opt=200, verbose=False)),
    "sgld svrg": ("sgld", dict(stepsize=1e-5, estimator="svrg")),
    "sgld saga": ("sgld", dict(stepsize=1e-5, estimator="saga")),
    "osgld": ("osgld", dict()),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    data = make_data(args.rows)
    n = args.iters
    print(f"N = {args.rows}, n = 500, replace, load {os.getloadavg()[0]:.2f}")
    print(f"{'sampler':<11}{'mode':<7}{'first call s':>13}{'µs/it':>9}  fallback")
    for case in args.cases.split(","):
        method, kwargs = CASES[case]
        for mode in ("0", "1"):
            os.environ["SGMCMC_XLA"] = mode
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sampler = getattr(sgmcmc, f"{method}_setup")(log_lik, data, start(), log_prior=log_prior,
                                                              minibatch_size=500, seed=1, minibatch_replace=True,
                                                              **kwargs)
                sgmcmc.init_sess(sampler, verbose=False)
                t = time.perf_counter()
                sgmcmc.sample_chain(sampler, n, verbose=False)
                first = time.perf_counter() - t
                times = {1: [], 3: []}
                for _ in range(args.repeats):
                    for m in (1, 3):
                        t = time.perf_counter()
                        sgmcmc.sample_chain(sampler, m * n, verbose=False)
                        times[m].append(time.perf_counter() - t)
            marginal = (statistics.median(times[3]) - statistics.median(times[1])) / (2 * n) * 1e6
            fallback = any(issubclass(w.category, sgmcmc.CompilationWarning) for w in caught)
            print(f"{case:<11}{'XLA' if mode == '1' else 'graph':<7}{first:>13.2f}{marginal:>9.1f}  {fallback}",
                  flush=True)


if __name__ == "__main__":
    main()
