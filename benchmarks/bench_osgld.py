"""OSGLD's and HAMCMC's per-iteration time relative to SGLD's, at d = 10, 100, 1000 (a linear-Gaussian model).

d ≤ 100 runs OSGLD's dense form (three d × d eigendecompositions per iteration), d = 1000 the
diagonal form (sgmcmc.step.dynamics.osgld.DENSE_MAX_DIM). Both samplers run the same model, minibatch
and dtype; times are medians over ``--repeats`` compiled chunks of ``--iters`` iterations, after a
warm-up chunk (tracing). Record the numbers on a quiet machine.

    python benchmarks/bench_osgld.py                     # defaults: 500 iterations, 5 repeats
    python benchmarks/bench_osgld.py --iters 20 --repeats 2 --dims 10 100   # a quick check
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

import sgmcmc


def model(d: int, n_rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, d)) / np.sqrt(d)
    y = X @ rng.normal(size=d) + rng.normal(size=n_rows)

    def log_lik(params, data):
        return -0.5 * tf.reduce_sum(tf.square(data["y"] - tf.linalg.matvec(data["X"], params["b"])))

    def log_prior(params):
        return -0.5 * tf.reduce_sum(tf.square(params["b"]))

    return log_lik, log_prior, {"X": X, "y": y}


def seconds_per_iteration(method: str, d: int, args) -> float:
    log_lik, log_prior, data = model(d, args.rows)
    kw = {"sgld": dict(stepsize=1e-4), "hamcmc": dict(stepsize=0.05, warmup_stepsize=1e-4), "osgld": {}}[method]
    sampler = getattr(sgmcmc, f"{method}_setup")(
        log_lik, data, {"b": np.zeros(d)}, log_prior=log_prior, minibatch_size=args.minibatch, seed=1,
        dtype=args.dtype, **kw,
    )
    sgmcmc.init_sess(sampler, verbose=False)
    sampler.advance(args.iters)  # tracing and compilation
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        sampler.advance(args.iters)
        times.append((time.perf_counter() - start) / args.iters)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--minibatch", type=int, default=100)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    print(f"N = {args.rows}, n = {args.minibatch}, {args.dtype}, median of {args.repeats} × {args.iters} iterations")
    print(f"{'d':>6} {'sgld µs/it':>12} {'osgld µs/it':>12} {'ratio':>8} {'hamcmc µs/it':>13} {'ratio':>8}")
    for d in args.dims:
        sgld = seconds_per_iteration("sgld", d, args)
        osgld = seconds_per_iteration("osgld", d, args)
        hamcmc = seconds_per_iteration("hamcmc", d, args)
        print(f"{d:>6} {sgld * 1e6:>12.1f} {osgld * 1e6:>12.1f} {osgld / sgld:>8.1f} {hamcmc * 1e6:>13.1f} "
              f"{hamcmc / sgld:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
