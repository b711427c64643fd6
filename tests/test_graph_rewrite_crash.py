"""Regression: Grappler's memory optimizer crashed the second chunk of an everyday model.

The issue's model (logistic regression, flat prior, N = 300,000) failed with
``AlreadyExistsError: … AddOpsRewrite_add_1/tmp_var …`` on the second compiled call
(sgmcmc/graph_options.py explains the cause). Each run below spans several chunks and, for the
step API, many calls of the same concrete function. With ``package_call_options`` made a no-op,
the thinned runs (thin=3: a loop nested in the chunk's loop) fail with that error for sgld,
sghmc and at N = 10^6 too (checked when the fix was made); the loop of thin=1 happened not to.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc

N_ROWS = 300_000


def _model(dtype):
    rng = np.random.default_rng(0)
    np_dtype = dtype.as_numpy_dtype
    X = rng.random((N_ROWS, 54), dtype=np.float32).astype(np_dtype)
    y = (rng.random(N_ROWS) < 0.5).astype(np_dtype)

    def log_lik(p, d):
        z = tf.linalg.matvec(d["X"], p["b"])
        return tf.reduce_sum(d["y"] * z - tf.math.softplus(z))

    return log_lik, {"X": X, "y": y}, {"b": np.zeros(54, np_dtype)}


@pytest.fixture(scope="module")
def model32():
    return _model(tf.float32)


@pytest.mark.parametrize("thin", [1, 3])
def test_issue_model(model32, thin):
    """thin=3 nests a loop in the chunk's loop: with the memory optimizer on it crashed."""
    log_lik, data, params = model32
    out = sgmcmc.sgld(log_lik, data, params, 1e-7, minibatch_size=500, n_iters=3000, verbose=False, seed=1, thin=thin)
    assert out["b"].shape == (3000 // thin, 54) and np.isfinite(out["b"]).all()
    # The posterior under y ~ Bernoulli(1/2) independent of X concentrates near a small b.
    assert np.abs(out["b"][-500:].mean(axis=0)).max() < 0.5


@pytest.mark.parametrize(
    "method, args",
    [
        ("sghmc", dict(stepsize=1e-8, L=2)),
        ("sgnht", dict(stepsize=1e-8)),
        ("sgldcv", dict(stepsize=1e-7, opt_stepsize=1e-7, n_iters_opt=300)),
    ],
)
def test_other_samplers(model32, method, args):
    log_lik, data, params = model32
    out = getattr(sgmcmc, method)(log_lik, data, params, minibatch_size=500, n_iters=900, verbose=False, seed=1, thin=3, **args)
    assert np.isfinite(out["b"]).all()


def test_step_api_and_float64():
    log_lik, data, params = _model(tf.float64)
    sampler = sgmcmc.sgld_setup(log_lik, data, params, 1e-7, minibatch_size=500, seed=1, dtype=tf.float64)
    sess = sgmcmc.init_sess(sampler)
    for _ in range(150):
        sgmcmc.sgmcmc_step(sampler, sess)
    out = sgmcmc.sgld(log_lik, data, params, 1e-7, minibatch_size=500, n_iters=600, verbose=False, seed=1, dtype=tf.float64)
    np.testing.assert_array_equal(sgmcmc.get_params(sampler, sess)["b"], out["b"][149])
