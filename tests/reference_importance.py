"""An independent numpy reference for smooth, nearly Gaussian posteriors: Newton's method for the
mode, then self-normalised importance sampling from a multivariate Student-t (5 degrees of freedom)
centred there with the inverse Hessian as its scale. Exact up to the importance-sampling error,
which it reports (the effective sample size of the weights). No TensorFlow, no sgmcmc."""

from __future__ import annotations

from typing import Callable

import numpy as np


def newton_mode(grad_hess: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], x0: np.ndarray,
                iters: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Mode and negative Hessian there of a concave log density (``grad_hess(x)`` returns the
    gradient and the negative Hessian)."""
    x = np.asarray(x0, float)
    for _ in range(iters):
        g, h = grad_hess(x)
        step = np.linalg.solve(h, g)
        x = x + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return x, grad_hess(x)[1]


def importance_moments(log_density: Callable[[np.ndarray], np.ndarray], mode: np.ndarray, neg_hessian: np.ndarray,
                       draws: int = 200_000, df: float = 5.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """Posterior means, sds and the weights' effective sample size.

    ``log_density(x)`` takes ``[m, d]`` and returns ``[m]`` (unnormalised)."""
    rng = np.random.default_rng(seed)
    d = mode.size
    chol = np.linalg.cholesky(np.linalg.inv(neg_hessian))
    z = rng.standard_normal((draws, d))
    w = rng.chisquare(df, size=draws) / df
    x = mode + (z @ chol.T) / np.sqrt(w)[:, None]
    # Student-t log density up to a constant
    maha = np.sum(np.linalg.solve(chol, (x - mode).T) ** 2, axis=0)
    log_q = -0.5 * (df + d) * np.log1p(maha / df)
    # in chunks: a log density of [m, d] may build [m, N] arrays
    log_p = np.concatenate([log_density(x[i:i + 5_000]) for i in range(0, draws, 5_000)])
    log_w = log_p - log_q
    log_w -= log_w.max()
    weights = np.exp(log_w)
    weights /= weights.sum()
    mean = weights @ x
    sd = np.sqrt(weights @ (x - mean) ** 2)
    return mean, sd, float(1.0 / np.sum(weights**2))


def logistic_regression(X: np.ndarray, y: np.ndarray, prior_sd: float):
    """(log_density, grad_hess) of a logistic regression (no separate intercept) with N(0, prior_sd²)."""

    def log_density(b: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(b) @ X.T
        return np.sum(y * z - np.logaddexp(0.0, z), axis=1) - 0.5 * np.sum(np.atleast_2d(b) ** 2, axis=1) / prior_sd**2

    def grad_hess(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(X @ b)))
        grad = X.T @ (y - p) - b / prior_sd**2
        hess = (X * (p * (1 - p))[:, None]).T @ X + np.eye(b.size) / prior_sd**2
        return grad, hess

    return log_density, grad_hess
