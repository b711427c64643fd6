"""Getting started: the ideas behind every sgmcmc call, on a 2-d Gaussian.

To run a stochastic-gradient MCMC sampler you give

* ``dataset``: a dict of arrays, observations on the FIRST axis (row ``X[i]`` is x_i);
* ``params``: a dict of starting values, one entry per parameter, of the parameter's shape;
* ``log_lik(params, dataset)``: the SUM of the log-likelihood over the rows it is given,
  written with TensorFlow (Probability) ops; the package evaluates it on minibatches and
  scales it by N / n itself;
* ``log_prior(params)``: optional; leaving it out (None) means a flat prior;
* ``stepsize``: one number for every parameter, or a dict with a number per parameter name;

and optionally a ``minibatch_size``: a proportion of N in (0, 1) or a count of rows.
You get back a dict of numpy arrays, ``out[name]`` of shape ``(n_iters, *shape)``.

The model here: x_i ~ N(theta, I_2), i = 1..N, N = 10^4; we infer theta.
Run ``python vignettes/getting_started.py`` or ``--quick``.
"""

from __future__ import annotations

from _common import parse_args, savefig  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

tfd = tfp.distributions


def log_lik(params: dict[str, tf.Tensor], dataset: dict[str, tf.Tensor]) -> tf.Tensor:
    """The sum over the rows of ``dataset["X"]`` of log N(x_i | theta, I_2): a scalar."""
    dist = tfd.MultivariateNormalDiag(loc=params["theta"], scale_diag=tf.ones(2))
    return tf.reduce_sum(dist.log_prob(dataset["X"]))


def log_prior(params: dict[str, tf.Tensor]) -> tf.Tensor:
    """A Student-t prior with 3 degrees of freedom on each coordinate of theta."""
    return tf.reduce_sum(tfd.StudentT(df=3.0, loc=0.0, scale=1.0).log_prob(params["theta"]))


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""
    args = parse_args("getting_started", __doc__.splitlines()[0], argv)
    n_iters = 2_000 if args.quick else 10_000

    # 1. Data and parameters are dicts. X has shape (N, 2): observation i is X[i].
    N = 10_000
    X = np.random.default_rng(1).standard_normal((N, 2)).astype(np.float32)
    dataset = {"X": X}
    params = {"theta": np.random.default_rng(2).standard_normal(2)}  # a random start, shape (2,)
    print(f"dataset['X']: {X.shape}   params['theta'] starts at {np.round(params['theta'], 3)}")

    # 2. A first run: SGLD, flat prior (log_prior left out), stepsize one number,
    #    minibatch 1% of N (the default, 0.01), i.e. 100 rows per gradient.
    out = sgmcmc.sgld(log_lik, dataset, params, stepsize=1e-5, n_iters=n_iters, verbose=False, seed=1)
    theta = out["theta"]
    print(f"output: {theta.shape} = (n_iters, *shape of theta); row i is the state after iteration i + 1")
    burn_in = n_iters // 10
    flat_mean = theta[burn_in:].mean(0)
    print(f"posterior mean, flat prior:        {np.round(flat_mean, 4)} (sample mean of X: {np.round(X.mean(0), 4)})")

    # 3. The same run written differently gives the same chain (same seed): a stepsize dict
    #    with an entry per parameter name, and the minibatch as a count instead of a proportion.
    same = sgmcmc.sgld(log_lik, dataset, params, stepsize={"theta": 1e-5}, minibatch_size=100,
                       n_iters=n_iters, verbose=False, seed=1)
    identical = bool(np.array_equal(same["theta"], theta))
    print(f"stepsize dict + minibatch_size=100 gives the identical chain: {identical}")

    # 4. A prior: pass log_prior. With 10^4 observations the data outweigh it.
    with_prior = sgmcmc.sgld(log_lik, dataset, params, stepsize=1e-5, log_prior=log_prior,
                             n_iters=n_iters, verbose=False, seed=1)
    prior_mean = with_prior["theta"][burn_in:].mean(0)
    print(f"posterior mean, Student-t prior:   {np.round(prior_mean, 4)}")

    # 5. A control-variate sampler needs opt_stepsize too: it first climbs to the posterior
    #    mode by stochastic gradient ascent, then samples from there (no burn-in needed).
    cv = sgmcmc.sgldcv(log_lik, dataset, params, stepsize=1e-5, opt_stepsize=1e-5, log_prior=log_prior,
                       n_iters=n_iters, n_iters_opt=1_000, verbose=False, seed=1)
    cv_mean = cv["theta"].mean(0)
    print(f"posterior mean, sgldcv:            {np.round(cv_mean, 4)}")

    # 6. Mistakes are caught before anything long runs, with a message that says what to fix.
    def float64_lik(params, dataset):  # np.ones(2) is float64; the model runs in float32
        return tf.reduce_sum(tfd.MultivariateNormalDiag(params["theta"], np.ones(2)).log_prob(dataset["X"]))

    mistakes = {
        "float64 constant in log_lik": lambda: sgmcmc.sgld(float64_lik, dataset, params, 1e-5),
        "stepsize dict with a wrong name": lambda: sgmcmc.sgld(log_lik, dataset, params, {"mu": 1e-5}),
        "minibatch larger than N": lambda: sgmcmc.sgld(log_lik, dataset, params, 1e-5, minibatch_size=20_000),
    }
    caught = {}
    for what, call in mistakes.items():
        try:
            call()
        except (TypeError, ValueError) as error:
            caught[what] = type(error).__name__
            print(f"\n{what}:\n  {type(error).__name__}: {error}")

    # Trace plots: the chain leaves its starting point and settles near the posterior.
    fig, axes = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for k, ax in enumerate(axes):
        ax.plot(theta[:, k], lw=0.5, label="sgld, flat prior")
        ax.plot(cv["theta"][:, k], lw=0.5, label="sgldcv (starts at the mode)")
        ax.axhline(X[:, k].mean(), color="k", lw=1, ls="--", label="sample mean")
        ax.set_ylabel(rf"$\theta_{k + 1}$")
        ax.set_ylim(X[:, k].mean() - 0.1, X[:, k].mean() + 0.1)
    axes[0].legend(loc="upper right", fontsize=8)
    axes[1].set_xlabel("iteration")
    figure = savefig(fig, args.out / "getting_started_traces.png")

    return {"flat_mean": flat_mean, "prior_mean": prior_mean, "cv_mean": cv_mean, "sample_mean": X.mean(0),
            "identical": identical, "caught": caught, "figures": [figure]}


if __name__ == "__main__":
    main()
