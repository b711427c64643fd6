"""The public simplex samplers ``scir`` / ``sgrld`` (SPEC §9) against exact answers.

Many chains instead of long runs: K independent chains stepped together give K iid draws of the
state after M steps, whose law is known exactly (the Dirichlet posterior; Corollary 5.4.2's mean).
Exact answers come from ``tests/reference_simplex.py`` (numpy/scipy, no sgmcmc code).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from scipy import stats  # noqa: E402

import reference_simplex as ref  # noqa: E402
import sgmcmc  # noqa: E402

COUNTS = ref.RUNNING_COUNTS  # 800, 100, 100, 0 × 7
ALPHA = ref.RUNNING_ALPHA  # 0.1
D = len(COUNTS)
LABELS = {"z": np.repeat(np.arange(D), COUNTS).astype(np.int32)}  # N = 1000 categorical rows
START = {"omega": np.full(D, 1.0 / D)}


def category_counts(params, minibatch, seed):
    return {"omega": tf.reduce_sum(tf.one_hot(minibatch["z"], D, dtype=params["omega"].dtype), axis=0)}


def final_states(method, h, n_iters, n_chains, minibatch_size, seed=1, **kw):
    out = getattr(sgmcmc, method)(
        category_counts, LABELS, START, h, ALPHA, minibatch_size, n_iters=n_iters, verbose=False, seed=seed,
        n_chains=n_chains, burn_in=n_iters - 1, **kw,
    )
    return out["omega"][:, 0]  # (n_chains, D): the state after n_iters iterations


def test_scir_all_data_matches_the_dirichlet_posterior():
    """With the minibatch = all data, â = a exactly and SCIR is the exact CIR: after Mh = 20 the
    400 chains are iid Dir(counts + α) up to e^(−20); every marginal passes KS (p > 1e-3), the
    sparse ones (Beta(0.1, 1000)) included."""
    omega = final_states("scir", 1.0, 20, 400, len(LABELS["z"]))
    a_post = COUNTS + ALPHA
    pvals = [stats.kstest(omega[:, j], lambda x: ref.dirichlet_marginal_cdf(x, a_post, j)).pvalue for j in range(D)]
    assert min(pvals) > 1e-3, np.round(pvals, 4)


def theta_after(m, h, k, seed):
    """θ after m SCIR steps of k chains on minibatches of 10. θ is the kernel's state (log θ in the
    sampler's aux): the public API returns ω = θ/Σθ only. Σâ = Σα + N whatever the minibatch, so
    θ₀ = ω₀Σâ is not random and Corollary 5.4.2 applies with a fixed θ₀."""
    s = sgmcmc.scir_setup(category_counts, LABELS, START, h, ALPHA, 10, seed=seed, n_chains=k)
    sgmcmc.sample_chain(s, m, verbose=False, burn_in=m - 1)
    return np.exp(s.variables.aux["log_theta"]["omega"].numpy().astype(np.float64))


def corollary_z(theta, h, m):
    a = COUNTS + ALPHA
    mean, var = ref.scir_moments(START["omega"] * a.sum(), a, h, m, ref.var_a_hat(COUNTS, 10))
    return z_scores(theta, mean, var)


def z_scores(x, mean, var):
    """z-scores of the sample mean and the sample variance of the rows of x (replicates × d)."""
    r = len(x)
    c = x - x.mean(0)
    v = (c**2).mean(0)
    return (x.mean(0) - mean) / np.sqrt(var / r), (v - var) / np.sqrt(((c**4).mean(0) - v**2) / r)


def test_scir_mean_and_variance_after_m_steps_match_corollary_5_4_2():
    """Minibatch 10 of 1000, h = 0.1, M = 10 (Mh = 1, far from stationarity), 3000 chains:
    E[θ_M] = θ₀e^(−Mh) + a(1 − e^(−Mh)) and Var[θ_M] = the exact CIR's + (1 − e^(−2Mh))(1 − e^(−h))/
    (1 + e^(−h)) Var[â], Var[â] hypergeometric; |z| < 5 for every component."""
    zm, zv = corollary_z(theta_after(10, 0.1, 3000, seed=3), 0.1, 10)
    assert np.all(np.abs(zm) < 5), np.round(zm, 2)
    assert np.all(np.abs(zv) < 5), np.round(zv, 2)


def test_sgrld_is_visibly_biased_at_a_large_stepsize_where_scir_is_not():
    """All data, h = 0.5: SGRLD's sparse components are far from Beta(0.1, 1000) (thesis §5.2.3);
    SCIR's are right. KS distance of the pooled sparse components."""
    a_post = COUNTS + ALPHA
    ks = {}
    for method in ("scir", "sgrld"):
        omega = final_states(method, 0.5, 40, 300, len(LABELS["z"]))
        ks[method] = stats.kstest(omega[:, 3:].ravel(), lambda x: ref.dirichlet_marginal_cdf(x, a_post, 3)).statistic
    assert ks["scir"] < 0.05, ks
    assert ks["sgrld"] > 0.3, ks


def lda_like_counts(params, minibatch, seed):
    beta = params["beta"]
    words = tf.one_hot(minibatch["w"], 5, dtype=beta.dtype)  # [n, 5]
    topic = tf.random.stateless_categorical(tf.math.log(tf.transpose(beta)), 1, seed)  # a random allocation
    z = tf.one_hot(tf.gather(topic[:, 0], minibatch["w"]), 3, dtype=beta.dtype)  # [n, 3]
    return {"beta": tf.linalg.matmul(z, words, transpose_a=True), "pi": tf.reduce_sum(z, 0)}


STACKED_DATA = {"w": np.arange(200) % 5}
STACKED_START = {"beta": np.full((3, 5), 0.2), "pi": np.array([0.5, 0.25, 0.25])}


@pytest.mark.parametrize("method", ["scir", "sgrld"])
def test_stacked_simplices_shapes_and_every_sample_on_the_simplex(method):
    h = 0.5 if method == "scir" else 0.01
    out = getattr(sgmcmc, method)(
        lda_like_counts, STACKED_DATA, STACKED_START, h, {"beta": 0.01, "pi": [1.0, 2.0, 3.0]}, 20,
        n_iters=30, verbose=False, seed=4, n_chains=2, burn_in=10, thin=2,
    )
    assert out["beta"].shape == (2, 10, 3, 5) and out["pi"].shape == (2, 10, 3)
    assert out.log_posterior.shape == (2, 10) and np.all(np.isfinite(out.log_posterior))
    assert out.gradients is None
    for v in out.values():
        assert np.all(v >= 0)
        np.testing.assert_allclose(v.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("method", ["scir", "sgrld"])
def test_same_seed_same_chain_and_step_api_equals_whole_chain(method):
    """A second sampler with the same seed, stepped by the step API, gives the whole chain's arrays
    bit for bit (so the same seed gives the same chain, and one step function serves both APIs);
    another seed gives another chain."""
    h = 0.5 if method == "scir" else 0.01
    kw = dict(seed=11, n_chains=2)
    whole = getattr(sgmcmc, method)(lda_like_counts, STACKED_DATA, STACKED_START, h, 0.1, 20, n_iters=15, verbose=False, **kw)
    other = getattr(sgmcmc, method)(lda_like_counts, STACKED_DATA, STACKED_START, h, 0.1, 20, n_iters=15, verbose=False, seed=12, n_chains=2)
    s = getattr(sgmcmc, method + "_setup")(lda_like_counts, STACKED_DATA, STACKED_START, h, 0.1, 20, **kw)
    sess = sgmcmc.init_sess(s)
    steps = []
    for _ in range(15):
        sgmcmc.sgmcmc_step(s, sess)
        steps.append(sgmcmc.get_params(s, sess))
    for name in whole:
        assert not np.array_equal(whole[name], other[name])
        np.testing.assert_array_equal(np.stack([p[name] for p in steps], axis=1), whole[name])


def test_chains_are_independent():
    """1000 chains, one SCIR step with h = 3: the spread across chains is Corollary 5.4.2's variance,
    most of it from â (chains sharing minibatches would spread 4× less in ω₀'s θ), and pairs (chain
    2i, chain 2i+1) are uncorrelated (shared noise would correlate them)."""
    theta = theta_after(1, 3.0, 1000, seed=5)
    zm, zv = corollary_z(theta, 3.0, 1)
    assert np.all(np.abs(zv) < 5), np.round(zv, 2)
    for j in range(D):
        r = np.corrcoef(theta[0::2, j], theta[1::2, j])[0, 1]
        assert abs(r) < 4 / np.sqrt(500), (j, r)


def _bad(**changes):
    args = dict(counts=category_counts, dataset=LABELS, params=START, stepsize=0.1, alpha=ALPHA, minibatch_size=10)
    args.update(changes)
    return args


@pytest.mark.parametrize(
    "changes, error, match",
    [
        (dict(params={"omega": np.full(D, 0.2)}), ValueError, "not on the simplex.*divide by the sum"),
        (dict(params={"omega": np.r_[-0.1, 0.2, np.full(8, 0.1125)]}), ValueError, "negative"),
        (dict(params={"omega": 1.0}), ValueError, "last axis of at least 2"),
        (dict(alpha=-1.0), ValueError, "alpha must be positive"),
        (dict(alpha={"w": 0.1}), ValueError, "exactly the names"),
        (dict(alpha=np.ones(3)), ValueError, "does not broadcast"),
        (dict(stepsize=-0.1), ValueError, "stepsize must be positive"),
        (dict(counts=lambda p, b, s: {"omega": tf.ones([3])}), ValueError, "shape"),
        (dict(counts=lambda p, b, s: {"x": tf.ones([D])}), ValueError, "names"),
        (dict(counts=lambda p, b, s: {"omega": -tf.ones([D])}), ValueError, "negative"),
        (dict(counts=lambda p, b, s: {"omega": tf.ones([D], tf.float64)}), TypeError, "float64.*tf.cast"),
        (dict(counts="counts"), TypeError, "counts must be a function"),
        (dict(minibatch_size=5000), ValueError, "larger than the dataset"),
    ],
)
def test_bad_inputs_raise_before_compiling(changes, error, match):
    with pytest.raises(error, match=match):
        sgmcmc.scir_setup(**_bad(**changes))


def test_store_gradients_is_refused_and_burn_in_checked():
    s = sgmcmc.sgrld_setup(**_bad())
    with pytest.raises(ValueError, match="store_gradients does not apply"):
        sgmcmc.sample_chain(s, 10, verbose=False, store_gradients=True)
    with pytest.raises(TypeError):
        sgmcmc.scir(**_bad(), n_iters=10, store_gradients=True)
    with pytest.raises(ValueError, match="burn_in"):
        sgmcmc.scir(**_bad(), n_iters=10, burn_in=10)


def test_divergence_is_reported_with_the_samples_so_far():
    """A counts function that gives NaN after some iterations (only in-graph: the trial call sees
    finite counts) stops the chain with DivergenceError carrying the kept samples."""

    def nan_late(params, minibatch, seed):
        c = category_counts(params, minibatch, seed)["omega"]
        u = tf.random.stateless_uniform([], seed, dtype=c.dtype)
        bad = tf.logical_and(u < 0.2, tf.reduce_all(seed != 0))
        return {"omega": tf.where(bad, c * np.nan, c)}

    with pytest.raises(sgmcmc.DivergenceError) as caught:
        sgmcmc.scir(**_bad(counts=nan_late), n_iters=200, verbose=False, seed=1)
    assert "smaller stepsize" in str(caught.value)
    assert caught.value.samples["omega"].shape[1:] == (D,)
