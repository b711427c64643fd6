"""Independent numpy versions of pSGLD and HAMCMC on a Gaussian target N(mu, A⁻¹) with exact
gradients g(θ) = A(mu − θ), for calibrating tests/test_preconditioned.py.

Written from the papers, not from sgmcmc's code: pSGLD per Li et al. (2016) in SPEC §3's
convention; HAMCMC builds H_t as a dense matrix by the BFGS recursion of Şimşekli et al. Eq. 6
over all M − 1 pairs (seeds' errata) and draws its noise through a Cholesky factor of H_t (not
the two-loop / Eq. 11 product form the library uses).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def psgld_chain(A, mu, start, eps, n_iters, seed, beta=0.99, lam=1e-5):
    """``[n_iters, D]`` samples of pSGLD with exact gradients."""
    rng = np.random.default_rng(seed)
    theta = np.array(start, float)
    v = np.zeros_like(theta)
    out = np.empty((n_iters, len(theta)))
    for i in range(n_iters):
        g = A @ (mu - theta)
        v = beta * v + (1 - beta) * g * g
        G = 1.0 / (lam + np.sqrt(v))
        theta = theta + 0.5 * eps * G * g + np.sqrt(eps * G) * rng.normal(size=theta.shape)
        out[i] = theta
    return out


def bfgs_inverse_hessian(pairs, dim):
    """Dense H from pairs (s, y), oldest first, H⁰ = γI with γ = sᵀy/yᵀy of the newest pair."""
    if not pairs:
        return np.eye(dim)
    s, y = pairs[-1]
    H = (s @ y) / (y @ y) * np.eye(dim)
    for s, y in pairs:
        rho = 1.0 / (s @ y)
        V = np.eye(dim) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    return H


def hamcmc_chain(A, mu, start, eps, n_iters, seed, memory=5, warmup_eps=None, damping=0.0):
    """``[n_iters, D]`` samples of HAMCMC (Eq. 10; ε/2 convention) with exact gradients."""
    rng = np.random.default_rng(seed)
    M, D = memory, len(start)
    warmup_eps = eps if warmup_eps is None else warmup_eps
    history = [np.array(start, float)] * M  # θ_{t−M}, …, θ_{t−1}
    pairs = []  # (s_τ, y_τ), τ = t−M+1 … t−1
    out = np.empty((n_iters, D))
    for t in range(1, n_iters + 1):
        base = history[0]
        g = A @ (mu - base)
        z = rng.normal(size=D)
        if t <= 2 * M:
            new = base + 0.5 * warmup_eps * g + np.sqrt(warmup_eps) * z
        else:
            H = bfgs_inverse_hessian(pairs, D)
            new = base + 0.5 * eps * H @ g + np.sqrt(eps) * np.linalg.cholesky(H) @ z
        s = new - base
        y = g - A @ (mu - new) + damping * s
        pairs = (pairs + [(s, y)])[-(M - 1):]
        history = history[1:] + [new]
        out[t - 1] = new
    return out


# -- the setting of tests/test_preconditioned.py and its stored reference band ----------------------
EIGS = np.array([1000.0, 30.0, 1.0])
MU = np.array([0.5, -1.0, 2.0])
_Q = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]
A_DIAG = np.diag(EIGS)
A_ROT = _Q @ np.diag(EIGS) @ _Q.T
K, N_ITERS, BURN_IN = 10, 2000, 500
#: The test's settings per method: the precision A and the library sampler's keyword arguments
#: (the numpy reference runs the same: :func:`reference_chain`).
CASES = {
    "psgld": (A_DIAG, dict(stepsize=0.05)),
    "hamcmc": (A_ROT, dict(stepsize=0.03, memory=3, warmup_stepsize=2.0**-10)),
}
#: The stored band (written by tests/make_preconditioned_reference.py).
BAND_FILE = Path(__file__).parent / "data" / "preconditioned_reference_band.npz"


def exact_sd(A):
    return np.sqrt(np.diag(np.linalg.inv(A)))


def reference_chain(method: str) -> tuple:
    """The numpy chain of ``method`` and its keyword arguments, from :data:`CASES`' settings."""
    kw = CASES[method][1]
    if method == "psgld":
        return psgld_chain, dict(eps=kw["stepsize"])
    return hamcmc_chain, dict(eps=kw["stepsize"], memory=kw["memory"], warmup_eps=kw["warmup_stepsize"])


def reference_band(method: str, seeds=range(3)) -> tuple[np.ndarray, np.ndarray]:
    """The per-coordinate range, over ``seeds``, of the sampled sd / exact sd of K pooled
    reference chains (chain k of seed s: numpy seed 100 s + k) from 0, N_ITERS iterations,
    BURN_IN dropped."""
    A = CASES[method][0]
    chain, kw = reference_chain(method)
    ratios = []
    for seed in seeds:
        x = np.concatenate([chain(A, MU, np.zeros(3), n_iters=N_ITERS, seed=100 * seed + k, **kw)[BURN_IN:] for k in range(K)])
        ratios.append(x.std(0) / exact_sd(A))
    return np.min(ratios, axis=0), np.max(ratios, axis=0)


def stored_band(method: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`reference_band` as stored in :data:`BAND_FILE`."""
    stored = np.load(BAND_FILE)
    return stored[f"{method}_lo"], stored[f"{method}_hi"]
