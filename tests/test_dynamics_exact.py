"""The plain samplers' own dynamics, pinned where the answer is exact (issue 12, item 5).

Target: x_i ~ N(θ, 1), i = 1..100, flat prior, minibatch = all rows, so the gradient is exact
(no minibatch noise hides the sampler's own noise) and the posterior is N(x̄, s²), s² = 1/100.
50 chains (``n_chains``, one compiled loop) start at exact posterior draws, float64.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from reference_dynamics import sgld_stationary_variance, sgnht_run

import sgmcmc

N_ROWS = 100
S2 = 1.0 / N_ROWS
K = 50


@pytest.fixture(scope="module")
def target():
    x = np.random.default_rng(12).normal(size=N_ROWS)

    def log_lik(params, dataset):
        return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["theta"]))

    return log_lik, {"x": x}, float(x.mean())


def _starts(mean, seed):
    rng = np.random.default_rng(seed)
    return [{"theta": mean + np.sqrt(S2) * rng.normal()} for _ in range(K)]


def test_sgld_stationary_variance_is_exact(target):
    """SGLD with exact gradients is the AR(1) process θ' − m = (1 − ε/(2s²))(θ − m) + √ε ξ, whose
    stationary variance is s²/(1 − ε/(4s²)) exactly (tests/reference_dynamics.py). At ε = 0.5 s²
    that is 1.143 s²; noise of doubled variance would give 2.29 s², a drift of ε g instead of
    (ε/2) g 0.67 s².

    Calibration (100 burn-in, 1,000 kept, seeds 1–5), sampled / exact variance:
    1.003 1.012 0.984 0.992 0.969; mean error 0.010 0.003 0.008 0.007 0.017 s.
    Tolerances ±0.09 and 0.1 s (3× and 6× the largest deviation seen).
    """
    log_lik, dataset, mean = target
    eps = 0.5 * S2
    out = sgmcmc.sgld(
        log_lik, dataset, _starts(mean, 1), eps, minibatch_size=N_ROWS, n_iters=1_100, burn_in=100,
        verbose=False, seed=1, n_chains=K, dtype=tf.float64,
    )["theta"]
    assert out.shape == (K, 1_000)
    exact = sgld_stationary_variance(S2, eps)
    assert exact == pytest.approx(S2 / (1 - eps / (4 * S2)))
    assert np.mean((out - mean) ** 2) / exact == pytest.approx(1.0, abs=0.09)
    assert abs(out.mean() - mean) < 0.1 * np.sqrt(S2)


def test_sgnht_matches_an_independent_implementation(target):
    """SGNHT with exact gradients against a numpy run of the same recursion (SPEC §3) over
    10,000 chains with the same protocol: start at exact posterior draws, u ~ N(0, ε), α = a,
    ε = 0.05 s², a = 0.1, 1,300 iterations, the first 300 dropped.

    Three statistics, all from the chain's output: θ's variance around the exact mean; the
    thermostat α, rebuilt exactly from the path (u_t = θ_t − θ_{t−1}, α_t = a + Σ (u_j² − ε));
    and mean u². The thermostat is what pins the noise scale: it settles where the friction
    balances the injected noise, so noise of doubled variance leaves θ's variance nearly
    unchanged but moves mean α from 0.106 to about 0.2. Reference: variance 0.952 s²,
    mean α 0.1062, mean u² 1.005 ε.

    Calibration (50 chains, seeds 1–5), package / reference: variance 1.002 1.009 0.986 0.970
    1.001; mean α − reference −0.0004 +0.0007 −0.0009 +0.0008 −0.0015; mean u² 1.001 1.003 0.995 0.987 1.009.
    Tolerances: ±0.09, ±0.005, ±0.04 (about 3× the largest deviation seen).
    """
    log_lik, dataset, mean = target
    eps, a, n_iters, drop = 0.05 * S2, 0.1, 1_300, 300
    starts = _starts(mean, 1)
    out = sgmcmc.sgnht(
        log_lik, dataset, starts, eps, minibatch_size=N_ROWS, a=a, n_iters=n_iters, verbose=False, seed=1,
        n_chains=K, dtype=tf.float64,
    )["theta"]
    path = np.concatenate([np.array([s["theta"] for s in starts])[:, None], out], axis=1)  # (K, 1 + n_iters)
    u = np.diff(path, axis=1)
    alpha = a + np.cumsum(u**2 - eps, axis=1)
    ref = sgnht_run(np.sqrt(S2) * np.random.default_rng(0).normal(size=10_000), S2, eps, a, n_iters, seed=1)
    ref_var, ref_alpha, ref_u2 = (np.mean(ref["theta"][drop:] ** 2), ref["alpha"][drop:].mean(), np.mean(ref["u"][drop:] ** 2))
    assert ref_alpha == pytest.approx(a, rel=0.1)  # the thermostat's equilibrium is near a
    assert np.mean((path[:, 1 + drop :] - mean) ** 2) / ref_var == pytest.approx(1.0, abs=0.09)
    assert alpha[:, drop:].mean() == pytest.approx(ref_alpha, abs=0.005)
    assert np.mean(u[:, drop:] ** 2) / ref_u2 == pytest.approx(1.0, abs=0.04)
