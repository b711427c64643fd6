"""Output shapes (matrix, scalar, several parameters), sparse gradients through tf.gather,
seeds, and what row i of the output is (SPEC §2, §4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

tfd = tfp.distributions

SAMPLERS = ("sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv")
CV_SAMPLERS = ("sgldcv", "sghmccv", "sgnhtcv")
#: Seeds and the gather/one-hot equality are properties of the random streams and the estimator,
#: shared by every dynamics: one plain and one CV sampler with inner steps cover them (each run
#: compiles anew, ~5 s; all six took 250 s of the suite).
PAIR = ("sgld", "sghmccv")


def _short_opt(name):
    """A short mode search for the CV samplers (nothing for the others)."""
    return dict(n_iters_opt=200) if name in CV_SAMPLERS else {}


# -- (a) shapes -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def matrix_model():
    """x_i (2x2) ~ N(M, 1) elementwise, prior M_jk ~ N(0, 5^2): posterior per element has
    precision N + 1/25 and mean sum_i x_ijk / precision."""
    rng = np.random.default_rng(31)
    n_rows = 5_000
    true = np.array([[1.0, -1.0], [0.5, 2.0]])
    x = (true + rng.normal(size=(n_rows, 2, 2))).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["M"], 1.0).log_prob(dataset["x"]))

    def log_prior(params):
        return tf.reduce_sum(tfd.Normal(0.0, 5.0).log_prob(params["M"]))

    precision = n_rows + 1 / 25
    return dict(
        log_lik=log_lik,
        log_prior=log_prior,
        dataset={"x": x},
        params={"M": np.zeros((2, 2))},
        mean=x.astype(np.float64).sum(axis=0) / precision,
        sd=precision**-0.5,
    )


def test_matrix_parameter_shape_and_posterior(matrix_model):
    m = matrix_model
    out = sgmcmc.sgldcv(
        m["log_lik"], m["dataset"], m["params"], 1e-4, 1e-5, log_prior=m["log_prior"], minibatch_size=100,
        n_iters=3_000, n_iters_opt=1_000, verbose=False, seed=1,
    )
    assert list(out) == ["M"]
    assert out["M"].shape == (3_000, 2, 2)
    error = np.abs(out["M"][300:].mean(axis=0) - m["mean"])
    assert np.all(error < m["sd"]), f"posterior mean errors {error} vs sd {m['sd']}"
    ratio = out["M"][300:].std(axis=0) / m["sd"]
    assert np.all((ratio > 0.7) & (ratio < 1.3)), ratio


@pytest.mark.parametrize("name", SAMPLERS)
def test_scalar_parameter_gives_1d_output(name, small_gauss, run):
    out = run(name, small_gauss, n_iters=200, seed=2, **_short_opt(name))
    assert out["theta"].shape == (200,)
    assert np.ndim(small_gauss.params["theta"]) == 0
    # the last 100 rows are near the posterior (plain samplers inflate the spread ~6x)
    assert abs(out["theta"][100:].mean() - small_gauss.mean[0]) < 10 * small_gauss.sd[0]


@pytest.fixture(scope="module")
def regression_model():
    """y_i = a + z_i . b + N(0, 1) noise, a scalar and b in R^3, prior N(0, 5^2) on each:
    exact Gaussian posterior with precision X'X + I/25, X = [1, z]."""
    rng = np.random.default_rng(32)
    n_rows = 5_000
    z = rng.normal(size=(n_rows, 3))
    y = 0.7 + z @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=n_rows)
    z, y = z.astype(np.float32), y.astype(np.float32)

    def log_lik(params, dataset):
        mean = params["a"] + tf.linalg.matvec(dataset["z"], params["b"])
        return tf.reduce_sum(tfd.Normal(mean, 1.0).log_prob(dataset["y"]))

    def log_prior(params):
        return tfd.Normal(0.0, 5.0).log_prob(params["a"]) + tf.reduce_sum(tfd.Normal(0.0, 5.0).log_prob(params["b"]))

    design = np.column_stack([np.ones(n_rows), z.astype(np.float64)])
    precision = design.T @ design + np.eye(4) / 25
    cov = np.linalg.inv(precision)
    mean = cov @ design.T @ y.astype(np.float64)
    return dict(
        log_lik=log_lik,
        log_prior=log_prior,
        dataset={"z": z, "y": y},
        params={"a": 0.0, "b": np.zeros(3)},
        mean=mean,
        sd=np.sqrt(np.diag(cov)),
        curvature=np.diag(precision),
    )


def test_two_parameters_of_different_shapes_with_stepsize_dict(regression_model):
    """A scalar and a vector parameter, with a stepsize per parameter. The stepsizes are
    chosen so the discretisation inflates a's sd by ~2x (eps*lambda/4 = 0.75) and b's by
    ~1%: the sd of each parameter shows that its own stepsize was used."""
    m = regression_model
    stepsize = {"a": 3.0 / m["curvature"][0], "b": 2e-5}
    out = sgmcmc.sgldcv(
        m["log_lik"], m["dataset"], m["params"], stepsize, 1e-5, log_prior=m["log_prior"], minibatch_size=100,
        n_iters=4_000, n_iters_opt=1_000, verbose=False, seed=3,
    )
    assert set(out) == {"a", "b"}
    assert out["a"].shape == (4_000,)
    assert out["b"].shape == (4_000, 3)
    samples = np.column_stack([out["a"], out["b"]])[400:]
    error = np.abs(samples.mean(axis=0) - m["mean"])
    assert np.all(error < m["sd"]), f"mean errors {error} vs sd {m['sd']}"
    ratio = samples.std(axis=0) / m["sd"]
    # SGLD with an exact gradient: stationary variance 1 / (lambda (1 - eps lambda / 4))
    expected = 1 / np.sqrt(1 - np.array([stepsize["a"]] + 3 * [stepsize["b"]]) * m["curvature"] / 4)
    np.testing.assert_allclose(ratio, expected, rtol=0.2)
    assert ratio[0] > 1.6 and np.all(ratio[1:] < 1.25)


def test_stepsize_dict_equal_to_number(regression_model):
    m = regression_model
    args = dict(log_prior=m["log_prior"], minibatch_size=100, n_iters=200, verbose=False, seed=4)
    a = sgmcmc.sgld(m["log_lik"], m["dataset"], m["params"], {"a": 1e-5, "b": 1e-5}, **args)
    b = sgmcmc.sgld(m["log_lik"], m["dataset"], m["params"], 1e-5, **args)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# -- (b) sparse: a parameter used through tf.gather -------------------------------------------

N_GROUPS = 200


@pytest.fixture(scope="module")
def sparse_model():
    """R's testSparse: 200 groups, group g has 5-15 observations ~ N(g, 1); u_g ~ N(0, 10^2).
    Exact posterior per group: precision n_g + 1/100, mean sum_{i in g} x_i / precision."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(5, 16, size=N_GROUPS)
    group = np.repeat(np.arange(N_GROUPS), sizes)
    x = group + rng.normal(size=len(group))
    order = rng.permutation(len(x))
    group, x = group[order], x[order].astype(np.float32)

    def log_lik_gather(params, dataset):
        return tf.reduce_sum(tfd.Normal(tf.gather(params["u"], dataset["group"]), 1.0).log_prob(dataset["x"]))

    def log_lik_one_hot(params, dataset):
        means = tf.linalg.matvec(tf.one_hot(dataset["group"], N_GROUPS, dtype=tf.float32), params["u"])
        return tf.reduce_sum(tfd.Normal(means, 1.0).log_prob(dataset["x"]))

    def log_prior(params):
        return tf.reduce_sum(tfd.Normal(0.0, 10.0).log_prob(params["u"]))

    precision = np.bincount(group, minlength=N_GROUPS) + 1 / 100
    mean = np.bincount(group, weights=x.astype(np.float64), minlength=N_GROUPS) / precision
    return dict(
        log_lik_gather=log_lik_gather,
        log_lik_one_hot=log_lik_one_hot,
        log_prior=log_prior,
        dataset={"x": x, "group": group},
        params={"u": np.arange(N_GROUPS) + rng.normal(size=N_GROUPS)},
        mean=mean,
        sd=precision**-0.5,
    )


SPARSE_SETTINGS = {
    "sgld": dict(stepsize=1e-3),
    "sghmc": dict(stepsize=1e-4, alpha=0.1, L=3),
    "sgnht": dict(stepsize=5e-5),
    "sgldcv": dict(stepsize=1e-3, opt_stepsize=1e-4, n_iters_opt=200),
    "sghmccv": dict(stepsize=1e-4, alpha=0.1, L=3, opt_stepsize=1e-4, n_iters_opt=200),
    "sgnhtcv": dict(stepsize=1e-4, opt_stepsize=1e-4, n_iters_opt=200),
}


def test_integer_group_labels_stay_integers(sparse_model):
    seen = {}

    def log_lik(params, dataset):
        seen["group"] = dataset["group"].dtype
        return sparse_model["log_lik_gather"](params, dataset)

    sgmcmc.sgld_setup(log_lik, sparse_model["dataset"], sparse_model["params"], 1e-3, minibatch_size=100)
    assert seen["group"].is_integer


@pytest.mark.parametrize("name", PAIR)
def test_sparse_gather_equals_dense_one_hot(name, sparse_model):
    m = sparse_model
    args = dict(SPARSE_SETTINGS[name], log_prior=m["log_prior"], minibatch_size=100, n_iters=300, verbose=False, seed=4)
    sampler = getattr(sgmcmc, name)
    gathered = sampler(m["log_lik_gather"], m["dataset"], m["params"], **args)["u"]
    dense = sampler(m["log_lik_one_hot"], m["dataset"], m["params"], **args)["u"]
    assert gathered.shape == (300, N_GROUPS)
    assert np.all(np.isfinite(gathered))
    np.testing.assert_allclose(gathered, dense, rtol=1e-5, atol=1e-4)
    # every element diffuses each step (no touched-rows-only update): each of the 200
    # coordinates moves in (nearly) every step, although a minibatch of 100 rows misses most
    # groups (a few float32 steps round to no change at values near 200)
    moved = np.mean(np.diff(gathered[-50:], axis=0) != 0, axis=0)
    assert moved.min() > 0.9, moved.min()


def test_sparse_sgldcv_posterior_means(sparse_model):
    m = sparse_model
    out = sgmcmc.sgldcv(
        m["log_lik_gather"], m["dataset"], m["params"], 1e-3, 1e-4, log_prior=m["log_prior"], minibatch_size=100,
        n_iters=5_000, n_iters_opt=1_000, verbose=False, seed=4,
    )["u"][500:]
    z = np.abs(out.mean(axis=0) - m["mean"]) / m["sd"]
    assert z.max() < 3, f"worst group: {z.argmax()} off by {z.max():.2f} posterior sd"
    ratio = out.std(axis=0) / m["sd"]
    # per-group spread is right on average (touched-rows-only updates would shrink it)
    assert 0.8 < np.median(ratio) < 1.25, np.median(ratio)


# -- (c) seeds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAIR)
def test_seeds(name, small_gauss, run):
    kwargs = dict(n_iters=150, **_short_opt(name))
    a = run(name, small_gauss, seed=10, **kwargs)["theta"]
    b = run(name, small_gauss, seed=10, **kwargs)["theta"]
    c = run(name, small_gauss, seed=11, **kwargs)["theta"]
    d = run(name, small_gauss, seed=None, **kwargs)["theta"]
    e = run(name, small_gauss, seed=None, **kwargs)["theta"]
    assert np.array_equal(a, b)
    assert not np.any(a == c), "different seeds should give different chains"
    assert not np.any(d == e), "seed=None twice should give different chains"
    assert not np.any(d == a)


def test_seed_is_numpy_integer_too(small_gauss, run):
    a = run("sgld", small_gauss, n_iters=100, seed=np.int64(10))["theta"]
    b = run("sgld", small_gauss, n_iters=100, seed=10)["theta"]
    assert np.array_equal(a, b)


@pytest.mark.parametrize("name", ["sgnht", "sghmccv"])
def test_chunking_and_verbose_do_not_change_the_chain(name, small_gauss, run, monkeypatch, capsys):
    """The chain is run in compiled chunks whose length adapts to timing and to verbose; the
    samples must not depend on where the chunk boundaries fall."""
    import sgmcmc.run.chain

    reference = run(name, small_gauss, n_iters=1_000, seed=12, **_short_opt(name))["theta"]
    monkeypatch.setattr(sgmcmc.run.chain, "FIRST_CHUNK", 7)
    monkeypatch.setattr(sgmcmc.run.chain, "MAX_CHUNK", 50)
    rechunked = run(name, small_gauss, n_iters=1_000, seed=12, **_short_opt(name))["theta"]
    np.testing.assert_array_equal(rechunked, reference)
    monkeypatch.undo()
    chatty = run(name, small_gauss, n_iters=1_000, seed=12, verbose=True, **_short_opt(name))["theta"]
    np.testing.assert_array_equal(chatty, reference)
    assert "1000/1000" in capsys.readouterr().err  # the progress bar reached the end


# -- (d) what row i is --------------------------------------------------------------------------


def test_row_i_is_state_after_iteration_i(small_gauss):
    """SGLD with the full dataset as minibatch has an exact gradient, so theta_k is Gaussian
    with mean m + rho^k (theta_0 - m), rho = 1 - eps*lambda/2, and variance
    eps * sum_{j<k} rho^(2j). Row i must match k = i + 1 (the start is not stored)."""
    m = small_gauss
    eps, start = 1e-4, 3.0
    out = sgmcmc.sgld(
        m.log_lik, m.dataset, {"theta": start}, eps, log_prior=m.log_prior, minibatch_size=m.n_rows,
        n_iters=30, verbose=False, seed=5,
    )["theta"]
    lam = 1 / m.cov[0, 0]
    rho = 1 - eps * lam / 2
    k = np.arange(31)
    mean_k = m.mean[0] + rho**k * (start - m.mean[0])
    sd_k = np.sqrt(eps * np.cumsum(np.r_[0.0, rho ** (2 * k[:-1])]))
    z_after = (out - mean_k[1:]) / sd_k[1:]
    assert np.all(np.abs(z_after) < 4.5), z_after
    # the first row is one step (about 15 noise sd of drift) away from the start
    assert abs(out[0] - start) > 8 * np.sqrt(eps)


@pytest.mark.parametrize("name", CV_SAMPLERS)
def test_cv_chain_starts_at_mode_estimate(name, gauss1d, run, setup):
    """CV samplers start at the optimiser's estimate: with a tiny sampling stepsize the first
    row is one small step from that estimate (the same seed gives the same estimate in the
    step API), which is near the exact mode and far from the starting value 3.0 (300
    posterior sd away)."""
    m = dataclasses.replace(gauss1d, params={"theta": 3.0})
    kwargs = dict(stepsize=1e-6, minibatch_size=1_000, seed=6)
    out = run(name, m, n_iters=10, **kwargs)["theta"]
    sampler = setup(name, m, **kwargs)
    mode_estimate = sgmcmc.get_params(sampler, sgmcmc.init_sess(sampler, verbose=False))["theta"]
    sd = m.sd[0]
    assert abs(mode_estimate - m.mean[0]) < 4 * sd
    assert abs(out[0] - m.mean[0]) < 4 * sd
    # one step of size about sqrt(eps) * L <= 0.3 posterior sd
    assert abs(out[0] - mode_estimate) < 0.5 * sd
