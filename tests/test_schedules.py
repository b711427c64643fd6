"""Stepsize schedules (SPEC §8): their values, and that a decaying one removes SGLD's
discretisation inflation of the variance.

Target: x_i ~ N(θ, 1), i = 1..100, flat prior, minibatch = all rows (exact gradients), posterior
N(x̄, s²), s² = 1/100. SGLD with a constant ε is the AR(1) θ' − m = (1 − ε/2s²)(θ − m) + √ε ξ,
stationary variance s²/(1 − ε/4s²): 1.143 s² at ε = 0.5 s². With polynomial(0.5 s², τ = 50,
κ = 1) the stepsize falls to ≈ 0.012 s² over the last 1,000 of 2,000 iterations; the exact
variance there (the recursion v' = (1 − ε_t/2s²)² v + ε_t from v = s², averaged over the kept
window) is 1.0044 s². Calibration (1,000 chains from exact draws, last 1,000 iterations, seeds
1–3): constant 1.139, 1.145, 1.141; schedule 1.004, 1.033, 1.007. Tolerance ±0.06 (2× the
largest deviation). A schedule evaluated at a fixed iteration (``stepsize_at`` ignoring ``t``)
gives the constant case's 1.14 and fails the schedule case by 0.13.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc.schedules import cyclical, polynomial

S2 = 0.01


def test_polynomial_values():
    schedule = polynomial(0.3, tau=10.0, kappa=0.55)
    for t in (1, 2, 11, 1000):
        assert schedule.at(t) == pytest.approx(0.3 * (1 + (t - 1) / 10.0) ** -0.55, rel=1e-12)


def test_cyclical_values():
    schedule = cyclical(0.2, n_cycles=4, n_iters=100)  # period 25
    for t in (1, 2, 13, 25, 26, 100, 101):
        k = (t - 1) % 25
        assert schedule.at(t) == pytest.approx(0.1 * (math.cos(math.pi * k / 25) + 1), rel=1e-12)
    assert schedule.at(26) == pytest.approx(0.2)


def test_bad_schedules_refused():
    with pytest.raises(ValueError, match="tau"):
        polynomial(0.1, tau=0, kappa=1)
    with pytest.raises(ValueError, match="n_cycles"):
        cyclical(0.1, n_cycles=0, n_iters=10)


@pytest.fixture(scope="module")
def gaussian():
    x = np.random.default_rng(11).normal(size=100)

    def log_lik(params, dataset):
        return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["theta"]))

    return log_lik, {"x": x}, float(x.mean())


def _exact_variance_ratio(stepsize, n_iters=2000, burn_in=1000) -> float:
    """The chain's variance / s², averaged over the kept iterations, from the exact recursion."""
    v, kept = S2, []
    for t in range(1, n_iters + 1):
        eps = stepsize.at(t) if callable(stepsize) else stepsize
        v = (1 - eps / (2 * S2)) ** 2 * v + eps
        if t > burn_in:
            kept.append(v)
    return float(np.mean(kept)) / S2


@pytest.mark.parametrize(
    "stepsize", [0.5 * S2, polynomial(0.5 * S2, tau=50.0, kappa=1.0)], ids=["constant", "polynomial"]
)
def test_decaying_schedule_removes_the_variance_inflation(gaussian, stepsize):
    log_lik, data, mean = gaussian
    expected = _exact_variance_ratio(stepsize)
    assert expected == pytest.approx(1.143 if not callable(stepsize) else 1.0044, abs=1e-3)
    k = 1000
    rng = np.random.default_rng(1)
    starts = [{"theta": mean + math.sqrt(S2) * rng.normal()} for _ in range(k)]
    out = sgmcmc.sgld(log_lik, data, starts, {"theta": stepsize}, minibatch_size=100, n_iters=2000,
                      burn_in=1000, verbose=False, seed=1, n_chains=k, dtype=tf.float64)
    ratio = np.mean((out["theta"] - mean) ** 2) / S2
    assert ratio == pytest.approx(expected, abs=0.06)


def test_a_plain_callable_is_a_schedule_like_any_other(gaussian):
    """One stepsize rule for every sampler (issue 19): a callable h(t) written with TF ops is
    accepted wherever a schedule is (it was accepted only by scir/sgrld) and gives the chain of
    the equivalent :class:`polynomial`, bit for bit; one that is not positive at t = 1 is
    refused with the value it gave."""
    log_lik, data, mean = gaussian
    schedule = polynomial(0.5 * S2, tau=50.0, kappa=1.0)
    args = dict(minibatch_size=100, n_iters=200, verbose=False, seed=3, dtype=tf.float64)
    by_object = sgmcmc.sgld(log_lik, data, {"theta": mean}, schedule, **args)
    by_lambda = sgmcmc.sgld(log_lik, data, {"theta": mean}, lambda t: schedule(t), **args)
    np.testing.assert_array_equal(by_object["theta"], by_lambda["theta"])
    with pytest.raises(ValueError, match="gives -1.0 at t=1"):
        sgmcmc.sgld_setup(log_lik, data, {"theta": mean}, lambda t: -tf.ones([], tf.float64) * tf.cast(t, tf.float64))
