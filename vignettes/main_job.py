"""The main job: Bayesian logistic regression on covertype with SGLD-CV.

Runs on the real covertype data when it is in the cache (see README, "Datasets"), and on
covertype-shaped synthetic data otherwise. Settings follow the thesis (§4.5, SPEC §6):
Laplace(0, 1) prior, minibatch 500, stepsize 5e-6, opt_stepsize 5e-6, 10^4 optimisation
steps, 11,000 iterations of which the first 1,000 are dropped, 10^4 held-out test rows.
Prints a summary and writes ``out/main_job/sgldcv_logistic_regression.png``.

    python3 tasks.py demo [--iters 11000] [--out out/main_job] [--synthetic] [--quick]

``--quick`` runs a small version in seconds: 50,000 rows of generated data, 1,100 iterations
and 1,000 optimisation steps.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.datasets import DatasetUnavailableError, synthetic_covertype  # noqa: E402

N_TEST = 10_000


def log_lik(params, dataset):
    z = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    return tf.reduce_sum(dataset["y"] * z - tf.math.softplus(z))


def log_prior(params):
    # Laplace(0, 1) on every coefficient, up to a constant.
    return -tf.reduce_sum(tf.abs(params["beta"])) - tf.abs(params["bias"])


def test_log_loss(bias: np.ndarray, beta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Log-loss of each sample's predictive on the test rows (one value per sample)."""
    z = bias[:, None] + beta @ X.T
    return np.mean(np.logaddexp(0.0, z) - y * z, axis=1)


QUICK_ROWS = 50_000


def load(synthetic: bool, n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """The data, the true coefficients (generated data only) and a description."""
    if not synthetic:
        try:
            return sgmcmc.get_dataset("covertype"), None, "covertype (LIBSVM, scaled)"
        except DatasetUnavailableError as error:
            print(f"{str(error).splitlines()[0]}\n-> using synthetic covertype-shaped data instead (README, 'Datasets')")
    data, coef = synthetic_covertype(return_coef=True, **({} if n_rows is None else {"n_rows": n_rows}))
    return data, coef, "synthetic covertype-shaped data"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a small version that runs in seconds: {QUICK_ROWS:,} rows of generated data, "
                        "1,100 iterations, 1,000 optimisation steps")
    parser.add_argument("--iters", type=int, default=None, help="iterations (default 11,000; 1,100 with --quick)")
    parser.add_argument("--iters-opt", type=int, default=None,
                        help="optimisation steps (default 10,000; 1,000 with --quick)")
    parser.add_argument("--out", default="out/main_job")
    parser.add_argument("--synthetic", action="store_true", help="skip the real data")
    args = parser.parse_args(argv)
    if args.iters is None:
        args.iters = 1_100 if args.quick else 11_000
    if args.iters_opt is None:
        args.iters_opt = 1_000 if args.quick else 10_000

    data, true_coef, source = load(args.synthetic or args.quick, QUICK_ROWS if args.quick else None)
    rng = np.random.default_rng(1)
    rows = rng.permutation(len(data))
    test, train = data[rows[:N_TEST]], data[rows[N_TEST:]]
    dataset = {"X": train[:, 1:], "y": train[:, 0]}
    params = {"bias": 0.0, "beta": np.zeros(train.shape[1] - 1)}

    start = time.perf_counter()
    out = sgmcmc.sgldcv(
        log_lik, dataset, params, stepsize=5e-6, opt_stepsize=5e-6, log_prior=log_prior,
        minibatch_size=500, n_iters=args.iters, n_iters_opt=args.iters_opt, seed=1,
    )
    seconds = time.perf_counter() - start
    burn = min(1_000, args.iters // 10)
    losses = test_log_loss(out["bias"], out["beta"], test[:, 1:], test[:, 0])
    posterior_mean_loss = float(np.mean(losses[burn:]))
    prior_loss = float(np.log(2.0))
    true_loss = None
    if true_coef is not None:
        true_loss = float(test_log_loss(true_coef[:1], true_coef[None, 1:], test[:, 1:], test[:, 0])[0])

    print(f"\nSGLD-CV logistic regression on {source}: N = {len(train):,} rows, d = {train.shape[1] - 1}")
    print(f"{args.iters:,} iterations + {args.iters_opt:,} optimisation steps in {seconds:.1f} s")
    print(f"test log-loss after burn-in: {posterior_mean_loss:.4f} (prior-mean predictor: {prior_loss:.4f})")
    if true_loss is not None:
        print(f"test log-loss at the true coefficients of the generated data: {true_loss:.4f}")
    sd = out["beta"][burn:].std(axis=0)
    print(f"posterior sd of the coefficients: median {np.median(sd):.3g}, range {sd.min():.3g}–{sd.max():.3g}")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(np.arange(1, args.iters + 1), losses, lw=0.6)
    ax1.axvline(burn, color="grey", ls="--", lw=0.8)
    ax1.set(xlabel="iteration", ylabel="test log-loss", title="SGLD-CV: test log-loss of each sample")
    samples = out["beta"][burn:]
    index = np.arange(1, samples.shape[1] + 1)
    ax2.errorbar(index, samples.mean(axis=0), yerr=2 * samples.std(axis=0), fmt="o", ms=3, label="posterior mean ± 2 sd")
    if true_coef is not None:
        ax2.plot(index, true_coef[1:], "x", color="C3", ms=5, label="true coefficient")
    # Each one-hot block (columns 11-14 and 15-54 of covertype) sums to 1, so with the
    # intercept it is identified only up to a shift, which the prior settles.
    ax2.set(xlabel="coefficient", ylabel="value", title="posterior of β (one-hot blocks: up to a shift)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    figure = out_dir / "sgldcv_logistic_regression.png"
    fig.savefig(figure, dpi=110)
    print(f"figure: {figure}")
    return {"log_loss": posterior_mean_loss, "true_log_loss": true_loss, "seconds": seconds, "figure": str(figure)}


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
