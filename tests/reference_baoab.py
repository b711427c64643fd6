"""An independent numpy BAOAB (Leimkuhler & Matthews 2013) for tests: the textbook form, with
the gradient evaluated afresh for every kick (two per iteration), exact gradients of a Gaussian
log density with precision ``A`` and mean ``m``."""

from __future__ import annotations

import numpy as np


def baoab_gaussian(
    A: np.ndarray, m: np.ndarray, h: float, gamma: float, n_iters: int, seed: int, start: np.ndarray | None = None
) -> np.ndarray:
    """Positions after each of ``n_iters`` BAOAB iterations on N(m, A⁻¹), unit mass, momentum
    started at N(0, I); returns ``[n_iters, d]``."""
    rng = np.random.default_rng(seed)
    d = len(m)
    x = np.array(m if start is None else start, dtype=float)
    v = rng.normal(size=d)
    grad = lambda y: -A @ (y - m)  # noqa: E731
    decay = np.exp(-gamma * h)
    out = np.empty((n_iters, d))
    for t in range(n_iters):
        v = v + 0.5 * h * grad(x)
        x = x + 0.5 * h * v
        v = decay * v + np.sqrt(1 - decay**2) * rng.normal(size=d)
        x = x + 0.5 * h * v
        v = v + 0.5 * h * grad(x)
        out[t] = x
    return out


def stationary_sgld_covariance(A: np.ndarray, eps: float) -> np.ndarray:
    """SGLD's stationary covariance on N(m, A⁻¹) with the exact gradient, stepsize ε (ε/2 drift):
    in A's eigenbasis each variance is 1/(λ(1 − ελ/4))."""
    lam, q = np.linalg.eigh(A)
    return (q / (lam * (1 - eps * lam / 4))) @ q.T
