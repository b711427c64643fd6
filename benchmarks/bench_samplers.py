"""Per-iteration cost of every gradient sampler and estimator relative to SGLD (issue 9).

The covertype-shaped logistic regression (N = 581,012 by default, d = 54 + bias, n = 500,
Laplace prior, float32), one chain. Each variant is set up, prepared and warmed up (compiled,
one call of each length), then ``sample_chain`` calls of n and 3n iterations alternate over the
variants within each repeat; marginal = (median t(3n) − median t(n)) / 2n. Ratios to SGLD come
from the same run. The stepsizes are small and only keep the chains finite: this measures cost,
not accuracy.

    python benchmarks/bench_samplers.py [--rows 581012] [--iters 1000] [--repeats 3] [--only sgld,osgld]
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

EPS = 5e-6
VARIANTS = {
    "sgld": ("sgld", dict(stepsize=EPS)),
    "sgld replace": ("sgld", dict(stepsize=EPS, minibatch_replace=True)),
    "sgldcv": ("sgldcv", dict(stepsize=EPS, opt_stepsize=1e-6, n_iters_opt=200, verbose=False)),
    "sgld svrg": ("sgld", dict(stepsize=EPS, estimator="svrg")),
    "sgld saga": ("sgld", dict(stepsize=EPS, estimator="saga")),
    "sghmc (L=5)": ("sghmc", dict(stepsize=EPS)),
    "sgnht": ("sgnht", dict(stepsize=EPS / 10)),
    "psgld": ("psgld", dict(stepsize=1e-3)),
    "hamcmc": ("hamcmc", dict(stepsize=0.05, warmup_stepsize=EPS)),
    "osgld": ("osgld", dict()),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--iters", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    args = parser.parse_args()
    chosen = [v for v in VARIANTS if not args.only or v in args.only.split(",")]
    print(f"machine: {os.cpu_count()} CPUs visible, load average {os.getloadavg()[0]:.2f} at start", flush=True)
    data = make_data(args.rows)
    n = args.iters
    samplers, first = {}, {}
    for name in chosen:
        method, kwargs = VARIANTS[name]
        t = time.perf_counter()
        sampler = getattr(sgmcmc, f"{method}_setup")(log_lik, data, start(), log_prior=log_prior, minibatch_size=500,
                                                      seed=1, **kwargs)
        sgmcmc.sample_chain(sampler, n, verbose=False)
        first[name] = time.perf_counter() - t
        sgmcmc.sample_chain(sampler, 3 * n, verbose=False)
        samplers[name] = sampler
    times = {(name, m): [] for name in chosen for m in (1, 3)}
    for _ in range(args.repeats):
        for name in chosen:
            for m in (1, 3):
                t = time.perf_counter()
                sgmcmc.sample_chain(samplers[name], m * n, verbose=False)
                times[name, m].append(time.perf_counter() - t)
    marginal = {name: (statistics.median(times[name, 3]) - statistics.median(times[name, 1])) / (2 * n) * 1e6
                for name in chosen}
    base = marginal.get("sgld")
    print(f"N = {args.rows}, n = 500, marginal over {n}–{3 * n} iterations, medians of {args.repeats}")
    print(f"{'variant':<14}{'first call s':>13}{'µs/iteration':>14}{'× SGLD':>8}")
    for name in chosen:
        ratio = f"{marginal[name] / base:8.2f}" if base else ""
        print(f"{name:<14}{first[name]:>13.1f}{marginal[name]:>14.1f}{ratio}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
