"""Improper posteriors refused (issue 43.3): a log posterior that keeps rising, or stays flat,
while parameters run away raises :class:`sgmcmc.ImproperPosteriorError` in the control-variate
samplers' mode search, before anything is sampled; proper posteriors pass and keep their mode.

Known answers: the breast-cancer classes (scikit-learn, 30 standardised columns) are linearly
separable, so under the flat default prior no posterior exists, and under a Normal(0, 10²) prior
the MAP is the numpy Newton solution below; 2-d classes split by a line have no posterior under a
flat prior, while labels drawn from a logistic model (not separable) have one, whose mode is the
maximum-likelihood estimate; parameters entering the likelihood only as a + b are not identified.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
from sgmcmc.run import improper
from sgmcmc.run.mode_search import _hessian

N_SYNTHETIC = 10_000
SLOPE = np.array([1.0, -0.5])


def log_lik(params, data):
    logits = tf.linalg.matvec(data["X"], params["beta"])
    return tf.reduce_sum(data["y"] * logits - tf.math.softplus(logits))


def normal_prior(params):
    return tf.reduce_sum(tfp.distributions.Normal(0.0, 10.0).log_prob(params["beta"]))


def newton_mode(X: np.ndarray, y: np.ndarray, prior_precision: float) -> tuple[np.ndarray, np.ndarray]:
    """The mode of the logistic-regression log posterior (Normal(0, prior_precision^-1/2) prior,
    0: flat) by Newton's method in float64, and the negative Hessian there."""
    X = X.astype(np.float64)
    beta = np.zeros(X.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-X @ beta))
        hess = (X * (p * (1 - p))[:, None]).T @ X + prior_precision * np.eye(X.shape[1])
        step = np.linalg.solve(hess, X.T @ (y - p) - prior_precision * beta)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return beta, hess


def mahalanobis(estimate: np.ndarray, mode: np.ndarray, hess: np.ndarray) -> float:
    offset = np.asarray(estimate, np.float64) - mode
    return float(np.sqrt(offset @ hess @ offset))


@pytest.fixture(scope="module")
def breast_cancer():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X = np.column_stack([np.ones(len(X)), X]).astype(np.float32)
    return {"X": X, "y": y.astype(np.float32)}


def synthetic(noisy: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N_SYNTHETIC, 2))
    if noisy:
        y = rng.uniform(size=N_SYNTHETIC) < 1 / (1 + np.exp(-X @ SLOPE))
    else:
        y = X @ SLOPE > 0
    return {"X": X.astype(np.float32), "y": y.astype(np.float32)}


def test_breast_cancer_flat_prior_is_refused(breast_cancer):
    """The four-argument sgldcv (everything default) used to sample this non-existent posterior
    (|β| drifting 7 → 34 over 10^5 iterations) after "the mode search ended 4.01 posterior sds
    from the mode"; now it stops before sampling, naming coefficients and the fix."""
    with pytest.raises(sgmcmc.ImproperPosteriorError) as info:
        sgmcmc.sgldcv(log_lik, breast_cancer, {"beta": np.zeros(31, np.float32)}, 1e-4, n_iters=100, verbose=False)
    error = info.value
    assert 1 <= len(error.parameters) <= improper.NAMED
    assert all(name.startswith("beta[") for name in error.parameters), error.parameters
    assert max(error.log_posterior) > error.log_posterior[0]  # it rises
    message = str(error)
    assert "log_prior" in message and "Normal(0., 10.)" in message and "Nothing was sampled" in message
    assert error.parameters[0] in message


def test_breast_cancer_normal_prior_passes_and_finds_the_map(breast_cancer, monkeypatch):
    """A Normal(0, 10²) prior makes the posterior proper: no error (the full test run too, not
    only skipped because the prior curves every coefficient), and the anchor is the MAP."""
    mode, hess = newton_mode(breast_cancer["X"], breast_cancer["y"].astype(np.float64), 1 / 100)
    sampler = sgmcmc.sgldcv_setup(log_lik, breast_cancer, {"beta": np.zeros(31, np.float32)}, 1e-4,
                                  log_prior=normal_prior, verbose=False, seed=1)
    sgmcmc.init_sess(sampler)
    anchor = sampler.estimator.anchor["beta"].numpy()
    # measured 4.04–4.07 sds (seeds 1–4: the SGD search ends there and, nearer than √d = 5.57, is
    # not polished); a check that moved the mode estimate by 30 % would put it at 4.6
    assert mahalanobis(anchor, mode, hess) < 4.5, (anchor - mode)
    assert not improper.check_proper(sampler, _hessian(sampler)[1]).tested  # the prior curves every element: skipped
    monkeypatch.setattr(improper, "_prior_curves_every_element", lambda post, x: False)
    check = improper.check_proper(sampler, _hessian(sampler)[1])
    assert check.tested and check.full_data_passes == 0
    np.testing.assert_array_equal(sampler.estimator.mode["beta"].numpy(), anchor)  # the check moves nothing


def test_separable_synthetic_flat_prior_is_refused():
    with pytest.raises(sgmcmc.ImproperPosteriorError) as info:
        sgmcmc.sgldcv(log_lik, synthetic(noisy=False), {"beta": np.zeros(2, np.float32)}, 1e-5, n_iters=100,
                      verbose=False, seed=2)
    assert set(info.value.parameters) == {"beta[0]", "beta[1]"}


def test_non_separable_synthetic_flat_prior_passes_at_its_mode():
    data = synthetic(noisy=True)
    mode, hess = newton_mode(data["X"], data["y"].astype(np.float64), 0.0)
    sampler = sgmcmc.sgldcv_setup(log_lik, data, {"beta": np.zeros(2, np.float32)}, 1e-5, verbose=False, seed=2)
    sgmcmc.init_sess(sampler)
    anchor = sampler.estimator.anchor["beta"].numpy()
    # within a draw's distance, √2, with room: measured 0.28 (seed 2; seeds 1–4: 0.28–1.40)
    assert mahalanobis(anchor, mode, hess) < 2.0, (anchor, mode)
    check = improper.check_proper(sampler, _hessian(sampler)[1])
    assert check.tested and check.full_data_passes == 0
    np.testing.assert_array_equal(sampler.estimator.mode["beta"].numpy(), anchor)  # the check moves nothing


def test_unidentified_sum_is_refused():
    """a and b enter the likelihood only as a + b: with no prior the posterior is flat along a − b."""
    y = (1.5 + np.random.default_rng(3).normal(size=2_000)).astype(np.float32)

    def sum_lik(params, data):
        return tf.reduce_sum(-0.5 * (data["y"] - params["a"] - params["b"]) ** 2)

    with pytest.raises(sgmcmc.ImproperPosteriorError) as info:
        sgmcmc.sgldcv(sum_lik, {"y": y}, {"a": np.float32(0.0), "b": np.float32(0.0)}, 1e-4, n_iters=100,
                      verbose=False, seed=3)
    assert sorted(info.value.parameters) == ["a", "b"]
    assert "not identified" in str(info.value)


def laplace_prior(params):
    return -tf.reduce_sum(tf.abs(params["beta"]))


def test_kinked_mode_stops_the_runaway_search_early(breast_cancer, monkeypatch):
    """A Laplace(0, 1) prior is proper but has no curvature, so the full test runs; at the mode
    the log posterior has kinks (coefficients at 0), where the Newton decrement never falls below
    CONVERGED. The search stops once it has stalled. Measured (seeds 1–3): 5, 5, 3 steps and no
    error; with the stall rule off (broken variant, STALL_STEPS = 10**6, run): all 30 steps, so
    the bound below fails."""
    sampler = sgmcmc.sgldcv_setup(log_lik, breast_cancer, {"beta": np.zeros(31, np.float32)}, 1e-4,
                                  log_prior=laplace_prior, verbose=False, seed=1)
    sgmcmc.init_sess(sampler)  # proper: no ImproperPosteriorError
    check = improper.check_proper(sampler, _hessian(sampler)[1])
    assert check.tested and check.full_data_passes == 0
    assert check.newton_steps <= 8, check
