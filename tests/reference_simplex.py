"""An independent numpy/scipy reference for the simplex samplers (SPEC §9, thesis §5.2–5.4).

Nothing here uses ``sgmcmc`` or TensorFlow. The CIR step uses numpy's non-central χ² sampler
directly in the thesis' form (5.3.2) — not the Poisson–gamma mixture of ``sgmcmc`` — and
minibatch counts without replacement come from numpy's multivariate hypergeometric sampler.
Exact answers (Dirichlet marginals, Corollary 5.4.2's moments, Var[â] without replacement)
are closed forms.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

#: The running experiment (thesis §5.2.3): d = 10, N = 1000, α = 0.1.
RUNNING_COUNTS = np.array([800, 100, 100, 0, 0, 0, 0, 0, 0, 0])
RUNNING_ALPHA = 0.1
#: The dense experiment (thesis Appendix B.5): posterior Dir(counts + 0.1).
DENSE_COUNTS = np.array([112, 119, 92, 98, 95, 96, 102, 92, 91, 103])


def cir_step(theta: np.ndarray, a_hat: np.ndarray, h: float, rng: np.random.Generator) -> np.ndarray:
    """Exact CIR transition (5.3.2): θ' = (1 − e^(−h))/2 · W, W ~ χ²(2â, 2θe^(−h)/(1 − e^(−h)))."""
    theta, a_hat = np.broadcast_arrays(np.asarray(theta, float), np.asarray(a_hat, float))
    nonc = 2.0 * theta * np.exp(-h) / (1.0 - np.exp(-h))
    return (1.0 - np.exp(-h)) / 2.0 * rng.noncentral_chisquare(2.0 * a_hat, nonc)


def sgrld_step(theta: np.ndarray, a_hat: np.ndarray, h: float, rng: np.random.Generator) -> np.ndarray:
    """θ' = |θ + h(â − θ) + √(2hθ) ξ| (Patterson & Teh 2013, expanded mean)."""
    xi = rng.standard_normal(np.shape(theta))
    return np.abs(theta + h * (a_hat - theta) + np.sqrt(2.0 * h * theta) * xi)


def minibatch_a_hat(
    counts: np.ndarray, alpha: float, n: int, size: tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """â = α + (N/n)·(category counts of n rows drawn without replacement from a data set whose
    category counts are ``counts``); shape ``size + (d,)``."""
    counts = np.asarray(counts)
    N = counts.sum()
    draws = rng.multivariate_hypergeometric(counts, n, size=size)
    return alpha + (N / n) * draws


def var_a_hat(counts: np.ndarray, n: int) -> np.ndarray:
    """Var[â_j] for a minibatch of n rows drawn without replacement (hypergeometric):
    (N/n)² · n p(1 − p)(N − n)/(N − 1), p = counts_j / N."""
    counts = np.asarray(counts, float)
    N = counts.sum()
    p = counts / N
    return (N / n) ** 2 * n * p * (1 - p) * (N - n) / (N - 1)


def scir_moments(theta0, a, h: float, M: int, var_a=0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of SCIR after M steps from θ₀ (thesis Corollary 5.4.2, which we
    re-derived: the exact CIR mean/variance over time Mh, plus the recursion
    V_{m+1} = e^(−2h) V_m + (1 − e^(−h))² Var[â] for the minibatch part)."""
    e, e2 = np.exp(-M * h), np.exp(-2 * M * h)
    mean = theta0 * e + a * (1 - e)
    var = 2 * theta0 * (e - e2) + a * (1 - e) ** 2
    var = var + (1 - e2) * (1 - np.exp(-h)) / (1 + np.exp(-h)) * var_a
    return mean, var


def run(
    method: str,
    counts: np.ndarray,
    alpha: float,
    h: float,
    n: int,
    n_iters: int,
    rng: np.random.Generator,
    n_chains: int = 1,
) -> np.ndarray:
    """Run SCIR or SGRLD on a categorical data set with these category counts; returns ω of
    every iteration, shape (n_iters, n_chains, d). Start: ω₀ uniform, θ₀ = ω₀ Σ â (first minibatch)."""
    counts = np.asarray(counts)
    d = len(counts)
    step = cir_step if method == "scir" else sgrld_step
    a0 = minibatch_a_hat(counts, alpha, n, (n_chains,), rng)
    theta = np.full((n_chains, d), 1.0 / d) * a0.sum(-1, keepdims=True)
    out = np.empty((n_iters, n_chains, d))
    for m in range(n_iters):
        a_hat = minibatch_a_hat(counts, alpha, n, (n_chains,), rng)
        theta = step(theta, a_hat, h, rng)
        out[m] = theta / theta.sum(-1, keepdims=True)
    return out


def dirichlet_marginal_cdf(x: np.ndarray, a_post: np.ndarray, j: int) -> np.ndarray:
    """CDF of ω_j under Dir(a_post): Beta(a_j, Σa − a_j)."""
    return stats.beta.cdf(x, a_post[j], a_post.sum() - a_post[j])


def log_gamma_cdf(y: np.ndarray, a: float) -> np.ndarray:
    """CDF of log G, G ~ Gamma(a, 1): P(log G ≤ y) = P(a, e^y) (regularised lower gamma)."""
    return special.gammainc(a, np.exp(y))


def ks_distance(sample: np.ndarray, cdf) -> float:
    """Kolmogorov–Smirnov distance between a 1-d sample and a continuous CDF."""
    return float(stats.kstest(np.ravel(sample), cdf).statistic)


def censored_ks(sample: np.ndarray, cdf, lower: float) -> tuple[float, float]:
    """KS distance restricted to x ≥ ``lower``: sup over x ≥ lower of |F_n(x) − F(x)|, with
    values below ``lower`` (including 0) counted only through F_n. Returns (distance, p-value);
    the p-value of the full KS statistic is conservative for this restricted supremum."""
    x = np.sort(np.ravel(sample))
    n = len(x)
    i = np.arange(1, n + 1)
    keep = x >= lower
    f = cdf(x[keep])
    d = np.max(np.abs(i[keep] / n - f), initial=0.0)
    d = max(d, np.max(np.abs((i[keep] - 1) / n - f), initial=0.0))
    d = max(d, abs(np.sum(x < lower) / n - cdf(np.array(lower))))
    return float(d), float(stats.kstwo.sf(d, n))


def log_gamma_cdf_log(y: np.ndarray, a: float) -> np.ndarray:
    """P(log G ≤ y), G ~ Gamma(a, 1), valid far below float64's range: for y < −50 the
    small-x form P(a, x) = x^a/Γ(a + 1)·(1 + O(x)) is used in log space."""
    y = np.asarray(y, float)
    small = np.exp(np.minimum(a * y - special.gammaln(a + 1), 0.0))
    return np.where(y < -50, small, special.gammainc(a, np.exp(np.maximum(y, -50))))


def log_beta_cdf_log(y: np.ndarray, a: float, b: float) -> np.ndarray:
    """P(log X ≤ y), X ~ Beta(a, b), valid far below float64's range: for y < −50 the
    small-x form x^a/(a B(a, b))·(1 + O(x)) is used in log space."""
    y = np.asarray(y, float)
    small = np.exp(np.minimum(a * y - np.log(a) - special.betaln(a, b), 0.0))
    return np.where(y < -50, small, stats.beta.cdf(np.exp(np.maximum(y, -50)), a, b))
