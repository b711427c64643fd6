"""Worked example: Bayesian logistic regression on the covertype data, SGLD-CV then all six.

The model (Baker 2018, section 4.5.1; the R package's "logisticRegression" vignette):

    y_i | x_i ~ Bernoulli( sigmoid(beta_0 + x_i . beta) ),    beta_0, beta_j ~ Laplace(0, 1),

fitted to the covertype data (581,012 rows, 54 features in [0, 1], labels in {0, 1}) with
10^4 rows held out as a test set. Part A runs SGLD with control variates as in the R
vignette (thesis Fig. 4.5.1); part B runs all six samplers with the thesis' settings
(section 4.6.2, Fig. 4.6.2). Both judge the chains by the log loss on the test set,

    s(theta) = -(1/|T|) sum_{(x, y) in T} [y log pi(x) + (1 - y) log(1 - pi(x))],

every 10 iterations.

The full version needs the real data (``sgmcmc.datasets.get_dataset("covertype")``, which
downloads it once); if it cannot be had the script says so and exits with status 2.
``--quick`` runs a small version on ``synthetic_covertype`` data of the same layout.
"""

from __future__ import annotations

from _common import load_dataset_or_exit, parse_args, savefig, timed  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
from sgmcmc.datasets import synthetic_covertype

tfd = tfp.distributions

#: Thesis section 4.6.2 stepsizes; opt_stepsize 1e-6 for the control-variate samplers.
STEPSIZES = {"sgld": 5e-6, "sghmc": 1e-7, "sgnht": 1e-7, "sgldcv": 1e-5, "sghmccv": 1e-6, "sgnhtcv": 5e-7}
N_FULL = 581_012 - 10_000  # training rows in the full version


def log_lik(params: dict[str, tf.Tensor], dataset: dict[str, tf.Tensor]) -> tf.Tensor:
    """Sum over the rows it is given of log p(y_i | x_i, beta_0, beta)."""
    logits = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    # log-likelihood of a Bernoulli = minus the cross-entropy; this form is stable for big |logits|
    return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=dataset["y"], logits=logits))


def log_prior(params: dict[str, tf.Tensor]) -> tf.Tensor:
    """beta_0 and each beta_j ~ Laplace(0, 1)."""
    laplace = tfd.Laplace(0.0, 1.0)
    return laplace.log_prob(params["bias"]) + tf.reduce_sum(laplace.log_prob(params["beta"]))


def test_log_loss(bias: np.ndarray, beta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The test log loss of each of k samples, vectorised: ``bias`` (k,), ``beta`` (k, d) -> (k,)."""
    logits = X @ beta.T + bias  # (test rows, k)
    # -[y log sigmoid(z) + (1 - y) log(1 - sigmoid(z))] = log(1 + e^z) - y z
    return (np.logaddexp(0.0, logits) - y[:, None] * logits).mean(0)


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""
    args = parse_args(
        "logistic_regression", __doc__.splitlines()[0], argv,
        extra=lambda p: p.add_argument("--part", choices=["A", "B", "both"], default="both"),
    )

    # Data: column 0 is the label, columns 1-54 the features; hold out 10^4 random rows.
    if args.quick:
        covertype, true_coef = synthetic_covertype(n_rows=50_000, seed=1, return_coef=True)
        n_test = 5_000
    else:
        covertype, true_coef = load_dataset_or_exit("covertype"), None
        n_test = 10_000
    test = np.random.default_rng(13).permutation(len(covertype))[:n_test]
    train = np.setdiff1d(np.arange(len(covertype)), test)
    dataset = {"X": covertype[train, 1:], "y": covertype[train, 0]}
    X_test, y_test = covertype[test, 1:], covertype[test, 0]
    d = dataset["X"].shape[1]
    N = len(train)
    print(f"{N} training rows, {n_test} test rows, {d} features")

    # With fewer rows the posterior is wider by the same factor, and a stepsize scaled up by
    # N_FULL / N gives the same dynamics in fewer iterations; the full version uses scale 1.
    scale = N_FULL / N if args.quick else 1.0
    baseline = float(np.log(2))  # the log loss of predicting 1/2 everywhere (all coefficients 0)
    results: dict = {"baseline_log_loss": baseline, "figures": []}
    if true_coef is not None:  # generated data: the best possible log loss is known
        results["true_coef_log_loss"] = float(test_log_loss(true_coef[:1], true_coef[None, 1:], X_test, y_test)[0])
        print(f"test log loss with the coefficients that generated the data: {results['true_coef_log_loss']:.4f}")

    if args.part in ("A", "both"):
        print("\n== Part A: SGLD-CV (thesis Fig. 4.5.1) ==")
        n_iters, burn_in, n_opt = (1_100, 100, 1_000) if args.quick else (11_000, 1_000, 10_000)
        params = {"bias": 0.0, "beta": np.zeros(d)}
        with timed("sgldcv"):
            chain = sgmcmc.sgldcv(
                log_lik, dataset, params, stepsize=5e-6 * scale, opt_stepsize=5e-6 * scale,
                log_prior=log_prior, minibatch_size=500, n_iters=n_iters, n_iters_opt=n_opt,
                verbose=False, seed=13,
            )
        # Every 10th sample after burn-in; row i of the output is the state after iteration i + 1.
        kept = np.arange(burn_in, n_iters, 10)
        loss = test_log_loss(chain["bias"][kept], chain["beta"][kept], X_test, y_test)
        print(f"test log loss: mean {loss.mean():.4f}, range {loss.min():.4f}-{loss.max():.4f} "
              f"(thesis, real data: about 0.514-0.515; predicting 1/2: {baseline:.4f})")

        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot(kept - burn_in + 1, loss, color="maroon", lw=1)
        ax.set(xlabel="iteration after burn-in", ylabel="log loss of test set", title="sgldcv")
        results["figures"].append(savefig(fig, args.out / "logistic_regression_sgldcv.png"))
        results["sgldcv"] = {"iterations": kept - burn_in + 1, "log_loss": loss, "mean_log_loss": float(loss.mean())}

    if args.part in ("B", "both"):
        print("\n== Part B: all six samplers (thesis Fig. 4.6.2) ==")
        keep, n_opt = (1_000, 1_000) if args.quick else (10_000, 10_000)
        start = np.random.default_rng(1).standard_normal(d + 1)  # starting points ~ N(0, 1)
        params = {"bias": start[0], "beta": start[1:]}
        losses = {}
        for method, stepsize in STEPSIZES.items():
            run = getattr(sgmcmc, method)  # sgmcmc.sgld, sgmcmc.sghmc, ...
            n_keep = keep // 5 if method.startswith("sghmc") else keep  # sghmc: L = 5 gradients/iteration
            common = dict(log_prior=log_prior, minibatch_size=500, verbose=False, seed=1)
            with timed(method):
                if method.endswith("cv"):  # no burn-in: the mode search comes first
                    chain = run(log_lik, dataset, params, stepsize * scale, opt_stepsize=1e-6 * scale,
                                n_iters=n_keep, n_iters_opt=n_opt, **common)
                else:  # burn-in as long as the kept part, then dropped
                    chain = run(log_lik, dataset, params, stepsize * scale, n_iters=2 * n_keep, **common)
                    chain = {name: samples[n_keep:] for name, samples in chain.items()}
            kept = np.arange(0, n_keep, 10)
            losses[method] = test_log_loss(chain["bias"][kept], chain["beta"][kept], X_test, y_test)

        print(f"\n{'method':>8} {'mean test log loss':>19} {'sd':>7}")
        for method, loss in losses.items():
            print(f"{method:>8} {loss.mean():>19.4f} {loss.std():>7.4f}")

        fig, ax = plt.subplots(figsize=(8, 4.5))
        for method, loss in losses.items():
            ax.plot(np.arange(len(loss)) * 10 + 1, loss, lw=0.8, alpha=0.85, label=method)
        ax.set(xlabel="iteration (after burn-in or mode search)", ylabel="log loss of test set",
               title="Logistic regression: all six samplers")
        ax.legend(ncol=3)
        results["figures"].append(savefig(fig, args.out / "logistic_regression_methods.png"))
        results["methods"] = {m: {"log_loss": v, "mean_log_loss": float(v.mean())} for m, v in losses.items()}

    return results


if __name__ == "__main__":
    main()
