"""Worked example: the mean of a multivariate Gaussian, with SGLD.

The Python version of the R package's "mvGauss" vignette. We observe
x_1, ..., x_N ~ N(theta, I_2) with N = 10^4 and infer theta under the prior
theta_j ~ N(0, 10^2). This posterior is known exactly,

    theta | x ~ N( sum(x) / (N + 1/100),  I_2 / (N + 1/100) ),

so we can see what stochastic gradient Langevin dynamics (SGLD) gets right
(the location) and what a constant stepsize costs (a wider spread).

Run ``python vignettes/mv_gauss.py`` (about 10 s) or ``--quick``.
"""

from __future__ import annotations

from _common import density_contours, limits, parse_args, savefig, timed  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

tfd = tfp.distributions


def log_lik(params: dict[str, tf.Tensor], dataset: dict[str, tf.Tensor]) -> tf.Tensor:
    """Sum over the rows it is given of log N(x_i | theta, I_2)."""
    dist = tfd.MultivariateNormalDiag(loc=params["theta"], scale_diag=tf.ones(2))
    return tf.reduce_sum(dist.log_prob(dataset["X"]))


def log_prior(params: dict[str, tf.Tensor]) -> tf.Tensor:
    """theta_j ~ N(0, 10^2) independently."""
    return tf.reduce_sum(tfd.Normal(0.0, 10.0).log_prob(params["theta"]))


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers (see the end of the function)."""
    args = parse_args("mv_gauss", __doc__.splitlines()[0], argv)
    n_iters, burn_in = (3_000, 1_000) if args.quick else (11_000, 1_000)

    # Data: observations lie on the first axis, so X[i] is the point x_i.
    N = 10_000
    X = np.random.default_rng(13).standard_normal((N, 2)).astype(np.float32)
    dataset = {"X": X}
    params = {"theta": np.zeros(2)}  # the starting value; its shape is the parameter's

    with timed("sgld"):
        chains = sgmcmc.sgld(
            log_lik, dataset, params, stepsize=1e-5, log_prior=log_prior,
            minibatch_size=100, n_iters=n_iters, verbose=False, seed=13,
        )
    theta = chains["theta"][burn_in:]  # shape (n_iters - burn_in, 2)

    # The exact posterior, for comparison.
    exact_mean = X.sum(0, dtype=np.float64) / (N + 1 / 100)
    exact_sd = 1 / np.sqrt(N + 1 / 100)
    print(f"posterior mean  SGLD {np.round(theta.mean(0), 4)}   exact {np.round(exact_mean, 4)}")
    print(f"posterior sd    SGLD {np.round(theta.std(0), 4)}   exact {exact_sd:.4f}")
    print("(SGLD with a constant stepsize finds the right place but overstates the spread:")
    print(" the minibatch noise and the discretisation both add variance.)")

    # Density of the samples, with the exact posterior's 50/90/99% regions on top.
    lims = limits(theta)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    density_contours(ax, theta, lims, cmap="Blues")
    x, y = np.meshgrid(np.linspace(*lims[:2], 200), np.linspace(*lims[2:], 200))
    r2 = ((x - exact_mean[0]) ** 2 + (y - exact_mean[1]) ** 2) / exact_sd**2
    ax.contour(x, y, r2, levels=[-2 * np.log(1 - p) for p in (0.5, 0.9, 0.99)], colors="k", linewidths=1)
    ax.set(xlabel=r"$\theta_1$", ylabel=r"$\theta_2$",
           title="SGLD samples (filled) and the exact posterior (lines)")
    figure = savefig(fig, args.out / "mv_gauss_density.png")

    return {
        "mean": theta.mean(0),
        "sd": theta.std(0),
        "exact_mean": exact_mean,
        "exact_sd": exact_sd,
        "n_samples": len(theta),
        "figures": [figure],
    }


if __name__ == "__main__":
    main()
