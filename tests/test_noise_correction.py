"""SGHMC's minibatch-noise correction, ``noise_correction=True`` (Chen, Fox & Guestrin 2014 §3.2;
issue 46.2), against exact answers.

Model: x_i, i = 1..N = 100, centred and scaled to sample variance S² = 50 exactly,
log_lik = −½Σ(x_i − θ)², flat prior: the posterior is N(0, 1/N), λ = N. The per-row gradients
x_i − θ spread by S² at every θ, so minibatches of n = 50 rows drawn without replacement give the
gradient noise V = (1 − n/N)(N²/n)S² = 5,000 (the factor 1 − n/N = ½ makes dropping it visible).
At ε = 2·10⁻⁴, α = 1, L = 3: μ = ελ = 0.02 and q = εV = 1 = α. α = 1 because there the
exact-gradient chain is itself within 1 % of the posterior (at α = 0.1 SGHMC's discretisation
keeps 0.90 of the variance whatever the noise, which would blur "matches the posterior").

Exact stationary variances in units of 1/N (tests/reference_noise_correction.py, a covariance
recursion; ``SGHMC.sd_ratio`` agrees to 1e-15): uncorrected 1.466; corrected 1.009; broken
corrections: sign flipped 1.922, 1 − n/N dropped or β̂ without the ½ 0.553, the half kick's β̂
with ε instead of its own step ε/2 0.865.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import tensorflow as tf
from reference_noise_correction import stationary_variance

import sgmcmc
from sgmcmc.step.contract import BoundEstimator, Minibatch, Minibatches
from sgmcmc.step.dynamics import KernelContext
from sgmcmc.step.dynamics.sghmc import SGHMC, gradient_noise_variance

N_ROWS, BATCH, S2 = 100, 50, 50.0
ALPHA, L, STEPSIZE = 1.0, 3, 2e-4
GRADIENT_NOISE = (1 - BATCH / N_ROWS) * N_ROWS**2 / BATCH * S2


def gaussian_rows() -> np.ndarray:
    x = np.random.default_rng(5).normal(size=N_ROWS)
    x = x - x.mean()
    return x * np.sqrt(S2 / x.var(ddof=1))


def log_lik(params, dataset):
    return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["theta"]))


def exact_ratio(correction: float) -> float:
    """The chain's stationary variance over the posterior's (1/N)."""
    return N_ROWS * stationary_variance(N_ROWS, STEPSIZE, ALPHA, L, GRADIENT_NOISE, correction)


def test_the_reference_and_the_stepsize_checks_recursion_agree():
    mu, q = STEPSIZE * N_ROWS, STEPSIZE * GRADIENT_NOISE
    for corrected in (False, True):
        assert SGHMC.sd_ratio(mu, q, ALPHA, L, noise_correction=corrected) ** 2 == pytest.approx(
            exact_ratio(corrected), rel=1e-12
        )
    # below q = 2α the correction cancels the noise term: the exact-gradient chain
    assert SGHMC.sd_ratio(mu, q, ALPHA, L, noise_correction=True) == pytest.approx(SGHMC.sd_ratio(mu, 0.0, ALPHA, L), rel=1e-12)
    assert exact_ratio(True) == pytest.approx(1.0, abs=0.01)
    # beyond it the clipped kicks keep part of the excess (q = 3α: 1.418 against 2.379 uncorrected)
    clipped = N_ROWS * stationary_variance(N_ROWS, STEPSIZE, ALPHA, L, 3.0 / STEPSIZE, 1.0)
    assert SGHMC.sd_ratio(mu, 3.0, ALPHA, L, noise_correction=True) ** 2 == pytest.approx(clipped, rel=1e-12)


def test_corrected_sghmc_has_the_posterior_variance_where_plain_sghmc_is_too_wide():
    x = gaussian_rows()
    k, n_iters, skip = 32, 650, 50  # the first 50 draws (150 kicks) let the uncorrected chains widen
    rng = np.random.default_rng(1)
    starts = [{"theta": rng.normal() / np.sqrt(N_ROWS)} for _ in range(k)]  # exact posterior draws
    common = dict(
        stepsize=STEPSIZE, minibatch_size=BATCH, alpha=ALPHA, L=L, n_iters=n_iters, verbose=False, seed=1,
        n_chains=k, dtype=tf.float64,
    )
    with pytest.warns(sgmcmc.StepsizeWarning, match="minibatch noise"):  # the check sees the noise
        plain = sgmcmc.sghmc(log_lik, {"x": x}, starts, **common)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sgmcmc.StepsizeWarning)  # and knows that it is corrected
        corrected = sgmcmc.sghmc(log_lik, {"x": x}, starts, noise_correction=True, **common)
    # recorded only when on (runs and checkpoints made before the option keep their settings)
    assert corrected.settings["noise_correction"] is True and "noise_correction" not in plain.settings
    # Sampled / exact stationary variance (exact: 1.466/N uncorrected, 1.009/N corrected), seeds
    # 1–8 of the starts and the chain (32 chains × 600 draws, float64):
    #   uncorrected: 0.991 1.015 1.005 0.985 0.949 1.024 1.026 1.074
    #   corrected:   0.996 1.031 0.999 0.999 0.945 1.021 1.016 1.077
    # Tolerance ±0.23, 3× the largest deviation. An uncorrected chain is 1.45× the corrected
    # prediction; the broken corrections measured 1.877 (sign flipped) and 0.583 (1 − n/N dropped;
    # β̂ without the ½); the half kick's own step is tested exactly below.
    for out, correction in ((plain, 0.0), (corrected, 1.0)):
        sampled = N_ROWS * np.mean(out["theta"][:, skip:] ** 2)
        assert sampled / exact_ratio(correction) == pytest.approx(1.0, abs=0.23)


def one_iteration(sampler, rows: dict[str, np.ndarray], params: dict, aux: dict):
    """The sampler's kernel ``one_step`` at t = 1, eagerly, kick j on the minibatch ``rows[name][j]``
    (``[L, K, n, …]``)."""
    shape = next(iter(rows.values())).shape[:3]
    block = {"rows": {k: tf.constant(v) for k, v in rows.items()}, "indices": tf.zeros(shape, tf.int64)}
    t = tf.constant(1, tf.int64)
    sampler.rng.begin(t)
    estimate = BoundEstimator(sampler.estimator, Minibatches(block), sampler.rng, t)
    return sampler.kernel.one_step(params, aux, estimate, sampler.rng, t)


def test_the_kicks_where_beta_exceeds_alpha_are_clipped_counted_and_the_check_warns():
    """At temperature ½, chain 0's first two kicks on a minibatch whose V̂ puts q̂ = 3α (2α < q̂ <
    4α): the half kick's bracket εα − ε²V̂/4 stays positive, the full kick's 2εα − ε²V̂ is clipped;
    its third kick's minibatch of equal rows has V̂ = 0; chain 1 sees equal rows only. The
    tempered rows are what make q̂ = 3α: the stepsize εT times V̂/T² (untempered rows would give
    0.75α and clip nothing)."""
    x = gaussian_rows()
    temperature, k = 0.5, 2
    batch = x[:BATCH]
    v_hat = (1 - BATCH / N_ROWS) * N_ROWS**2 / BATCH * batch.var(ddof=1) / temperature**2
    stepsize = 3.0 * ALPHA / (temperature * v_hat)  # the chain's stepsize is stepsize × T
    sampler = sgmcmc.sghmc_setup(
        log_lik, {"x": x}, {"theta": 0.0}, stepsize, minibatch_size=BATCH, alpha=ALPHA, L=L, n_chains=k,
        dtype=tf.float64, temperature=temperature, noise_correction=True,
    )
    with pytest.warns(sgmcmc.StepsizeWarning, match="minibatch noise"):  # the check models the clipping
        sgmcmc.init_sess(sampler)
    kernel = sampler.kernel
    params = {"theta": tf.zeros([k], tf.float64)}
    rows = np.zeros((L, k, BATCH))
    rows[:2, 0] = batch
    params, aux, _ = one_iteration(sampler, {"x": rows}, params, kernel.init_aux(params, sampler.rng))
    np.testing.assert_array_equal(aux["clipped"].numpy(), [1, 0])
    assert int(aux["kicks"]) == L
    np.testing.assert_allclose(kernel.clipped_fraction(aux), [1 / L, 0.0])
    assert np.all(np.isfinite(params["theta"].numpy()))


def test_the_variance_is_that_of_the_estimate_used():
    """V̂ = f (N²/n) s² of the rows the estimator sums: the plain estimator's per-row gradients
    (f = 1 − n/N without replacement, 1 with), the control variate's differences from the anchor."""
    rng = np.random.default_rng(3)
    n_rows, n, k = 40, 8, 3
    x = rng.normal(size=n_rows)
    y = 1.5 * x + rng.normal(size=n_rows)

    def regression(params, dataset):
        return -0.5 * tf.reduce_sum(tf.square(dataset["y"] - params["b"] * dataset["x"]))

    anchor = 0.7
    sampler = sgmcmc.sghmccv_setup(
        regression, {"x": x, "y": y}, {"b": anchor}, 1e-3, minibatch_size=n, L=L, n_chains=k, n_iters_opt=0,
        dtype=tf.float64, noise_correction=True, verbose=False,
    )
    assert sampler.kernel.noise_correction
    index = np.stack([rng.choice(n_rows, n, replace=False) for _ in range(k)])
    b = np.array([0.2, 1.5, 3.0])
    _, rows = sampler.estimator.estimate_and_rows(
        {"b": tf.constant(b)}, Minibatch({"x": tf.constant(x[index]), "y": tf.constant(y[index])}, tf.constant(index))
    )
    grad = lambda beta: x[index] * (y[index] - beta * x[index])  # noqa: E731
    expected_rows = grad(b[:, None]) - grad(anchor)  # = −x_i²(b − b̂)
    np.testing.assert_allclose(rows["b"].numpy(), expected_rows, rtol=1e-12)
    for replace, fpc in ((False, 1 - n / n_rows), (True, 1.0)):
        v_hat = gradient_noise_variance(rows, n_rows, n, replace)["b"].numpy()
        np.testing.assert_allclose(v_hat, fpc * n_rows**2 / n * expected_rows.var(axis=1, ddof=1), rtol=1e-12)
    # and the kernel runs on them (one iteration, eagerly)
    batches = {"x": np.broadcast_to(x[index], (L, k, n)).copy(), "y": np.broadcast_to(y[index], (L, k, n)).copy()}
    start = {"b": tf.constant(b)}
    after, aux, first = one_iteration(sampler, batches, start, sampler.kernel.init_aux(start, sampler.rng))
    assert np.all(np.isfinite(after["b"].numpy())) and int(aux["kicks"]) == L


def test_noise_correction_is_keyword_only_and_off_by_default():
    for function in (sgmcmc.sghmc, sgmcmc.sghmc_setup, sgmcmc.sghmccv, sgmcmc.sghmccv_setup, sgmcmc.csghmc, sgmcmc.csghmc_setup):
        parameter = inspect.signature(function).parameters["noise_correction"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is False
    sampler = sgmcmc.sghmc_setup(log_lik, {"x": gaussian_rows()}, {"theta": 0.0}, 1e-4, minibatch_size=10)
    assert not sampler.kernel.noise_correction and sampler.kernel.init_aux({"theta": tf.zeros([1])}, None) == {}


def refusing_log_lik(params, dataset):
    raise AssertionError("the arguments are checked before the model is evaluated")


@pytest.mark.parametrize(
    "name, kwargs, error, match",
    [
        ("sghmc", dict(noise_correction="yes"), TypeError, "noise_correction must be True or False"),
        ("sghmc", dict(noise_correction=1), TypeError, "noise_correction must be True or False"),
        ("csghmc", dict(noise_correction=None), TypeError, "noise_correction must be True or False"),
        ("sghmc", dict(noise_correction=True, estimator="svrg"), ValueError, "use estimator='plain' or 'cv'"),
        ("sghmc", dict(noise_correction=True, estimator="saga"), ValueError, "use estimator='plain' or 'cv'"),
        ("sghmc", dict(noise_correction=True, minibatch_size=1), ValueError, "at least 2 rows"),
    ],
)
def test_bad_noise_correction_is_refused_before_the_model_is_evaluated(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        getattr(sgmcmc, f"{name}_setup")(refusing_log_lik, {"x": gaussian_rows()}, {"theta": 0.0}, 1e-4, **kwargs)


def test_rows_sharded_are_refused():
    context = KernelContext(["theta"], N_ROWS, None, "plain")
    arguments = dict(stepsize=1e-4, alpha=0.1, L=3, noise_correction=True)
    with pytest.raises(ValueError, match="use shard_rows=False"):
        SGHMC.from_arguments(arguments, context)


def test_a_run_whose_correction_was_mostly_clipped_warns_after_the_run():
    """At α = 0.01 (the default) q = εV = 1 exceeds 2α: every kick's correction is clipped (the
    half kick's εα − ε²V̂/4 < 0 too), which the run reports with its measured fraction; the
    step API's sample_chain reports the same. The corrected run of the variance test above
    (q = α, nothing clipped) runs under warnings-as-errors, so a warning there fails it."""
    common = dict(minibatch_size=BATCH, L=L, dtype=tf.float64, seed=1)
    with pytest.warns(sgmcmc.StepsizeWarning) as record:
        sgmcmc.sghmc(
            log_lik, {"x": gaussian_rows()}, {"theta": 0.0}, STEPSIZE, n_iters=20, noise_correction=True, verbose=False, **common
        )
    clipped = [str(w.message) for w in record if "clipped in" in str(w.message)]
    assert len(clipped) == 1 and clipped[0].startswith("sghmc: noise_correction was clipped in 100%"), clipped
    sampler = sgmcmc.sghmc_setup(log_lik, {"x": gaussian_rows()}, {"theta": 0.0}, STEPSIZE, noise_correction=True, **common)
    with pytest.warns(sgmcmc.StepsizeWarning, match="minibatch noise"):
        sgmcmc.init_sess(sampler, verbose=False)
    with pytest.warns(sgmcmc.StepsizeWarning, match=r"clipped in 100% of the element-kicks") as record:
        sgmcmc.sample_chain(sampler, n_iters=10, verbose=False)
    assert record[0].filename == __file__  # at the user's line
    np.testing.assert_array_equal(sampler.kernel.clipped_fraction(sampler.kernel_state()), [1.0])
