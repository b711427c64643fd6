"""Independent numpy references for SGLD and SGNHT on a Gaussian target N(m, s²) with exact
gradients g(θ) = −(θ − m)/s² (SPEC §3), written from the spec, not from the package.

SGLD is an AR(1) process, θ' − m = ρ(θ − m) + √ε ξ with ρ = 1 − ε/(2s²), so its stationary
variance is ε/(1 − ρ²) = s²/(1 − ε/(4s²)) exactly. SGNHT is nonlinear (the thermostat
multiplies the momentum), so its reference is a Monte Carlo run of the same recursion over many
independent chains.
"""

from __future__ import annotations

import numpy as np


def sgld_stationary_variance(s2: float, stepsize: float, gradient_noise_var: float = 0.0) -> float:
    """Exact stationary variance of SGLD's θ on N(m, s2): with exact gradients s2/(1 − ε/(4 s2));
    a gradient estimate with independent noise of variance ``gradient_noise_var`` per step adds
    (ε/2)² times it to the per-step variance ε."""
    rho = 1.0 - stepsize / (2.0 * s2)
    return (stepsize + (stepsize / 2.0) ** 2 * gradient_noise_var) / (1.0 - rho**2)


def sgnht_run(theta0: np.ndarray, s2: float, stepsize: float, a: float, n_iters: int, seed: int) -> dict:
    """SGNHT (SPEC §3) on N(0, s2), one scalar parameter per chain, chains along ``theta0``:
    u ~ N(0, ε) and α = a at the start; then per iteration
    u ← u + ε g(θ) − α u + N(0, 2aε);  θ ← θ + u;  α ← α + u² − ε.
    Returns the per-iteration states ``theta``, ``u`` and ``alpha``, each ``(n_iters, K)``."""
    rng = np.random.default_rng(seed)
    theta = np.asarray(theta0, np.float64).copy()
    u = np.sqrt(stepsize) * rng.normal(size=theta.shape)
    alpha = np.full(theta.shape, a)
    out = {k: np.empty((n_iters, theta.size)) for k in ("theta", "u", "alpha")}
    noise_sd = np.sqrt(2.0 * a * stepsize)
    for t in range(n_iters):
        u = u - stepsize * theta / s2 - alpha * u + noise_sd * rng.normal(size=theta.shape)
        theta = theta + u
        alpha = alpha + u**2 - stepsize
        out["theta"][t], out["u"][t], out["alpha"][t] = theta, u, alpha
    return out
