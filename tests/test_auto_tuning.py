"""No hand tuning (issue 22): the control-variate samplers choose the mode search's stepsize,
and the search says when it did not converge.

Exact answers: the README's Gaussian mean has the conjugate posterior
N(Σx / (N + 1/100), 1/(N + 1/100)); the logistic regression (d = 5, N = 50,000, prior N(0, 100 I))
is compared with its Laplace approximation (Newton's mode, inverse Hessian), which at this N is
within a few hundredths of a posterior sd of the posterior's mean and sd.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
from sgmcmc.run import mode_search
from sgmcmc.run.mode_search import auto_opt_stepsize


def test_auto_opt_stepsize_rule():
    """min(1, 2n/N) / λ_max without replacement, 2n/(N + n) with; capped at 1/λ_max."""
    assert auto_opt_stepsize(500, 100_000, 1e5) == pytest.approx(1e-2 / 1e5)
    assert auto_opt_stepsize(500, 100_000, 1e5, replace=True) == pytest.approx(2 * 500 / 100_500 / 1e5)
    assert auto_opt_stepsize(100, 100, 4.0) == pytest.approx(0.25)


def test_readme_gaussian_mean_four_arguments():
    """``sgldcv(log_lik, dataset, params, stepsize)``: no TypeError, no warning, right posterior.
    Seeds 1, 2, 3 (kept draws 500–5,000): mean errors −0.029, −0.004, −0.016 posterior sds, sd
    ratios 1.05, 1.04, 1.06 (1.07 is the stepsize's discretisation). Tolerances: 0.5 sd, [0.9, 1.2].
    Before the change: TypeError "sgldcv needs opt_stepsize" (the failing variant)."""
    x = np.random.default_rng(1).normal(0.5, 1.0, size=100_000)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfp.distributions.Normal(params["mu"], 1.0).log_prob(dataset["x"]))

    def log_prior(params):
        return tfp.distributions.Normal(0.0, 10.0).log_prob(params["mu"])

    with warnings.catch_warnings():
        warnings.simplefilter("error", sgmcmc.StepsizeWarning)
        out = sgmcmc.sgldcv(log_lik, {"x": x}, {"mu": 0.0}, 5e-6, log_prior=log_prior, minibatch_size=500,
                            n_iters=5_000, seed=1, verbose=False)
    precision = len(x) + 1 / 100
    mean, sd = x.sum() / precision, precision**-0.5
    draws = out["mu"][500:]
    assert abs(draws.mean() - mean) < 0.5 * sd, (draws.mean() - mean) / sd
    assert 0.9 < draws.std() / sd < 1.2, draws.std() / sd


@pytest.fixture(scope="module")
def logistic():
    n_rows, d = 50_000, 5
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_rows, d))
    x[:, 0] = 1.0
    y = (rng.uniform(size=n_rows) < 1 / (1 + np.exp(-x @ np.array([-0.5, 1.0, -1.0, 0.5, 0.25])))).astype(float)
    b = np.zeros(d)
    for _ in range(30):  # Newton: the exact mode
        p = 1 / (1 + np.exp(-x @ b))
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.eye(d) / 100
        b = b + np.linalg.solve(hess, x.T @ (y - p) - b / 100)
    data = {"X": x.astype(np.float32), "y": y.astype(np.float32)}
    return data, b, np.sqrt(np.diag(np.linalg.inv(hess)))


def _logistic_lik(p, ds):
    z = tf.linalg.matvec(ds["X"], p["b"])
    return tf.reduce_sum(ds["y"] * z - tf.math.softplus(z))


def _logistic_prior(p):
    return -0.5 * tf.reduce_sum(p["b"] ** 2) / 100


@pytest.mark.parametrize("start", [0.0, 30.0])
def test_logistic_regression_four_arguments(logistic, start):
    """Default minibatch (n = 500, N/n = 100), stepsize 2e-5 (ελ_max = 0.18, no StepsizeWarning),
    from 0 and from a badly scaled start (every coefficient 30: all rows saturated, the curvature
    there ~10^-5 of the mode's — the staged re-estimate of λ_max lowers the stepsize).
    Seeds 1, 2, 3, either start (same chains: the search converges to the same point): largest
    |mean error| over 5 coefficients 0.21, 0.08, 0.17 sds; sd ratios 0.94–1.06. Tolerances 0.5 sd,
    [0.85, 1.2]. Broken variants (checked on a patched copy): κ = 1 (h = 1/λ_max, no minibatch-noise
    fraction) — the search's jitter leaves the anchor 29 sds off (start 0) and the end check's
    ModeSearchWarning fails the test, as it fails the README case (6.5 sds); κ = 2 diverges."""
    data, mode, sd = logistic
    with warnings.catch_warnings():
        warnings.simplefilter("error", sgmcmc.StepsizeWarning)
        out = sgmcmc.sgldcv(_logistic_lik, data, {"b": np.full(5, start, np.float32)}, 2e-5,
                            log_prior=_logistic_prior, n_iters=5_000, seed=1, verbose=False)
    draws = out["b"][500:]
    assert np.all(np.abs(draws.mean(0) - mode) < 0.5 * sd), (draws.mean(0) - mode) / sd
    assert np.all((0.85 < draws.std(0) / sd) & (draws.std(0) / sd < 1.2)), draws.std(0) / sd


def test_unconverged_mode_search_is_finished_by_newton_steps(logistic):
    """Twenty SGD steps from 30 cannot reach the mode; the Newton steps that follow do (issue
    29.2): the anchor is within a posterior sd of the exact mode. Broken variant: no Newton steps
    (NEWTON_STEPS = 0) — ModeSearchError instead (the next test)."""
    data, mode, sd = logistic
    sampler = sgmcmc.sgldcv_setup(_logistic_lik, data, {"b": np.full(5, 30.0, np.float32)}, 2e-5,
                                  log_prior=_logistic_prior, n_iters_opt=20, seed=1, verbose=False)
    sgmcmc.init_sess(sampler)
    anchor = sampler.estimator.anchor["b"].numpy()
    assert np.all(np.abs(anchor - mode) < sd), (anchor - mode) / sd


def test_mode_search_far_from_the_mode_is_refused(logistic, monkeypatch):
    """Without the Newton steps, twenty SGD steps from 30 end far: ModeSearchError naming the
    distance and the remedies, and nothing is sampled (was: a ModeSearchWarning, then sampling).
    Broken variant: the end check not raising — the test fails (checked)."""
    data, _, _ = logistic
    monkeypatch.setattr(mode_search, "NEWTON_STEPS", 0)
    with pytest.raises(sgmcmc.ModeSearchError, match="posterior sds") as info:
        sgmcmc.sgldcv(_logistic_lik, data, {"b": np.full(5, 30.0, np.float32)}, 2e-5,
                      log_prior=_logistic_prior, n_iters_opt=20, seed=1, verbose=False, n_iters=100)
    assert info.value.distance > info.value.threshold


# ---------------------------------------------------------------- issue 22.4: no retracing noise
def test_repeated_calls_log_no_retracing_warning(monkeypatch):
    """Five calls each of sgldcv, sgld, sgld with SVRG and check_stepsize on the README's model
    (same model and shapes, new seeds), TensorFlow's loggers ("tensorflow", "absl") captured at
    WARNING: no "triggered tf.function retracing" line. TensorFlow's detector is reset first (its
    counts are per process and it warns at most twice per key, so earlier tests could hide it).
    Broken variant (run: the package's own functions as plain tf.function, before the change):
    6 such lines (sgldcv's sample_groups call and estimate_for_storage, the full-data gradient
    _lik_grad; sgld; NegativeHessian's HVP)."""
    import logging

    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    monkeypatch.setattr(pf, "_frequent_tracing_detector_manager", pf._FrequentTracingDetectorManager())
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    loggers = [logging.getLogger("tensorflow"), logging.getLogger("absl")]
    levels = [logger.level for logger in loggers]  # conftest raises "tensorflow" to ERROR
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
    x = np.random.default_rng(1).normal(0.5, 1.0, size=2_000).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfp.distributions.Normal(params["mu"], 1.0).log_prob(dataset["x"]))

    def log_prior(params):
        return tfp.distributions.Normal(0.0, 10.0).log_prob(params["mu"])

    args = (log_lik, {"x": x}, {"mu": 0.0}, 1e-4)
    kw = dict(log_prior=log_prior, minibatch_size=100, n_iters=50, verbose=False)
    try:
        for seed in range(5):
            sgmcmc.sgldcv(*args, n_iters_opt=100, seed=seed, **kw)
            sgmcmc.sgld(*args, seed=seed, **kw)
            sgmcmc.sgld(*args, seed=seed, estimator="svrg", svrg_period=10, **kw)
            sgmcmc.check_stepsize(log_lik, {"x": x}, {"mu": 0.5}, 1e-4, log_prior, warn=False)
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(handler)
            logger.setLevel(level)
    retracing = [r.getMessage()[:120] for r in records if "retracing" in r.getMessage()]
    assert not retracing, retracing


# ---------------------------------------------------------------- issue 22.3: HAMCMC's default memory
def test_hamcmc_default_memory_recovers_a_correlated_26_dimensional_posterior():
    """y = Xb + N(0, 1), N = 5,000, d = 26, AR(1) (ρ = 0.9) covariates with sds 10^-0.5 … 10^0.5,
    prior N(0, 10² I): posterior N(P⁻¹Xᵀy, P⁻¹), P = XᵀX + I/100 exactly (condition number
    5.1e3, coordinates correlated up to 0.9). HAMCMC with its default memory and damping (memory
    None: min(d + 1, 50) = 27 pairs + 1), stepsize 0.3 (standardised scale), SGLD warm-up
    0.6/λ_max, SVRG (the docstring's advice), n = 500, 6,000 iterations, first 2,000 dropped,
    float32. Seeds 1-5: worst mean errors 0.124-0.211 sd, sd ratios 0.952-1.142 (at the earlier
    10,000 iterations, re-run on the same seeds: 0.088-0.168 sd, 1.004-1.137). Tolerances 0.4 sd,
    [0.85, 1.3]. Broken variant (the old default, memory=5, run at 6,000 iterations, seeds 1-3):
    worst mean errors 3.09-3.61 sd, largest sd ratios 1.40-1.76: fails both (at 10,000: 2.40-3.39
    sd, sd ratios 0.75-2.31)."""
    from reference_regression import correlated_regression

    from sgmcmc.step.dynamics.hamcmc import default_memory

    d = 26
    g = correlated_regression(5_000, d, 0.9, 0.5)
    X, y, P, mean, sd, log_lik, log_prior = g["data"]["X"], g["data"]["y"], g["P"], g["mean"], g["sd"], g["log_lik"], g["log_prior"]

    assert default_memory(d) == 27 and default_memory(1) == 2 and default_memory(1_000) == 50
    sampler = sgmcmc.hamcmc_setup(log_lik, {"X": X.astype(np.float32), "y": y.astype(np.float32)},
                                  {"b": np.zeros(d, np.float32)}, 0.3, log_prior=log_prior, minibatch_size=500,
                                  warmup_stepsize=0.6 / np.linalg.eigvalsh(P)[-1], estimator="svrg", seed=1)
    draws = sgmcmc.sample_chain(sampler, 6_000, False)["b"][2_000:]
    mean_error = np.abs(draws.mean(0) - mean) / sd
    ratio = draws.std(0) / sd
    assert mean_error.max() < 0.4, mean_error
    assert np.all((0.85 < ratio) & (ratio < 1.3)), ratio
    assert sampler.variables.aux["thetas"].shape[1] == 27  # the memory in use
    with pytest.raises(ValueError, match="memory must be >= 2"):
        sgmcmc.hamcmc_setup(log_lik, {"X": X, "y": y}, {"b": np.zeros(d)}, 0.3, memory=1)
