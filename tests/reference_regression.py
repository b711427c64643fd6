"""A Gaussian linear regression with correlated, badly scaled covariates and its exact posterior
(issue 22's tests: tune_stepsize, HAMCMC's default memory).

y = Xb + N(0, 1), prior b ~ N(0, 10² I); X's rows N(0, C) with C_ij = ρ^|i−j| (AR(1)), column j
scaled by 10^(s_j), s from −``log10_spread`` to ``log10_spread``. Posterior N(P⁻¹Xᵀy, P⁻¹),
P = XᵀX + I/100, exactly.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

PRIOR_VARIANCE = 100.0


def log_lik(p, ds):
    return -0.5 * tf.reduce_sum(tf.square(ds["y"] - tf.linalg.matvec(ds["X"], p["b"])))


def log_prior(p):
    return -0.5 * tf.reduce_sum(tf.square(p["b"])) / PRIOR_VARIANCE


def correlated_regression(n_rows: int, d: int, rho: float, log10_spread: float, seed: int = 5) -> dict:
    """The data (float64) and the exact posterior: keys ``data``, ``P`` (precision), ``mean``,
    ``sd``, ``lam`` (λ_max of P), ``start`` (zeros), ``log_lik``, ``log_prior``."""
    rng = np.random.default_rng(seed)
    corr = rho ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    X = rng.multivariate_normal(np.zeros(d), corr, size=n_rows) * 10 ** np.linspace(-log10_spread, log10_spread, d)
    y = X @ rng.normal(0, 1, d) + rng.normal(0, 1, n_rows)
    P = X.T @ X + np.eye(d) / PRIOR_VARIANCE
    cov = np.linalg.inv(P)
    return dict(data={"X": X, "y": y}, P=P, mean=cov @ X.T @ y, sd=np.sqrt(np.diag(cov)), lam=np.linalg.eigvalsh(P)[-1],
                start={"b": np.zeros(d)}, log_lik=log_lik, log_prior=log_prior)
