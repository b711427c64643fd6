"""Independent reference for SGHMC's stationary variance on a Gaussian target with exact gradients.

On N(m, s²) with exact gradients one SGHMC iteration is linear-Gaussian in θ:
θ_{t+1} − m = A (θ_t − m) + Σ_j b_j ξ_j, so the chain's stationary variance is exactly
Σ b_j² / (1 − A²). This module tracks A and the b_j through the L inner steps of one iteration
(fresh momentum ν ~ N(0, ε), then L kicks and drifts), for the package's leapfrog start (first
kick a half kick) and for the R package's full first kick.
"""

from __future__ import annotations

import numpy as np


def sghmc_stationary_variance(s2: float, stepsize: float, alpha: float, L: int, half_first_kick: bool = True) -> float:
    """Exact stationary variance of SGHMC's θ on N(m, s2), exact gradients."""
    n_noise = L + 1
    # Coefficients over [θ_t − m, ξ_0, …, ξ_L].
    theta = np.zeros(1 + n_noise)
    theta[0] = 1.0
    nu = np.zeros(1 + n_noise)
    nu[1] = np.sqrt(stepsize)
    for step in range(L):
        f = 0.5 if (half_first_kick and step == 0) else 1.0
        kick_noise = np.zeros(1 + n_noise)
        kick_noise[2 + step] = np.sqrt(2.0 * f * alpha * stepsize)
        nu = nu + f * stepsize * (-theta / s2) - alpha * nu + kick_noise
        theta = theta + nu
    a, b = theta[0], theta[1:]
    return float(np.sum(b**2) / (1.0 - a**2))
