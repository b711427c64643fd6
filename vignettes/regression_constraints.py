"""Worked example: positive parameters with ``constraints`` (noise sd, group-level sd).

Two models whose standard deviations must stay positive. With
``constraints={"sigma": tfp.bijectors.Softplus()}`` the sampler moves the unconstrained
xi = softplus^-1(sigma), adds the log-det-Jacobian to the log prior, and hands back samples of
sigma itself; ``log_lik`` and ``log_prior`` are written in terms of sigma.

A. Linear regression y = X beta + e, e ~ N(0, sigma^2), flat prior on beta and an
   inverse-gamma prior on sigma^2. The posterior of sigma^2 given beta-marginalised is known
   exactly (normal–inverse-gamma), so SGLD-CV's sigma can be compared with the exact density.
B. A hierarchical model: group means mu_g ~ N(m, tau^2), y_gi ~ N(mu_g, 1), with a half-normal
   prior on the group-level sd tau (Exp bijector). The reference is a long exact-gradient
   (full-batch) Langevin run with a small stepsize.

C. A run stopped half way, saved, and resumed by a new sampler equals the uninterrupted run.

Run ``python vignettes/regression_constraints.py`` (about a minute) or ``--quick``.
"""

from __future__ import annotations

from _common import parse_args, savefig, timed  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import scipy.stats as st
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

tfd, tfb = tfp.distributions, tfp.bijectors
F64 = tf.float64


# -- A. linear regression with unknown noise sd ----------------------------------------------
A0, B0 = 2.0, 1.0  # sigma^2 ~ InvGamma(A0, B0)


def reg_log_lik(params, dataset):
    """Sum over the rows it is given of log N(y_i | x_i beta, sigma^2)."""
    mean = tf.linalg.matvec(dataset["X"], params["beta"])
    return tf.reduce_sum(tfd.Normal(mean, params["sigma"]).log_prob(dataset["y"]))


def reg_log_prior(params):
    """Flat on beta; sigma^2 ~ InvGamma(A0, B0) written as a density of sigma (times 2 sigma)."""
    s = params["sigma"]
    return tfd.InverseGamma(tf.constant(A0, F64), tf.constant(B0, F64)).log_prob(s**2) + tf.math.log(2 * s)


def regression(quick: bool, out) -> dict:
    rng = np.random.default_rng(21)
    n, d = 2_000, 3
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    y = X @ np.array([1.0, -0.5, 0.25]) + rng.normal(0, 0.7, n)
    # Exact: with a flat prior on beta, sigma^2 | y ~ InvGamma(A0 + (n - d)/2, B0 + RSS/2).
    rss = np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2)
    exact = st.invgamma(A0 + (n - d) / 2, scale=B0 + rss / 2)

    n_iters = 3_000 if quick else 40_000
    with timed("A: sgldcv with constraints"):
        chains = sgmcmc.sgldcv(
            reg_log_lik, {"X": X, "y": y}, {"beta": np.zeros(d), "sigma": 1.0}, stepsize=2e-5,
            opt_stepsize=1e-5, minibatch_size=100, n_iters=n_iters, n_iters_opt=1_000 if quick else 5_000, burn_in=500,
            log_prior=reg_log_prior, verbose=False, seed=21, dtype=F64, n_chains=4,
            constraints={"sigma": tfb.Softplus()},
        )
    sigma = chains["sigma"].ravel()
    q = [0.05, 0.5, 0.95]
    sampled_q, exact_q = np.quantile(sigma, q), np.sqrt(exact.ppf(q))
    print(f"A. sigma quantiles 5/50/95%  SGLD-CV {np.round(sampled_q, 4)}   exact {np.round(exact_q, 4)}")

    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.hist(sigma, bins=60, density=True, alpha=0.5, label="SGLD-CV (Softplus constraint)")
    grid = np.linspace(sigma.min(), sigma.max(), 300)
    ax.plot(grid, exact.pdf(grid**2) * 2 * grid, "k", label="exact")
    ax.set(xlabel=r"$\sigma$", ylabel="density", title="A. Regression noise sd")
    ax.legend()
    figure = savefig(fig, out / "regression_constraints_sigma.png")
    return {"sigma_q": sampled_q, "exact_sigma_q": exact_q, "exact_sd": float(np.sqrt(exact.var() / (4 * exact.mean()))),
            "figure": figure}


# -- B. hierarchical model with a group-level sd ---------------------------------------------
G, PER_GROUP = 8, 10


def hier_log_lik(params, dataset):
    """y_gi ~ N(mu_g, 1); each row carries its group index."""
    mu = tf.gather(params["mu"], dataset["group"])
    return tf.reduce_sum(tfd.Normal(mu, tf.constant(1.0, F64)).log_prob(dataset["y"]))


def hier_log_prior(params):
    """mu_g ~ N(m, tau^2), m ~ N(0, 10^2), tau ~ HalfNormal(2)."""
    tau = params["tau"]
    return (
        tf.reduce_sum(tfd.Normal(params["m"], tau).log_prob(params["mu"]))
        + tfd.Normal(tf.constant(0.0, F64), tf.constant(10.0, F64)).log_prob(params["m"])
        + tfd.HalfNormal(tf.constant(2.0, F64)).log_prob(tau)
    )


def hierarchical(quick: bool, out) -> dict:
    rng = np.random.default_rng(22)
    mu_true = rng.normal(0.5, 1.5, G)
    group = np.repeat(np.arange(G), PER_GROUP).astype(np.int32)
    y = mu_true[group] + rng.standard_normal(G * PER_GROUP)
    data = {"y": y, "group": group}
    start = {"mu": np.zeros(G), "m": 0.0, "tau": 1.0}
    cons = {"tau": tfb.Exp()}
    common = dict(log_prior=hier_log_prior, verbose=False, dtype=F64, constraints=cons, burn_in=1_000)
    n_ref, n_sg = (12_000, 6_000) if quick else (200_000, 50_000)
    with timed("B: reference (full-batch Langevin, small stepsize)"):
        ref = sgmcmc.sgld(hier_log_lik, data, start, 2e-3, minibatch_size=len(y), n_iters=n_ref, seed=1,
                          n_chains=4, thin=5, **common)
    with timed("B: SGLD with minibatches of 10"):
        sg = sgmcmc.sgld(hier_log_lik, data, start, 2e-3, minibatch_size=10, n_iters=n_sg, seed=2, n_chains=4,
                         **common)
    tau_ref, tau_sg = ref["tau"].ravel(), sg["tau"].ravel()
    q = [0.1, 0.5, 0.9]
    print(f"B. tau quantiles 10/50/90%   SGLD {np.round(np.quantile(tau_sg, q), 3)}   "
          f"reference {np.round(np.quantile(tau_ref, q), 3)}")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    bins = np.linspace(0, np.quantile(tau_ref, 0.995), 60)
    ax.hist(tau_ref, bins=bins, density=True, histtype="step", color="k", label="reference (full batch)")
    ax.hist(tau_sg, bins=bins, density=True, alpha=0.5, label="SGLD, n = 10 (Exp constraint)")
    ax.set(xlabel=r"$\tau$", ylabel="density", title="B. Group-level sd")
    ax.legend()
    figure = savefig(fig, out / "regression_constraints_tau.png")
    return {"tau_q": np.quantile(tau_sg, q), "ref_tau_q": np.quantile(tau_ref, q), "tau_min": float(tau_sg.min()),
            "figure": figure}


# -- C. a resumed run against an uninterrupted one ------------------------------------------------


def resumed_vs_uninterrupted(quick: bool, out) -> dict:
    """Model B again: one uninterrupted run, and one that stops half way, saves its state, and is
    resumed by a *new* sampler (as a new process would after a crash) from that save. The two
    are the same chain, bit for bit. (Whole-chain runs do this by themselves with
    ``checkpoint_dir=``; tests/test_checkpoints.py kills such a run with SIGKILL and resumes it.)"""
    import tempfile

    rng = np.random.default_rng(22)
    mu_true = rng.normal(0.5, 1.5, G)
    group = np.repeat(np.arange(G), PER_GROUP).astype(np.int32)
    data = {"y": mu_true[group] + rng.standard_normal(G * PER_GROUP), "group": group}
    start = {"mu": np.zeros(G), "m": 0.0, "tau": 1.0}
    setup = dict(log_prior=hier_log_prior, minibatch_size=10, seed=3, n_chains=2, dtype=F64,
                 constraints={"tau": tfb.Exp()})
    n = 2_000 if quick else 20_000
    with timed("C: uninterrupted, then stopped half way + saved + resumed"):
        whole = sgmcmc.sample_chain(sgmcmc.sgld_setup(hier_log_lik, data, start, 2e-3, **setup), n, verbose=False)
        first = sgmcmc.sgld_setup(hier_log_lik, data, start, 2e-3, **setup)
        part1 = sgmcmc.sample_chain(first, n // 2, verbose=False)
        with tempfile.TemporaryDirectory() as directory:
            first.save(directory)
            second = sgmcmc.sgld_setup(hier_log_lik, data, start, 2e-3, **setup)
            second.restore(directory)
            part2 = sgmcmc.sample_chain(second, n - n // 2, verbose=False)
    resumed = np.concatenate([part1["tau"], part2["tau"]], axis=1)
    difference = float(np.max(np.abs(resumed - whole["tau"])))
    print(f"C. resumed vs uninterrupted: largest difference in tau over {n} iterations x 2 chains: {difference}")
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    ax.plot(whole["tau"][0], color="0.7", lw=3, label="uninterrupted")
    ax.plot(np.arange(n // 2), part1["tau"][0], "C0", lw=0.8, label="first half (then saved)")
    ax.plot(np.arange(n // 2, n), part2["tau"][0], "C3", lw=0.8, label="resumed by a new sampler")
    ax.axvline(n // 2, color="k", ls=":")
    ax.set(xlabel="iteration", ylabel=r"$\tau$ (chain 0)", title=f"C. Resumed = uninterrupted (max |diff| = {difference:g})")
    ax.legend(fontsize=8)
    figure = savefig(fig, out / "regression_constraints_resume.png")
    return {"max_difference": difference, "figure": figure}


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""
    args = parse_args("regression_constraints", __doc__.splitlines()[0], argv)
    a = regression(args.quick, args.out)
    b = hierarchical(args.quick, args.out)

    c = resumed_vs_uninterrupted(args.quick, args.out)

    return {"A": a, "B": b, "C": c, "figures": [a["figure"], b["figure"], c["figure"]]}


if __name__ == "__main__":
    main()
