"""An independent numpy OSGLD on a linear regression, for calibrating tests/test_osgld.py.

Written from El hanchi (2018) §2.3 (Eqs. 3, 8, 9, 10, 15, 16, 17 with the seeds' erratum, and
Algorithm 1), not from sgmcmc's code: the model is y_i ~ N(x_iᵀβ, 1) with a N(0, I/τ²) prior
(``prior_precision`` = 1/τ², 0 for flat); the per-row gradients are x_i(y_i − x_iᵀβ) in closed
form; D, H⁻¹ and the noise covariance are dense matrices (``np.linalg.inv``), the noise is drawn
through the eigen-square-root of the PSD-projected covariance. The library's documented choices
are reproduced: f = 1 − n/N (rows without replacement), C averaged with weight max(1/t, 1/W),
W = max(100, ⌈50p/(n − 1)⌉) (p = d, or 1 in the diagonal form),
θ fixed until t·(n − 1) ≥ 4d (4 in the diagonal form), the reworked Eq. 17 (``burn_in_holds``) with
w = ⌈1/k⌉ after at least w moving iterations. ``diagonal=True`` keeps only the diagonals of C and G.
"""

from __future__ import annotations

import math

import numpy as np


def osgld_chain(X, y, start, n, c, n_iters, seed, prior_precision=0.0, diagonal=False, stop_when_ready=False):
    """Returns ``(draws [n_iters, d], ready_at)``: the state after each iteration, and the first
    iteration at which Eq. 17 held (0 if never). ``stop_when_ready`` stops there."""
    rng = np.random.default_rng(seed)
    big_n, d = X.shape
    f = 1.0 - n / big_n
    G = prior_precision * np.eye(d)
    C = np.zeros((d, d))
    theta = np.array(start, float)
    history = []
    ready_at = 0
    out = np.empty((n_iters, d))
    rank_needed = 4 if diagonal else 4 * d
    c_memory = max(100, math.ceil(50 * (1 if diagonal else d) / (n - 1)))
    first_move = max(1, math.ceil(rank_needed / (n - 1)))
    for t in range(1, n_iters + 1):
        idx = rng.choice(big_n, size=n, replace=False)
        rows = X[idx] * (y[idx] - X[idx] @ theta)[:, None]  # ∇ log p(x_i | β)
        Y = -G @ theta + big_n / n * rows.sum(0)  # Eq. 3
        weight = max(1.0 / t, 1.0 / c_memory)
        C = (1 - weight) * C + weight * np.cov(rows, rowvar=False, ddof=1)
        Cu = np.diag(np.diag(C)) if diagonal else C
        H = big_n * Cu + G  # Eq. 9
        Hinv = np.linalg.inv(H)
        r = np.linalg.eigvalsh(Hinv).min() / np.linalg.eigvalsh(Hinv @ (big_n * Cu) @ Hinv).max()  # Eq. 15
        k = min(c, 4 * max(n / (big_n + n), r / (r + big_n / n)))  # Eq. 16
        D = k / 2 * Hinv  # Eq. 10
        S = 2 * D - f * big_n**2 / n * D @ Cu @ D - D @ H @ D  # Eq. 8
        lam, V = np.linalg.eigh(0.5 * (S + S.T))
        root = V * np.sqrt(np.clip(lam, 0, None))
        if t >= first_move:
            theta = theta + D @ Y + root @ rng.normal(size=d)
        out[t - 1] = theta
        history.append(Y)
        # The burn-in test (Eq. 17 reworked, sgmcmc.step.dynamics.osgld's docstring): window ⌈1/k⌉
        w = math.ceil(1.0 / k)
        if not ready_at and t - first_move + 1 >= w:
            if burn_in_holds(np.mean(history[-w:], axis=0), H, f * big_n**2 / n * Cu, k, w):
                ready_at = t
                if stop_when_ready:
                    return out[:t], ready_at
        history = history[-200:]
    return out, ready_at


def burn_in_holds(mean, H, noise_cov, k, w, q=0.8):
    """The window mean whitened by H^-1/2, its covariance a I + b V_w from the pairwise covariances
    of the stationary linear recursion (double loop over the window), then both bounds at level q
    (scipy's exact normal and chi-square quantiles)."""
    from scipy import stats

    rho = 1 - k / 2
    a = sum(rho ** abs(i - j) for i in range(w) for j in range(w)) / w**2  # Cov(u_i, u_j)
    cross = sum(rho ** (j - i - 1) * k / 2 for i in range(w) for j in range(i + 1, w))  # Cov(u_j, e_i), j > i
    b = (w - 2 * cross) / w**2  # + Var e (w terms) − 2 Σ Cov(u_j, e_i)
    lam, V = np.linalg.eigh(H)
    white = V / np.sqrt(lam)  # columns: H^-1/2 in H's eigenbasis
    y = white.T @ mean
    nu, U = np.linalg.eigh(white.T @ noise_cov @ white)
    z = (U.T @ y) / np.sqrt(a + b * np.clip(nu, 0, None))
    d = len(z)
    each = stats.norm.ppf((1 + q ** (1 / d)) / 2)
    return np.max(np.abs(z)) <= each and np.sum(z**2) <= stats.chi2.ppf(q, d)


# -- the test model and the calibration the test records --------------------------------------
N_ROWS, EIGS, BETA = 1000, np.array([1.0, 0.03, 0.001]), np.array([0.5, -1.0, 2.0])
#: name -> (rotated, prior_precision, n, c, diagonal)
CASES = {
    "axis": (False, 0.0, 100, 0.1, False),
    "rotated": (True, 1.0, 100, 0.1, False),
    "large_k": (True, 0.0, 500, 1.0, False),
    "diagonal": (False, 0.0, 100, 0.1, True),
}
N_ITERS, BURN_IN, K = 1500, 150, 4


def linear_gaussian(rotated: bool, prior_precision: float = 0.0):
    """X (N × 3, feature covariance with eigenvalues EIGS, so the posterior precision XᵀX + G
    has condition number ~10³), y, the exact posterior mean and marginal sds."""
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0] if rotated else np.eye(3)
    X = rng.normal(size=(N_ROWS, 3)) * np.sqrt(EIGS) @ Q.T
    y = X @ BETA + rng.normal(size=N_ROWS)
    A = X.T @ X + prior_precision * np.eye(3)
    mu = np.linalg.solve(A, X.T @ y)
    return X, y, mu, np.sqrt(np.diag(np.linalg.inv(A)))


def calibrate(name: str, seeds=range(3)):
    """sd ratios (sampled / exact) of the pooled K chains, one row per seed."""
    rotated, prior, n, c, diagonal = CASES[name]
    X, y, mu, sd = linear_gaussian(rotated, prior)
    rows = []
    for s in seeds:
        x = np.concatenate([
            osgld_chain(X, y, mu + 3 * sd, n, c, N_ITERS, 10 * s + k, prior, diagonal)[0][BURN_IN:] for k in range(K)
        ])
        rows.append(((x.mean(0) - mu) / sd, x.std(0) / sd))
    return rows


def burn_in_times(seeds=range(10)):
    """The burn-in test's first-hold iteration, axis case, single chains from mu + 20 sd."""
    X, y, mu, sd = linear_gaussian(False)
    return [osgld_chain(X, y, mu + 20 * sd, 100, 0.1, 5000, s, stop_when_ready=True)[1] for s in seeds]


if __name__ == "__main__":
    for case in CASES:
        for mean, ratio in calibrate(case):
            print(case, "mean/sd", np.round(mean, 3), "sd ratio", np.round(ratio, 3), flush=True)
    print("burn-in", burn_in_times(), flush=True)
