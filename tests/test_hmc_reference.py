"""The digits HMC reference (issue 46.4): its cache belongs to the current split and network, and
the HMC that made it (``vignettes/_hmc_reference.py``'s ``run_hmc``) reproduces an exact posterior.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vignettes"))
import _digits_bnn  # noqa: E402
import sgmcmc.keras  # noqa: E402


# == the cached reference ====================================================================
def test_cached_reference_matches_the_current_split_and_network():
    """The committed cache was made for the split and network the vignette uses now (a changed
    split, width or prior makes ``load_hmc_reference`` refuse it), its probabilities are
    probabilities of the test rows, and the floor and scores it stores are what its arrays give."""
    ref = _digits_bnn.load_hmc_reference()  # raises on a stale fingerprint
    data = _digits_bnn.load_digits_split()
    assert ref["fingerprint"] == _digits_bnn.fingerprint(data)
    np.testing.assert_array_equal(ref["y_test"], data["y_test"])
    for key in ("probs_a", "probs_b", "probs"):
        probs = ref[key]
        assert probs.dtype == np.float32 and probs.shape == (len(data["y_test"]), 10), key
        assert np.all(probs >= 0) and np.allclose(probs.sum(1), 1, atol=1e-5), key
    assert ref["floor_agreement"] == sgmcmc.keras.agreement(ref["probs_a"], ref["probs_b"])
    assert ref["floor_tv"] == pytest.approx(sgmcmc.keras.total_variation(ref["probs_a"], ref["probs_b"]), abs=1e-12)
    for run in ("a", "b"):
        stored, now = ref["metrics"][run], sgmcmc.keras.evaluate(ref[f"probs_{run}"], data["y_test"])
        assert stored == pytest.approx(now, abs=1e-12), run
    assert not ref["settings"]["quick"]


def test_the_vignette_uses_the_shared_definitions():
    """bnn_keras.py's split, network and prior are the shared module's objects, not copies."""
    import bnn_keras

    assert bnn_keras.load_digits_split is _digits_bnn.load_digits_split
    assert bnn_keras.mlp is _digits_bnn.mlp
    assert bnn_keras.DIGITS is _digits_bnn.DIGITS


def test_load_hmc_reference_refuses_a_missing_or_stale_cache(tmp_path):
    with pytest.raises(FileNotFoundError, match="vignettes/_hmc_reference.py"):
        _digits_bnn.load_hmc_reference(tmp_path / "none.npz")
    with np.load(_digits_bnn.REFERENCE) as stored:
        arrays = dict(stored)
    meta = json.loads(str(arrays["meta"]))
    meta["fingerprint"]["split_sha256"] = "0" * 64  # as if the split had changed since
    stale = tmp_path / "stale.npz"
    np.savez(stale, **(arrays | {"meta": np.array(json.dumps(meta))}))
    with pytest.raises(ValueError, match=r"split_sha256.*_hmc_reference\.py"):
        _digits_bnn.load_hmc_reference(stale)
    assert _digits_bnn.load_hmc_reference(stale, check=False)["fingerprint"]["split_sha256"] == "0" * 64


# == the HMC against an exact posterior ======================================================
#: Bayesian linear regression with known noise sd 1: 20 rows, 3 coefficients (covariates scaled
#: 0.3, 1, 3: posterior sds 0.56, 0.29, 0.10, so one stepsize must serve a 5.6 × range), prior
#: N(0, 1) on each — strong enough that a wrong prior scale moves the posterior.
N_ROWS, PRIOR_SD, COVARIATE_SCALES = 20, 1.0, (0.3, 1.0, 3.0)
LEAPFROG = 7
JIT = False  # graph mode: compiling with XLA would add ~10 s to the test (the digits run uses XLA)


def linear_regression() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, len(COVARIATE_SCALES))) * np.array(COVARIATE_SCALES)
    return X, X @ np.array([0.5, -1.0, 0.3]) + rng.normal(size=N_ROWS)


def exact_posterior(X: np.ndarray, y: np.ndarray, prior_sd: float = PRIOR_SD) -> tuple[np.ndarray, np.ndarray]:
    """The conjugate posterior's mean and covariance (noise sd 1)."""
    cov = np.linalg.inv(X.T @ X + np.eye(X.shape[1]) / prior_sd**2)
    return cov @ X.T @ y, cov


def hmc_linear_regression(seed: int) -> dict:
    """``run_hmc`` as the reference script calls it, at a small size: 4 chains from N(0, 2²),
    10 leapfrog steps a draw, 100 warm-up iterations, 500 draws each (float64)."""
    import tensorflow as tf
    from _hmc_reference import run_hmc

    X, y = linear_regression()
    Xt, yt = tf.constant(X), tf.constant(y)

    def log_posterior(beta):
        residual = yt - tf.linalg.matvec(Xt, beta)
        return -0.5 * tf.reduce_sum(residual**2, -1) - 0.5 * tf.reduce_sum(beta**2, -1) / PRIOR_SD**2

    start = np.random.default_rng(seed).normal(0, 2, (4, X.shape[1]))
    return run_hmc(log_posterior, start, n_warmup=100, n_draws=500, n_leapfrog=LEAPFROG, seed=seed, chunk=100, log=None, jit_compile=JIT)


def test_run_hmc_reproduces_an_exact_gaussian_posterior():
    """The pooled draws' mean and variance against the conjugate posterior's, in posterior sds.
    Seeds 0-11 (graph mode, 7 leapfrog steps; per seed the largest |mean error| / sd over the 3
    coefficients, and the variances / exact ones):

    ==== ========= =====================  ==== ========= =====================
    seed max |z|   variance / exact       seed max |z|   variance / exact
    ==== ========= =====================  ==== ========= =====================
    0    0.030     1.076 1.026 1.011      6    0.025     1.074 1.050 0.932
    1    0.063     1.075 1.007 1.028      7    0.065     0.993 1.050 0.997
    2    0.065     0.950 0.995 1.005      8    0.034     1.012 0.950 1.022
    3    0.022     0.978 0.975 0.960      9    0.055     1.024 1.019 1.094
    4    0.024     0.994 1.046 0.973      10   0.049     1.023 0.936 1.117
    5    0.027     0.958 0.857 0.901      11   0.072     0.912 0.967 0.930
    ==== ========= =====================  ==== ========= =====================

    (acceptance 0.92-0.95 after adaptation to 0.8, stepsizes 0.088-0.109). With 10 leapfrog
    steps the means were closer (≤ 0.047) but one variance 1.26: the middle coefficient sits
    near a half period, where HMC's draws alternate in sign and their squares barely move.
    Bounds: |mean error| < 0.15 sd (2.1 × the largest seen), variances within ±30 % (2.1 ×),
    acceptance > 0.6. What they catch (each tried once, seed 0): the exact answer for a prior
    sd 1.25 instead of 1 (mean error −0.28 sd); the Metropolis correction off (always accept:
    the warm-up's stepsize grows, the chains diverge to ~1e61); the jittered stepsize handed back
    to the dual averaging (after the warm-up the stepsize random-walks, to 3e-5 … 1.5e-2: mean
    error 0.30 sd). What they do not: a prior sd 1.1 (0.12 sd away), the adaptation left on
    through the draws, the jitter off (7 steps put no coefficient at a half period)."""
    X, y = linear_regression()
    mean, cov = exact_posterior(X, y)
    out = hmc_linear_regression(seed=0)
    draws = out["trace"]["state"].reshape(-1, X.shape[1])
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(0) - mean) / sd < 0.15), ((draws.mean(0) - mean) / sd, out["step_size"])
    assert np.all(np.abs(draws.var(0) / np.diag(cov) - 1) < 0.3), (draws.var(0) / np.diag(cov), out["accept"])
    assert np.all(out["accept"] > 0.6), out["accept"]  # the adaptation aimed at 0.8
