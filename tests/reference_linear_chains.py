"""Independent reference: SG-MCMC on a Gaussian posterior with exact gradients is a linear
recursion, so its stationary covariance is known exactly.

With A the posterior precision and θ measured from the mode, one iteration of SGLD (per-parameter
stepsizes E = diag(ε)) or of SGHMC (momentum refreshed each iteration, L leapfrog kicks, the first
a half kick; SPEC §3) is θ' = Mθ + Σᵢ Bᵢξᵢ with ξᵢ ~ N(0, I) independent, so the stationary
covariance S solves the discrete Lyapunov equation S = MSMᵀ + Σᵢ BᵢBᵢᵀ. :func:`simulate` runs the
same recursion with numpy's generator (the tests calibrate their bands on it).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_discrete_lyapunov


def sgld_recursion(precision: np.ndarray, stepsizes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """M and the noise matrices of SGLD, θ' = θ − ½E Aθ + E^½ξ."""
    e = np.diag(stepsizes)
    return np.eye(len(precision)) - 0.5 * e @ precision, [np.sqrt(e)]


def sghmc_recursion(precision: np.ndarray, stepsize: float, alpha: float, L: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """M and the noise matrices of one SGHMC iteration: ν ~ N(0, εI); L times
    ν ← ν − fεAθ − αν + N(0, 2fαε), θ ← θ + ν (f = ½ for the first kick)."""
    d = len(precision)
    eye = np.eye(d)
    theta, nu = eye.copy(), np.zeros((d, d))  # coefficients on θ_t
    noise_theta = [np.zeros((d, d)) for _ in range(L + 1)]
    noise_nu = [np.zeros((d, d)) for _ in range(L + 1)]
    noise_nu[0] = np.sqrt(stepsize) * eye
    for step in range(L):
        f = 0.5 if step == 0 else 1.0
        nu = nu - f * stepsize * precision @ theta - alpha * nu
        for i in range(L + 1):
            noise_nu[i] = noise_nu[i] - f * stepsize * precision @ noise_theta[i] - alpha * noise_nu[i]
        noise_nu[1 + step] = noise_nu[1 + step] + np.sqrt(2.0 * f * alpha * stepsize) * eye
        theta = theta + nu
        noise_theta = [a + b for a, b in zip(noise_theta, noise_nu)]
    return theta, noise_theta


def stationary_covariance(m: np.ndarray, noise: list[np.ndarray]) -> np.ndarray:
    return solve_discrete_lyapunov(m, sum(b @ b.T for b in noise))


def simulate(m: np.ndarray, noise: list[np.ndarray], n_iters: int, n_chains: int, seed: int) -> np.ndarray:
    """``[n_chains, n_iters, d]`` states from the stationary start 0 (the mode), numpy noise."""
    rng = np.random.default_rng(seed)
    d = len(m)
    b = np.concatenate(noise, axis=1)  # d × (d·#noise)
    out = np.empty((n_chains, n_iters, d))
    x = np.zeros((n_chains, d))
    for t in range(n_iters):
        x = x @ m.T + rng.standard_normal((n_chains, b.shape[1])) @ b.T
        out[:, t] = x
    return out


def variance_ratios(draws: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``[n_chains, d]``: each chain's sample variance along each eigenvector of the exact
    stationary covariance, over that eigenvalue (1 on average for a right chain)."""
    values, vectors = np.linalg.eigh(covariance)
    projected = draws @ vectors
    return projected.var(axis=1) / values
