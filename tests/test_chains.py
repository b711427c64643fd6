"""Chains, burn-in, thinning, stored gradients and the analysis functions on the real samplers
(SPEC §7, issue 8).

Every statistical assertion is against a known answer (an exact posterior, the exact stationary
law of SGLD on a Gaussian, exact full-data gradients); the tolerances were calibrated over
seeds 0–7 and the observed range is written beside each one.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

from conftest import R_SETTINGS, gaussian_1d, gaussian_3d

tfd = tfp.distributions


# -- models --------------------------------------------------------------------------------


@functools.cache
def _two_param_model():
    """A scalar and a (2, 3) parameter: y_i ~ N(a + sum(W), 1), 300 rows (shapes only). Made once:
    the same functions and data arrays on every call, so the layouts test's runs with the same
    number of chains reuse one compiled sampler (sgmcmc/api/reuse.py; burn_in, thin and
    store_gradients are not in its key), as each case's two runs already did."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=300).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["a"] + tf.reduce_sum(params["W"]), 1.0).log_prob(dataset["y"]))

    def log_prior(params):
        return -0.5 * (params["a"] ** 2 + tf.reduce_sum(params["W"] ** 2))

    return log_lik, log_prior, {"y": y}, {"a": 0.0, "W": np.zeros((2, 3), np.float32)}


def logistic_model():
    """Logistic regression, N = 2000, d = 3, N(0, 10^2) prior: the CV gradient is not exact."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(2000, 3)).astype(np.float32)
    y = (rng.uniform(size=2000) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(np.float32)

    def log_lik(params, dataset):
        z = tf.linalg.matvec(dataset["X"], params["beta"])
        return tf.reduce_sum(dataset["y"] * z - tf.math.softplus(z))

    def log_prior(params):
        return -tf.reduce_sum(params["beta"] ** 2) / 200.0

    return dict(log_lik=log_lik, log_prior=log_prior, dataset={"X": X, "y": y})


@pytest.fixture(scope="module")
def logistic():
    return logistic_model()


@pytest.fixture(scope="module")
def gauss():
    """x_i ~ N(0, 1), N = 10^4, theta ~ N(0, 5^2): exact posterior N(mean, 1/P)."""
    return gaussian_1d()


def sgld_stationary_sd(model, stepsize: float, n: int) -> float:
    """The exact stationary sd of SGLD on the 1-d Gaussian model with minibatches of n rows drawn
    without replacement: theta' = theta - (h/2) P (theta - mu) + (h/2) xi + sqrt(h) z, an AR(1)
    with rho = 1 - hP/2, Var xi = N^2 s^2 (N - n) / (n (N - 1)) (s^2 the population variance)."""
    x = model.dataset["x"].astype(np.float64)
    big_n = len(x)
    precision = 1.0 / model.cov[0, 0]
    var_xi = big_n**2 * x.var() * (big_n - n) / (n * (big_n - 1))
    rho = 1 - stepsize * precision / 2
    return float(np.sqrt((stepsize + stepsize**2 / 4 * var_xi) / (1 - rho**2)))


# -- shapes and layouts ----------------------------------------------------------------------

# A covering array: every pair of values of every two of the four options occurs.
PAIRWISE = [(1, 0, 1, False), (1, 10, 3, True), (3, 0, 3, True), (3, 10, 1, True), (3, 10, 3, False)]


@pytest.mark.parametrize("n_chains,burn_in,thin,store", PAIRWISE)
def test_shapes_and_kept_iterations(n_chains, burn_in, thin, store):
    """Layouts of draws, gradients and log-posteriors, and the kept iterations are exactly
    burn_in + thin, burn_in + 2 thin, ... of the same run without burn-in or thinning."""
    log_lik, log_prior, data, start = _two_param_model()
    kw = dict(log_prior=log_prior, minibatch_size=50, n_iters=31, verbose=False, seed=4, n_chains=n_chains)
    out = sgmcmc.sgld(log_lik, data, start, 1e-3, burn_in=burn_in, thin=thin, store_gradients=store, **kw)
    full = sgmcmc.sgld(log_lik, data, start, 1e-3, **kw)
    n_kept = (31 - burn_in) // thin
    lead = (n_kept,) if n_chains == 1 else (n_chains, n_kept)
    assert isinstance(out, sgmcmc.Samples) and out.n_chains == n_chains and out.n_kept == n_kept
    assert out["a"].shape == lead and out["W"].shape == (*lead, 2, 3)
    assert out.log_posterior.shape == lead
    assert out.settings["burn_in"] == burn_in and out.settings["thin"] == thin
    if store:
        assert {k: v.shape for k, v in out.gradients.items()} == {"a": lead, "W": (*lead, 2, 3)}
        assert np.all(np.isfinite(out.gradients["W"]))
    else:
        assert out.gradients is None
    kept = np.arange(burn_in + thin, 32, thin) - 1  # 0-based rows of the full run
    axis = 0 if n_chains == 1 else 1
    for name in ("a", "W"):
        np.testing.assert_array_equal(out[name], np.take(full[name], kept, axis=axis))
    np.testing.assert_array_equal(out.log_posterior, np.take(full.log_posterior, kept, axis=axis))
    idata = out.to_inference_data()
    assert idata.posterior["W"].shape == (n_chains, n_kept, 2, 3)


def test_cv_starts_list_vs_one_dict(gauss):
    """A list of starts: chain k starts at its own dict; one dict: every chain at the mode."""
    args = dict(R_SETTINGS["sgldcv"], stepsize=1e-6, log_prior=gauss.log_prior, minibatch_size=100, n_iters=1,
                verbose=False, seed=2, n_chains=3)
    starts = [{"theta": v} for v in (-1.0, 0.0, 1.0)]
    own = sgmcmc.sgldcv(gauss.log_lik, gauss.dataset, starts, **args)
    # one step of size 1e-6 moves at most ~ (1e-6 / 2) N |theta| + 3e-3 = 8e-3 from the start
    np.testing.assert_allclose(own["theta"][:, 0], [-1.0, 0.0, 1.0], atol=0.01)
    at_mode = sgmcmc.sgldcv(gauss.log_lik, gauss.dataset, {"theta": 1.0}, **args)
    assert len(set(at_mode["theta"][:, 0].tolist())) == 3  # each chain has its own noise
    # Before any step every chain is at the mode search's end, and that is near the mode: SGD at
    # opt_stepsize h = 1e-5 fluctuates around it with sd ≈ sqrt(h Var(g) / 2N) ≈ 0.022 (Var(g) ≈
    # N²/n); measured errors over seeds 0–5: 0.009–0.045.
    setup_args = {k: v for k, v in args.items() if k != "n_iters"}
    sampler = sgmcmc.sgldcv_setup(gauss.log_lik, gauss.dataset, {"theta": 1.0}, **setup_args)
    start = sgmcmc.get_params(sampler, sgmcmc.init_sess(sampler, verbose=False))["theta"]
    assert start.shape == (3,) and len(set(start.tolist())) == 1
    assert abs(start[0] - gauss.mean[0]) < 0.1
    np.testing.assert_allclose(at_mode["theta"][:, 0], start, atol=0.01)  # one step of 1e-6


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(thin=0), "thin"),
        (dict(burn_in=20), "burn_in"),
        (dict(params=[{"theta": 0.0}] * 2), "list of 2"),
        (dict(n_chains=0), "n_chains"),
    ],
)
def test_bad_options_raise_before_any_compute(bad, match, small_gauss):
    calls = []

    def log_lik(params, dataset):
        calls.append(1)
        return small_gauss.log_lik(params, dataset)

    args = dict(stepsize=1e-4, log_prior=small_gauss.log_prior, n_iters=20, verbose=False, n_chains=3)
    args.update(bad)
    params = args.pop("params", small_gauss.params)
    with pytest.raises(ValueError, match=match):
        sgmcmc.sgld(log_lik, small_gauss.dataset, params, **args)
    assert not calls, "the model was evaluated before the options were checked"


# -- stored gradients -----------------------------------------------------------------------


def gradient_alignment(stored: np.ndarray, exact: np.ndarray, lag: int = 0) -> tuple[np.ndarray, float]:
    """z-scores of the mean error of the stored gradient at sample i against the exact gradient
    at sample i + lag (lag 0 is the right alignment), and the ratio of the rms error to the rms
    change of the exact gradient between consecutive kept samples."""
    n = len(stored) - lag
    err = stored[:n] - exact[lag : lag + n]
    z = err.mean(0) / (err.std(0, ddof=1) / np.sqrt(n))
    step = np.diff(exact, axis=0)
    return z, float(np.sqrt((err**2).mean()) / np.sqrt((step**2).mean()))


def logistic_cv(logistic, seed=1):
    """SGLD-CV, stepsize 1e-3, n = 100, 5000 iterations thinned by 10, gradients stored; and the
    exact gradients at the kept samples."""
    out = sgmcmc.sgldcv(
        logistic["log_lik"], logistic["dataset"], {"beta": np.zeros(3)}, stepsize=1e-3, opt_stepsize=1e-4,
        log_prior=logistic["log_prior"], minibatch_size=100, n_iters=5000, n_iters_opt=1000, verbose=False,
        seed=seed, burn_in=100, thin=10, store_gradients=True,
    )
    exact = sgmcmc.full_gradients(logistic["log_lik"], logistic["dataset"], out, logistic["log_prior"])
    return out, exact


@pytest.fixture(scope="module")
def logistic_cv_run(logistic):
    return logistic_cv(logistic)


def test_stored_gradients_are_the_estimate_at_the_same_sample(logistic_cv_run, lag=0):
    """The stored CV gradient is unbiased for the exact gradient at the same sample, and its
    error is much smaller than the exact gradient's change between consecutive samples
    (seeds 0–7: max |z| 2.1, ratio 0.147–0.168; bounds 4 and 0.3). Stored one sample late
    (lag=1, the broken variant) the ratio is 1.003–1.014 and the test fails."""
    out, exact = logistic_cv_run
    z, ratio = gradient_alignment(out.gradients["beta"], exact["beta"], lag)
    assert np.all(np.abs(z) < 4.0), z
    assert ratio < 0.3, ratio
    assert np.all(np.isfinite(out.gradients["beta"]))


# -- R-hat ---------------------------------------------------------------------------------


def _sgld_4_chains(gauss, starts, n_iters, burn_in, seed):
    return sgmcmc.sgld(
        gauss.log_lik, gauss.dataset, [{"theta": s} for s in starts], 1e-5, gauss.log_prior, 100, n_iters,
        verbose=False, seed=seed, n_chains=4, burn_in=burn_in,
    )


def test_rhat_near_one_for_dispersed_starts_after_burn_in(gauss):
    """SGLD, stepsize 1e-5 (rho = 0.95, IACT ~ 39): 4 chains from +-3 posterior sd, 500 burn-in,
    4000 kept: R-hat 1.005–1.017 over seeds 0–7 (bound 1.05)."""
    sd = gauss.sd[0]
    out = _sgld_4_chains(gauss, gauss.mean[0] + sd * np.array([-3, -1, 1, 3]), 4500, 500, seed=3)
    r_hat = sgmcmc.summary(out).loc["theta", "r_hat"]
    assert r_hat < 1.05, r_hat


def test_rhat_flags_a_far_start_without_burn_in(gauss):
    """Chain 4 starts 10^6 posterior sd away, no burn-in, 500 iterations: its transient (~260
    iterations; SGLD forgets a start exponentially fast on a log-concave posterior, so R-hat sees
    it only while it is a sizeable part of the run: from 10^4 sd away, or over 1000 iterations,
    R-hat was 1.08-1.3) gives R-hat 1.35–1.48 over seeds 0–7 (bound 1.1)."""
    sd = gauss.sd[0]
    starts = gauss.mean[0] + sd * np.array([-1, 0, 1, 1e6])
    out = _sgld_4_chains(gauss, starts, 500, 0, seed=3)
    r_hat = sgmcmc.summary(out).loc["theta", "r_hat"]
    assert r_hat > 1.1, r_hat


# -- zero-variance control variates ---------------------------------------------------------


@pytest.fixture(scope="module")
def gauss3d_runs():
    model = gaussian_3d()
    common = dict(log_prior=model.log_prior, minibatch_size=100, n_iters=3000, verbose=False, seed=5,
                  burn_in=500, store_gradients=True)
    cv = sgmcmc.sgldcv(model.log_lik, model.dataset, model.params, 1e-4, opt_stepsize=1e-5, n_iters_opt=1000,
                       **common)
    plain = sgmcmc.sgld(model.log_lik, model.dataset, model.params, 1e-5, **common)
    return model, cv, plain


def test_zv_with_stored_gradients(gauss3d_runs):
    """Thesis §3.4: ZV with SGLD-CV's gradients reduces the variance a lot (for a Gaussian the CV
    gradient is exact, so order-1 ZV is exact up to float32: seeds 0–7 give 9e10–1.5e11, bound
    1e4), with plain SGLD's at N = 10^4, n = 100 little (1.031–1.055, bound 1.2); SGLD-CV's ZV
    mean is closer to the exact posterior mean than the plain mean (plain error 0.001–0.09
    posterior sd, ZV error < 1e-4 sd, bound 0.01)."""
    model, cv, plain = gauss3d_runs
    zv_cv = sgmcmc.zv(cv)
    zv_plain = sgmcmc.zv(plain)
    assert np.all(zv_cv["variance_reduction"] > 1e4), zv_cv
    assert np.all(zv_plain["variance_reduction"] < 1.2), zv_plain
    zv_err = np.abs(zv_cv["zv"].to_numpy() - model.mean)
    plain_err = np.abs(zv_cv["mean"].to_numpy() - model.mean)
    assert np.all(zv_err < plain_err), (zv_err, plain_err)
    assert np.all(zv_err < 0.01 * model.sd), zv_err / model.sd


# -- vectorised chains -------------------------------------------------------------------------

SGLD_H, SGLD_N = 1e-4, 100


@pytest.fixture(scope="module")
def sgld_k_runs(gauss):
    """SGLD (stepsize 1e-4, n = 100) on the 1-d Gaussian: K = 1 and K = 4, 4000 kept each."""
    kw = dict(log_prior=gauss.log_prior, minibatch_size=SGLD_N, n_iters=4100, verbose=False, burn_in=100)
    one = sgmcmc.sgld(gauss.log_lik, gauss.dataset, {"theta": float(gauss.mean[0])}, SGLD_H, seed=7, **kw)
    four = sgmcmc.sgld(gauss.log_lik, gauss.dataset, {"theta": float(gauss.mean[0])}, SGLD_H, seed=8,
                       n_chains=4, **kw)
    return one, four


@pytest.mark.parametrize("k", [1, 4])
def test_each_chain_has_the_exact_stationary_law(gauss, sgld_k_runs, k):
    """Per chain, mean and sd against the exact answers with the same tolerance for K = 1 and 4:
    the mean against the posterior mean (|error| / stationary sd: 0.003–0.057 over seeds 0–7
    and 40 chains, bound 0.12), the sd against SGLD's exact stationary sd (ratio 0.977–1.043,
    bound 0.07; it is 5.8 times the posterior sd, the minibatch noise)."""
    out = sgld_k_runs[0] if k == 1 else sgld_k_runs[1]
    chains = out.by_chain()["theta"]
    assert chains.shape == (k, 4000)
    sd = sgld_stationary_sd(gauss, SGLD_H, SGLD_N)
    for c in chains:
        assert abs(c.mean() - gauss.mean[0]) < 0.12 * sd, (c.mean(), gauss.mean[0], sd)
        assert abs(c.std() / sd - 1) < 0.07, c.std() / sd


@pytest.fixture(scope="module")
def sgldcv_4_chains(gauss):
    """SGLD-CV on the 1-d Gaussian (its CV gradient is exact: the increments are the drift and
    the injected noise only), 4 chains, 2000 kept."""
    return sgmcmc.sgldcv(gauss.log_lik, gauss.dataset, {"theta": 0.0}, 1e-4, opt_stepsize=1e-5, log_prior=gauss.log_prior,
                         minibatch_size=100, n_iters=2000, n_iters_opt=500, verbose=False, seed=9, n_chains=4)


@pytest.mark.parametrize("run", ["sgld", "sgldcv"])
def test_chains_are_independent(run, sgld_k_runs, sgldcv_4_chains):
    """Chain k of a K-chain run is not a copy of chain j: the correlation of their increments is
    ~ N(0, 1/n) (seeds 0–7: max |r| 0.017–0.040 for SGLD, whose increments are 96% minibatch
    noise, and 0.017–0.074 for SGLD-CV, whose increments are the injected noise; bound 0.1).
    Sharing the minibatches across chains fails the SGLD case, sharing the injected noise the
    SGLD-CV case (r = 0.04 in the SGLD case: that is why both are here)."""
    theta = sgld_k_runs[1]["theta"] if run == "sgld" else sgldcv_4_chains["theta"]
    increments = np.diff(theta, axis=1)
    r = np.corrcoef(increments)[np.triu_indices(4, 1)]
    assert np.all(np.abs(r) < 0.1), r


# -- same seed, same chains ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sgld", "sghmccv"])
def test_whole_chain_and_step_api_give_identical_chains(name, small_gauss):
    """K = 3 from their own starts: the whole-chain and the step-by-step APIs are bit-identical."""
    args = dict(R_SETTINGS[name], log_prior=small_gauss.log_prior, minibatch_size=100, seed=5, n_chains=3)
    if name.endswith("cv"):
        args.update(n_iters_opt=200, verbose=False)
    starts = [{"theta": 0.1 * i} for i in range(3)]
    whole = getattr(sgmcmc, name)(
        small_gauss.log_lik, small_gauss.dataset, starts, n_iters=50, **{"verbose": False, **args}
    )["theta"]
    sampler = getattr(sgmcmc, f"{name}_setup")(small_gauss.log_lik, small_gauss.dataset, starts, **args)
    sess = sgmcmc.init_sess(sampler, verbose=False)
    rows = []
    for _ in range(50):
        sgmcmc.sgmcmc_step(sampler, sess)
        rows.append(sgmcmc.get_params(sampler, sess)["theta"])
    assert whole.shape == (3, 50)
    np.testing.assert_array_equal(np.array(rows).T, whole)
    assert len({tuple(c) for c in whole}) == 3
