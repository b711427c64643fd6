"""The four-argument sgldcv at large N/n (issue 29.2): where the mode search ends, what the Newton
steps do, and what the set-up costs against sampling.

Logistic regression, N rows (default 2·10^6, the issue's), d = 10 standardised predictors +
intercept, minibatch n = 100, automatic opt_stepsize, n_iters_opt = 10^4; stepsize 0.1/λ_max at
the exact mode. Prints the end check's distance after SGD and after each Newton step (verbose
lines of the library), the set-up's time (mode search, Newton, checks), 10^4 iterations' time,
the chain's sd over the Laplace sd per coefficient, and the checks' share of the whole run
(issue 31.5: ≤ 10 % at N = 5·10^7): the end-of-search distance checks (``check_mode``) and the
stepsize check at the mode (``check_before_sampling``), each timed around its call.
usage: python benchmarks/bench_mode_search.py [--rows 2000000] [--d 10]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.run import mode_search  # noqa: E402

CHECKS: dict[str, float] = {}


def timed(module, name: str) -> None:
    """Replace ``module.name`` by a wrapper adding its wall time to CHECKS[name]."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            CHECKS[name] = CHECKS.get(name, 0.0) + time.perf_counter() - t0

    setattr(module, name, wrapper)


def log_lik(params, data):
    logits = tf.linalg.matvec(data["X"], params["beta"])
    return tf.reduce_sum(data["y"] * logits - tf.math.softplus(logits))


def log_prior(params):
    return -0.5 * tf.reduce_sum(params["beta"] ** 2) / 100


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--iters", type=int, default=10_000)
    args = parser.parse_args()
    warnings.simplefilter("ignore", sgmcmc.StepsizeWarning)
    timed(mode_search, "check_mode")
    timed(mode_search, "check_before_sampling")
    rng = np.random.default_rng(7)
    X = np.column_stack([np.ones(args.rows), rng.normal(size=(args.rows, args.d))]).astype(np.float32)
    truth = rng.normal(0, 0.5, args.d + 1)
    y = (rng.uniform(size=args.rows) < 1 / (1 + np.exp(-(X.astype(np.float64) @ truth)))).astype(np.float32)
    beta = np.zeros(args.d + 1)
    for _ in range(25):  # Laplace: Newton in float64, in blocks
        grad, hess = -beta / 100, -np.eye(args.d + 1) / 100
        for start in range(0, args.rows, 500_000):
            xb = X[start : start + 500_000].astype(np.float64)
            p = 1 / (1 + np.exp(-xb @ beta))
            grad += xb.T @ (y[start : start + 500_000] - p)
            hess -= (xb * (p * (1 - p))[:, None]).T @ xb
        beta -= np.linalg.solve(hess, grad)
    sd = np.sqrt(np.diag(np.linalg.inv(-hess)))
    eps = 0.1 / np.linalg.eigvalsh(-hess)[-1]
    t0 = time.perf_counter()
    sampler = sgmcmc.sgldcv_setup(log_lik, {"X": X, "y": y}, {"beta": np.zeros(args.d + 1, np.float32)}, eps,
                                  log_prior=log_prior, minibatch_size=100, seed=1, verbose=True)
    sgmcmc.init_sess(sampler)
    setup_s = time.perf_counter() - t0
    offset = sampler.estimator.anchor["beta"].numpy() - beta
    t0 = time.perf_counter()
    out = sgmcmc.sample_chain(sampler, args.iters, verbose=False)
    sample_s = time.perf_counter() - t0
    draws = np.asarray(out["beta"], np.float64)[args.iters // 5 :]
    print(f"N = {args.rows:,}, d = {args.d + 1}, n = 100: anchor {np.sqrt(offset @ -hess @ offset):.3g} posterior sds "
          f"(Mahalanobis, exact) from the mode; set-up {setup_s:.1f} s, {args.iters:,} iterations {sample_s:.1f} s")
    print("sd / Laplace sd:", np.round(draws.std(0) / sd, 2))
    print("|mean - mode| / sd:", np.round(np.abs(draws.mean(0) - beta) / sd, 2))
    total = setup_s + sample_s
    for name, seconds in CHECKS.items():
        print(f"{name}: {seconds:.2f} s = {seconds / total:.1%} of the run (set-up + sampling {total:.1f} s)")
    print(f"checks together: {sum(CHECKS.values()) / total:.1%}")


if __name__ == "__main__":
    main()
