"""``temperature=`` (SPEC §15, sgmcmc/tempering.py): the samplers, check_stepsize and sample draw
from p(θ | x)^(1/T), with the stepsize keeping its meaning.

The model: x_i ~ N(μ, 1), N = 1,000, prior μ ~ N(0, 10²); the posterior is N(m, 1/λ) with
λ = N + 1/100, and the tempered one N(m, T/λ). With every row in each minibatch (exact
gradients) the chains are linear Gaussian recursions, which gives two exact answers:

* SGLD with stepsize ε has the stationary variance T / (λ(1 − ελ/4)) at every T (the tempered
  chain is the T = 1 chain with its noise scaled by √T);
* from a start at m, with the same seed, the tempered SGLD and SGHMC chains are m + √T·(the
  T = 1 chain − m), draw for draw (the same normal draws, scaled), up to rounding.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc

N = 1_000
X = np.random.default_rng(5).normal(1.0, 1.0, N)
LAMBDA = N + 1 / 100
MEAN = X.sum() / LAMBDA


def log_lik(params, data):
    return -0.5 * tf.reduce_sum(tf.square(data["x"] - params["mu"]))


def log_prior(params):
    return -0.5 * tf.reduce_sum(tf.square(params["mu"])) / 100.0


def _run(method, temperature, start, n_iters, seed=1, n_chains=1, **kwargs):
    fn = getattr(sgmcmc, method)
    out = fn(log_lik, {"x": X}, {"mu": np.full(1, start)}, log_prior=log_prior, minibatch_size=N, n_iters=n_iters,
             verbose=False, seed=seed, n_chains=n_chains, dtype=tf.float64, temperature=temperature, **kwargs)
    return np.asarray(out["mu"])


@pytest.mark.parametrize("method, kwargs", [("sgld", dict(stepsize=2e-4)), ("sghmc", dict(stepsize=2e-5, alpha=0.1, L=3))])
def test_the_tempered_chain_is_the_chain_with_its_noise_scaled(method, kwargs):
    """Same seed, start at the mean, exact gradients: (θ_T − m) = √T (θ_1 − m) for every draw,
    T = 0.25 and 4 (float64; observed max relative difference ~1e-12). Fails when the stepsize
    is not multiplied by T (the drift then changes with T) and when the temperature is dropped
    (both run: fail). Observed: ≤ 2e-14 of the largest deviation."""
    cold_start = _run(method, 1.0, MEAN, 300, **kwargs)
    for temperature in (0.25, 4.0):
        tempered = _run(method, temperature, MEAN, 300, **kwargs)
        expected = MEAN + np.sqrt(temperature) * (cold_start - MEAN)
        np.testing.assert_allclose(tempered - MEAN, expected - MEAN, rtol=1e-8, atol=1e-12)


def test_sgld_tempered_variance_is_exact():
    """SGLD, ε = 2e-4 (ελ = 0.2), exact gradients, 4 chains × 20,000 iterations after 2,000:
    mean m and variance T/(λ(1 − ελ/4)) (the discretisation's own factor 1.0526, the same at
    every T). Calibrated over seeds 1–4 (batch-means MCSE, 40 batches): mean error −1.14 … +1.51
    MCSE, variance ratio 0.985–1.028 — the same at T = 0.25 and 4 (self-similar chains, the test
    above). Bounds: 4 MCSE and ±6 %. Broken variants run: the stepsize not scaled by T (ratio
    1.19 at T = 0.25) and the temperature dropped (4.13) fail, as do the test above's."""
    eps = 2e-4
    for temperature in (0.25, 4.0):
        mu = _run("sgld", temperature, MEAN, 22_000, n_chains=4, stepsize=eps)[:, 2_000:, 0]
        exact_var = temperature / (LAMBDA * (1 - eps * LAMBDA / 4))
        batches = mu.reshape(4, 40, -1).mean(axis=2).ravel()
        mcse = batches.std(ddof=1) / np.sqrt(batches.size)
        assert abs(mu.mean() - MEAN) < 4 * mcse, (temperature, mu.mean(), MEAN, mcse)
        ratio = mu.var() / exact_var
        assert 0.94 < ratio < 1.06, (temperature, ratio)


def test_sgldcv_tempered_variance_is_exact():
    """SGLD-CV at T = 4, minibatches of 100: for a Gaussian log-likelihood the control variate's
    estimate is exact (the gradient is linear in μ), so the chain is exact-gradient SGLD on the
    tempered posterior: variance T/(λ(1 − ελ/4)). The given opt_stepsize is multiplied by T with
    the stepsize (the same search). Seeds 1–3: mean error −0.63 … +0.46 MCSE, ratio 0.970–1.001;
    bounds as above."""
    eps, temperature = 2e-4, 4.0
    out = sgmcmc.sgldcv(log_lik, {"x": X}, {"mu": np.zeros(1)}, eps, 1e-4, log_prior=log_prior, minibatch_size=100,
                        n_iters=10_000, verbose=False, seed=1, n_chains=4, dtype=tf.float64, temperature=temperature)
    mu = np.asarray(out["mu"])[:, :, 0]
    batches = mu.reshape(4, 20, -1).mean(axis=2).ravel()
    mcse = batches.std(ddof=1) / np.sqrt(batches.size)
    assert abs(mu.mean() - MEAN) < 4 * mcse
    assert 0.94 < mu.var() / (temperature / (LAMBDA * (1 - eps * LAMBDA / 4))) < 1.06
    assert out.settings["temperature"] == temperature


def test_the_stepsize_check_speaks_in_the_users_units():
    """SGLD at ε = 2e-3 (ελ = 2: sd 1.41× the posterior's) with exact gradients warns with the
    same words at T = 1 and T = 0.25 — the user's stepsize and log p's curvature, not the
    internal εT and λ/T (checked to fail without the conversion: "stepsize 0.0005", "largest
    curvature 4e+03"); check_stepsize(temperature=) names the same safe stepsize; with
    minibatch noise (which is not tempered) a colder posterior needs a smaller stepsize."""
    messages = {}
    for temperature in (1.0, 0.25):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run("sgld", temperature, MEAN, 10, stepsize=2e-3)
        messages[temperature] = [str(w.message) for w in caught if issubclass(w.category, sgmcmc.StepsizeWarning)]
    assert len(messages[1.0]) == 1 and messages[0.25] == messages[1.0], messages
    assert "stepsize 0.002 is large" in messages[1.0][0] and "largest curvature 1e+03" in messages[1.0][0]
    args = (log_lik, {"x": X}, {"mu": np.full(1, MEAN)}, 2e-3, log_prior)
    checks = {t: sgmcmc.check_stepsize(*args, warn=False, dtype=tf.float64, temperature=t) for t in (1.0, 0.25)}
    assert checks[0.25].stepsize == 2e-3
    assert checks[0.25].safe_stepsize == pytest.approx(checks[1.0].safe_stepsize, rel=1e-6)
    assert checks[0.25].curvature == pytest.approx(LAMBDA, rel=1e-3)
    noisy = {t: sgmcmc.check_stepsize(*args, warn=False, dtype=tf.float64, temperature=t, minibatch_size=10).safe_stepsize
             for t in (1.0, 0.25)}
    assert noisy[0.25] < 0.9 * noisy[1.0], noisy


def test_sample_draws_the_tempered_posterior():
    """sample(temperature=0.25): mean m within 4 MCSE, sd √(T/λ) within 10 % (seeds 1–3: error
    −0.63 … −0.17 MCSE, sd ratios 0.983–1.009, 6 s each; with the temperature dropped the sd
    ratio is 2)."""
    out = sgmcmc.sample(log_lik, {"x": X}, {"mu": np.zeros(1)}, log_prior, seed=1, verbose=False, dtype=tf.float64,
                        temperature=0.25)
    table = out.summary()
    assert out.report.converged
    assert abs(float(table["mean"].iloc[0]) - MEAN) < 4 * float(table["mcse_mean"].iloc[0])
    assert abs(float(table["sd"].iloc[0]) / np.sqrt(0.25 / LAMBDA) - 1) < 0.1


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "cold", True])
def test_a_bad_temperature_is_refused_before_any_work(bad):
    with pytest.raises(ValueError, match="temperature=.* must be a positive number"):
        sgmcmc.sgld_setup(log_lik, {"x": X}, {"mu": np.zeros(1)}, 1e-4, temperature=bad)
    with pytest.raises(ValueError, match="temperature=.* must be a positive number"):
        sgmcmc.check_stepsize(log_lik, {"x": X}, {"mu": np.zeros(1)}, 1e-4, temperature=bad)
    with pytest.raises(ValueError, match="temperature=.* must be a positive number"):
        sgmcmc.sample(log_lik, {"x": X}, {"mu": np.zeros(1)}, temperature=bad)
