"""Time to a choice of ``tune_stepsize`` on covertype-shaped logistic regression (d = 55,
Laplace(0, 1) prior, float32), and the cost of the stepsize check the CV samplers run.

Prints: the check (λ_max at the start, Hessian-vector products, seconds), then tune_stepsize's
table (one line per candidate and round) and its wall time to a choice, split into set-up
(sampler, standardising curvatures, default grid) and rounds.

Usage: python benchmarks/bench_tune_stepsize.py [--quick]
  --quick: N = 20,000 rows, budget 20 N, minibatch 200 (a minute or two on 2 cores)
  default: N = 581,012 rows, budget 100 N, minibatch 500
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import pandas as pd  # noqa: E402

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--method", default="sgldcv")
    args = p.parse_args(argv)
    n_rows, budget_passes, batch = (20_000, 20, 200) if args.quick else (581_012, 100, 500)
    data = make_data(n_rows)
    t = time.perf_counter()
    check = sgmcmc.check_stepsize(log_lik, data, start(), 1e-5, log_prior, per_parameter=False, tol=1e-3, max_iters=30, warn=False)
    print(
        f"check_stepsize at the start: lambda_max {check.curvature:.4g}, safe SGLD stepsize {check.safe_stepsize:.3g}, "
        f"{check.operator_calls} full-data Hessian-vector products, {time.perf_counter() - t:.2f} s",
        flush=True,
    )
    extra = dict(opt_stepsize=1e-5, n_iters_opt=2_000) if args.method.endswith("cv") else {}
    t = time.perf_counter()
    eps, table = sgmcmc.tune_stepsize(
        args.method, log_lik, data, start(), log_prior, minibatch_size=batch, budget=budget_passes * n_rows, seed=1, **extra
    )
    total = time.perf_counter() - t
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(4).to_string(index=False))
    rounds = table["seconds"].sum()
    print(
        f"N={n_rows} {args.method}: chose stepsize {eps:.3g} in {total:.1f} s (set-up {total - rounds:.1f} s, "
        f"runs + KSDs {rounds:.1f} s); {int(table['gradient_evaluations'].sum())} of {budget_passes * n_rows} "
        f"gradient evaluations used",
        flush=True,
    )


if __name__ == "__main__":
    main()
