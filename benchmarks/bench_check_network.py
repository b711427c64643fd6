"""The stepsize check before sampling on a network (issue 29.3: ≤ 5 % of a 10^4-iteration run).

The bnn_mnist vignette's model (Keras 784-100-10, hierarchical prior: d = 79,510 and four
precisions, eight parameter blocks) on MNIST-shaped data (``synthetic_mnist``, N rows), plain
SGLD at the vignette's stepsize, n = 500. Printed, medians of ``--repeats`` (after a first call
that also traces the check's functions):
* the check's time split into its parts — the top curvature (Lanczos), the per-parameter block
  curvatures, the minibatch-noise pass, the per-parameter safe stepsizes (only when the
  slow-mixing warning fires) — and its Hessian-vector products;
* a 10^4-iteration run: ``sgld(..., n_iters=10_000, thin=1_000, check_stepsize=False)``, compile
  included.

usage: python benchmarks/bench_check_network.py [--rows 60000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vignettes"))

import numpy as np  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.stability import check as check_module  # noqa: E402
from sgmcmc.stability import curvature  # noqa: E402
from bnn_mnist import STEPSIZES, make_log_prior, synthetic_mnist, thesis_network, weight_names  # noqa: E402

PARTS: dict[str, float] = defaultdict(float)
_OPEN: list[float] = []  # the time spent in parts nested inside each open part


def timed_part(module, name: str, label: str) -> None:
    """Replace ``module.name`` by a wrapper adding its wall time, less that of parts nested in
    it, to PARTS[label]."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        _OPEN.append(0.0)
        try:
            return inner(*args, **kwargs)
        finally:
            elapsed, nested = time.perf_counter() - t0, _OPEN.pop()
            PARTS[label] += elapsed - nested
            if _OPEN:
                _OPEN[-1] += elapsed

    setattr(module, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--method", default="sgld")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    timed_part(check_module, "check_before_sampling", "top curvature and the rest")
    timed_part(curvature, "_block_curvatures", "block curvatures")
    timed_part(check_module.MinibatchNoise, "__call__", "noise")
    timed_part(curvature, "_safe_per_parameter", "safe stepsizes per parameter")

    data = synthetic_mnist(n_train=args.rows, n_test=10)["train"]
    dataset = {"X": data["images"], "y": data["labels"]}
    bnn = thesis_network()
    log_prior, names = make_log_prior(bnn), weight_names(bnn)
    rng = np.random.default_rng(1)
    params = {names["A"]: rng.standard_normal((100, 10)), names["B"]: rng.standard_normal((784, 100)),
              names["a"]: rng.standard_normal(10), names["b"]: rng.standard_normal(100),
              "lambdaA": 1.0, "lambdaB": 1.0, "lambdaa": 1.0, "lambdab": 1.0}
    setup = getattr(sgmcmc, f"{args.method}_setup")
    run = getattr(sgmcmc, args.method)
    eps = STEPSIZES[args.method]

    checks, parts, result = [], [], None
    for r in range(args.repeats + 1):
        sampler = setup(bnn.log_lik, dataset, params, eps, log_prior=log_prior, minibatch_size=500, seed=r)
        PARTS.clear()
        t0 = time.perf_counter()
        result = check_module.check_before_sampling(sampler)  # the wrapper
        checks.append(time.perf_counter() - t0)
        parts.append(dict(PARTS))
    t0 = time.perf_counter()
    run(bnn.log_lik, dataset, params, eps, log_prior=log_prior, minibatch_size=500, n_iters=10_000, thin=1_000,
        verbose=False, seed=0, check_stepsize=False)
    run_time = time.perf_counter() - t0

    repeat = statistics.median(checks[1:])
    print(f"{args.method}, N = {args.rows:,}, check rows {result.rows or args.rows:,}; mu {result.scaled_curvature:.3g}, "
          f"curvature ratio {result.curvature_ratio}, slow mixing {result.slow_mixing}; "
          f"{result.operator_calls} Hessian-vector products")
    print(f"block curvatures: { {k: f'{v:.4g}' for k, v in (result.curvature_per_parameter or {}).items()} }")
    for label in parts[0]:
        print(f"  {label:32s} first {parts[0][label]:6.2f} s, repeat median "
              f"{statistics.median(p.get(label, 0.0) for p in parts[1:]):6.2f} s")
    print(f"check: first {checks[0]:.2f} s, repeat median {repeat:.2f} s")
    print(f"{args.method} 10^4 iterations (compile included): {run_time:.1f} s")
    print(f"check / run: first {checks[0] / run_time:.1%}, repeat {repeat / run_time:.1%}")


if __name__ == "__main__":
    main()
