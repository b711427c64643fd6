"""The main job: Bayesian logistic regression on covertype with ``sgmcmc.sample``.

Runs on the real covertype data when it is in the cache (see README, "Datasets"), and on
covertype-shaped synthetic data otherwise. The model follows the thesis (§4.5, SPEC §6):
Laplace(0, 1) prior, 10^4 held-out test rows. Nothing is tuned by hand: ``sgmcmc.sample`` finds
the mode, takes the curvature there, chooses the sampler and its stepsize and runs four chains
until every coefficient has bulk and tail ESS >= 400 and R-hat <= 1.01 (Vehtari et al. 2021), or
says that its budget ended first. (The thesis' hand-set SGLD-CV, stepsize 5e-6 with 11,000
iterations, left 55 of 55 coefficients unmixed from dispersed starts: round 4's main job.)

Prints the choice, the report and the summary table (mean, sd, MCSE, bulk/tail ESS, R-hat) and
writes ``out/main_job/sample_logistic_regression.png``: the test log-loss of each chain's
draws, the coefficients with their 95 % intervals, and every coefficient's ESS and R-hat against
the targets.

    python3 tasks.py demo [--out out/main_job] [--synthetic] [--quick] [--max-time S]

``--quick`` runs a small version: 50,000 rows of generated data.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import sgmcmc  # first: it imports TensorFlow without its start-up lines

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import tensorflow as tf  # noqa: E402

from sgmcmc.datasets import DatasetUnavailableError, synthetic_covertype  # noqa: E402

N_TEST = 10_000
#: Vehtari et al. (2021): trust a component only with R-hat < 1.01 and bulk ESS >= 400 (4 chains).
RHAT_MAX = 1.01
ESS_MIN = 400


def not_mixed(table) -> np.ndarray:
    """Rows of a summary table that fail Vehtari et al.'s (2021) thresholds (``sample``'s targets)."""
    return ((table["r_hat"] > RHAT_MAX) | (table["ess_bulk"] < ESS_MIN) | (table["ess_tail"] < ESS_MIN)).to_numpy()


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
                        help=f"a small version: {QUICK_ROWS:,} rows of generated data")
    parser.add_argument("--max-time", type=float, default=None,
                        help="seconds sgmcmc.sample may take at most (default: its own budget)")
    parser.add_argument("--out", default="out/main_job")
    parser.add_argument("--synthetic", action="store_true", help="skip the real data")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    data, true_coef, source = load(args.synthetic or args.quick, QUICK_ROWS if args.quick else None)
    rng = np.random.default_rng(1)
    rows = rng.permutation(len(data))
    test, train = data[rows[:N_TEST]], data[rows[N_TEST:]]
    dataset = {"X": train[:, 1:], "y": train[:, 0]}
    d = train.shape[1] - 1

    start = time.perf_counter()
    out = sgmcmc.sample(log_lik, dataset, {"bias": 0.0, "beta": np.zeros(d)}, log_prior, seed=args.seed,
                        max_time=args.max_time)
    seconds = time.perf_counter() - start
    report = out.report
    table = out.summary()
    by_chain = out.by_chain()
    losses = np.stack([test_log_loss(b, w, test[:, 1:], test[:, 0]) for b, w in zip(by_chain["bias"], by_chain["beta"])])
    posterior_mean_loss = float(np.mean(losses))
    flags = not_mixed(table)
    prior_loss = float(np.log(2.0))
    true_loss = None
    if true_coef is not None:
        true_loss = float(test_log_loss(true_coef[:1], true_coef[None, 1:], test[:, 1:], test[:, 0])[0])

    print(f"\nsgmcmc.sample, logistic regression on {source}: N = {len(train):,} rows, d = {d + 1}")
    print(report)
    print(f"test log-loss of the posterior draws: {posterior_mean_loss:.4f} (prior-mean predictor: {prior_loss:.4f})")
    if true_loss is not None:
        print(f"test log-loss at the true coefficients of the generated data: {true_loss:.4f}")
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 120,
                           "display.float_format", "{:.4g}".format):
        print(f"\nsamples.summary() ({report.n_chains} chains x {out.n_kept:,} kept draws after the burn-in):")
        print(table)
    if flags.any():
        print(f"\nnot mixed (R-hat > {RHAT_MAX} or bulk/tail ESS < {ESS_MIN}): {int(flags.sum())} of {len(flags)} "
              f"components: {', '.join(table.index[flags])}")
        print("  the budget ended first: run again with a larger --max-time; their means and error bars are not to "
              "be trusted (they are flagged in the figure)")
    else:
        print(f"\nevery one of the {len(flags)} components has R-hat <= {RHAT_MAX} and bulk and tail ESS >= {ESS_MIN}")
    print("  (ESS and R-hat say nothing about the bias of an SG sampler: the stepsize keeps the sd within "
          f"{report.distortion:.1%} on the Gaussian approximation; see sgmcmc.ksd, South 2021)")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.3), gridspec_kw={"width_ratios": [1, 1.6, 1]})
    kept_at = report.burn_in + report.thin * np.arange(1, out.n_kept + 1)
    for k, loss in enumerate(losses):
        ax1.plot(kept_at, loss, lw=0.6, label=f"chain {k + 1}")
    ax1.set(xlabel="iteration", ylabel="test log-loss", title="test log-loss of each kept draw")
    ax1.legend(fontsize=7)
    beta_rows = np.array([name.startswith("beta[") for name in table.index])
    mean, sd_all = table["mean"].to_numpy()[beta_rows], table["sd"].to_numpy()[beta_rows]
    bad = flags[beta_rows]
    index = np.arange(1, beta_rows.sum() + 1)
    ax2.errorbar(index[~bad], mean[~bad], yerr=2 * sd_all[~bad], fmt="o", ms=3, color="C0",
                 label="posterior mean ± 2 sd (mixed)")
    if bad.any():
        ax2.errorbar(index[bad], mean[bad], yerr=2 * sd_all[bad], fmt="s", ms=4, color="C3", mfc="none",
                     label=f"NOT MIXED (R-hat > {RHAT_MAX} or ESS < {ESS_MIN}): do not trust")
    if true_coef is not None:
        ax2.plot(index, true_coef[1:], "x", color="k", ms=4, label="true coefficient")
    # Each one-hot block (columns 11-14 and 15-54 of covertype) sums to 1, so with the
    # intercept it is identified only up to a shift, which the prior settles.
    ax2.set(xlabel="coefficient", ylabel="value", title="posterior of β (one-hot blocks: up to a shift)")
    ax2.legend(fontsize=7)
    ess = np.minimum(table["ess_bulk"], table["ess_tail"])
    ax3.scatter(ess[~flags], table["r_hat"][~flags], s=12, color="C0", label="mixed")
    if flags.any():
        ax3.scatter(ess[flags], table["r_hat"][flags], s=18, marker="s", facecolor="none", color="C3",
                    label="not mixed")
    ax3.axhline(RHAT_MAX, color="C3", ls="--", lw=0.8)
    ax3.axvline(ESS_MIN, color="C3", ls="--", lw=0.8)
    ax3.set_xscale("log")
    ax3.set(xlabel="min(bulk, tail) ESS (log scale)", ylabel="R-hat", title="convergence of every component")
    ax3.legend(fontsize=7)
    fig.tight_layout()
    figure = out_dir / "sample_logistic_regression.png"
    fig.savefig(figure, dpi=110)
    plt.close(fig)
    print(f"figure: {figure}")
    return {
        "log_loss": posterior_mean_loss, "true_log_loss": true_loss, "seconds": seconds, "figure": str(figure),
        "summary": table, "report": report, "not_mixed": list(table.index[flags]), "flagged_in_figure": [
            f"beta[{i - 1}]" for i in index[bad]] + (["bias"] if flags[0] else []),
    }


if __name__ == "__main__":
    main()
