"""Independent reference for SGHMC's stationary variance on a Gaussian target with minibatch noise,
with and without Chen et al. (2014)'s noise correction.

Target N(m, 1/λ); each kick's gradient estimate is −λ(θ − m) plus noise of variance V,
independent of θ (a Gaussian mean model: the per-row gradients x_i − θ spread the same at
every θ). One iteration: ν ~ N(0, ε); then L times (the first a half kick, fraction f = ½)
ν ← (1 − α)ν + fε·g(θ) + N(0, w_f), θ ← θ + ν, with the injected variance

    w_f = 2fαε                     (no correction, β̂ = 0)
    w_f = [2fαε − c·(fε)²V]₊       (corrected: c = 1; the variants below change c or f),

so the iteration is linear in (θ, ν) with additive noise. This module propagates the 2 × 2
covariance of (θ − m, ν) through the kicks and drifts (not the coefficient vectors of
``SGHMC.sd_ratio``): Var θ_{t+1} = a·Var θ_t + b, whose fixed point b/(1 − a) is the chain's
stationary variance. V is taken as known (the kernel's V̂ is its unbiased estimate; the
injected variance is linear in V̂, so the expectation is the same while no kick is clipped).
"""

from __future__ import annotations

import numpy as np


def stationary_variance(
    precision: float,
    stepsize: float,
    alpha: float,
    L: int,
    gradient_variance: float,
    correction: float = 0.0,
    half_kick_correction_fraction: float | None = None,
) -> float:
    """Stationary Var θ of the iteration above.

    ``correction`` is c (0: uncorrected, 1: Chen's β̂ = ½ηV̂, η = fε); the half kick's
    correction uses the fraction ``half_kick_correction_fraction`` in (fε)² (default ½, its own
    step; 1 models a kernel that forgets the half kick's own step).
    """
    lam, eps, V = float(precision), float(stepsize), float(gradient_variance)

    def one_iteration(var_theta: float) -> float:
        cov = np.array([[var_theta, 0.0], [0.0, eps]])  # the momentum is refreshed
        for j in range(L):
            f = 0.5 if j == 0 else 1.0
            g = f if j > 0 or half_kick_correction_fraction is None else half_kick_correction_fraction
            injected = max(2.0 * f * alpha * eps - correction * (g * eps) ** 2 * V, 0.0)
            kick = np.array([[1.0, 0.0], [-f * eps * lam, 1.0 - alpha]])
            cov = kick @ cov @ kick.T + np.diag([0.0, injected + (f * eps) ** 2 * V])
            drift = np.array([[1.0, 1.0], [0.0, 1.0]])
            cov = drift @ cov @ drift.T
        return float(cov[0, 0])

    b = one_iteration(0.0)
    a = one_iteration(1.0) - b
    if not abs(a) < 1.0:
        return np.inf
    return b / (1.0 - a)
