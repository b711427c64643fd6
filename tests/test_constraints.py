"""Constrained parameters (SPEC §10, issue 13 items 3–4) and ``n_iters_opt=0``.

The posterior check: x_i ~ N(0, σ²), i = 1..N (N = 6, known mean), prior σ² ~ InvGamma(a = 2, b)
written as a density of σ (``log_prior(σ) = log IG(σ²) + log 2σ``). The posterior of σ² is
InvGamma(a + N/2, b + Σx²/2). σ is sampled through Exp (SGLD) and Softplus (SGLD-CV anchored at
the start) with many chains, and the sampled σ² is compared with that inverse gamma by the
Kolmogorov–Smirnov distance D of the pooled, thinned draws. σ ≈ 0.2, where Softplus behaves
like Exp, so the Jacobian (≈ σ for both) shifts the posterior by about half a unit of shape:
dropping it (a test-only monkeypatch of :meth:`Constrained.log_det_jacobian`) must fail the
same check.

Calibration (10 chains, ε = 3e-3, N = 6, minibatch 3, 10,000 iterations, burn-in 500, thin 20:
4,750 draws; KS distance D of σ² to the exact inverse gamma):

    right Jacobian  sgld/Exp       seeds 1–4: 0.0151 0.0084 0.0158 0.0213
                    sgldcv/Softplus seeds 1–4: 0.0111 0.0101 0.0179 0.0304
    no Jacobian     sgld/Exp       seeds 1–2: 0.0860 0.0920
                    sgldcv/Softplus seeds 1–2: 0.0797 0.0864

(With 4,000 iterations seed 3 reached 0.048/0.057, too close to the wrong variant.) The
tolerance KS_TOL = 0.045 sits between the largest right D and the smallest wrong one; the
expected D of the wrong variant is the KS distance between InvGamma(a + N/2) and
InvGamma(a + N/2 + 1/2), 0.090.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
from sgmcmc import constraints as C

tfb, tfd = tfp.bijectors, tfp.distributions

N, A, B, SIGMA = 6, 2.0, 0.04, 0.2
KS_TOL = 0.045  # see the module docstring


def sd_model(seed: int = 3):
    x = np.random.default_rng(seed).normal(0, SIGMA, N)

    def log_lik(p, d):
        return tf.reduce_sum(tfd.Normal(tf.constant(0.0, tf.float64), p["sd"]).log_prob(d["x"]))

    def log_prior(p):  # σ² ~ InvGamma(A, B), as a density of σ
        s = p["sd"]
        ig = tfd.InverseGamma(tf.constant(A, tf.float64), tf.constant(B, tf.float64))
        return ig.log_prob(s**2) + tf.math.log(2 * s)

    posterior = st.invgamma(A + N / 2, scale=B + (x**2).sum() / 2)
    return log_lik, log_prior, {"x": x}, posterior


def ks_of_variance(method: str, bijector, seed: int, n_iters: int = 10_000, n_chains: int = 10) -> float:
    log_lik, log_prior, data, posterior = sd_model()
    extra = dict(opt_stepsize=1e-4, n_iters_opt=0) if method.endswith("cv") else {}
    out = getattr(sgmcmc, method)(
        log_lik, data, {"sd": float(np.sqrt(posterior.median()))}, 3e-3, log_prior=log_prior, minibatch_size=3,
        n_iters=n_iters, burn_in=500, thin=20, n_chains=n_chains, verbose=False, seed=seed, dtype=tf.float64,
        constraints={"sd": bijector}, **extra,
    )
    assert np.all(out["sd"] > 0)
    np.testing.assert_allclose(out["sd"], bijector.forward(out.unconstrained["sd"]).numpy(), rtol=1e-12)
    return st.kstest(out["sd"].ravel() ** 2, posterior.cdf).statistic


def _no_jacobian(self, params):
    """The broken variant: the log prior without log|det J|."""
    return tf.constant(0.0, self.dtype)


CASES = [("sgld", tfb.Exp()), ("sgldcv", tfb.Softplus())]


@pytest.mark.parametrize("method, bijector", CASES, ids=["sgld-Exp", "sgldcv-Softplus"])
def test_posterior_of_the_sd(method, bijector):
    d = ks_of_variance(method, bijector, seed=1)
    assert d < KS_TOL, f"KS distance {d:.4f} to the exact inverse-gamma posterior of σ²"


@pytest.mark.parametrize("method, bijector", CASES, ids=["sgld-Exp", "sgldcv-Softplus"])
def test_wrong_jacobian_fails_the_same_check(method, bijector, monkeypatch):
    monkeypatch.setattr(C.Constrained, "log_det_jacobian", _no_jacobian)
    d = ks_of_variance(method, bijector, seed=1)
    assert d > KS_TOL, f"without the Jacobian the KS distance is only {d:.4f}: the check cannot see it"


# -- shapes: starts in, samples out ------------------------------------------------------------


def _simplex_model():
    y = np.random.default_rng(0).choice(3, size=200, p=[0.2, 0.3, 0.5]).astype(np.int32)

    def log_lik(p, d):
        return tf.reduce_sum(tf.math.log(tf.gather(p["w"], d["y"])))

    return log_lik, None, {"y": y}, {"w": np.array([0.3, 0.3, 0.4])}


def _cholesky_model(bijector_name: str):
    d = 3 if bijector_name == "CorrelationCholesky" else 2
    corr = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]])[:d, :d]
    x = np.random.default_rng(1).multivariate_normal(np.zeros(d), corr, size=200).astype(np.float32)

    def log_lik(p, data):
        return tf.reduce_sum(tfd.MultivariateNormalTriL(tf.zeros(d), scale_tril=p["L"]).log_prob(data["x"]))

    log_prior = (lambda p: tfd.CholeskyLKJ(d, 2.0).log_prob(p["L"])) if d == 3 else None
    return log_lik, log_prior, {"x": x}, {"L": np.eye(d)}


SHAPE_CASES = {  # bijectors are made in the test: SoftmaxCentered cannot be built with numpy >= 2.4
    "SoftmaxCentered": (_simplex_model, (3,), (2,)),
    "IteratedSigmoidCentered": (_simplex_model, (3,), (2,)),
    "CorrelationCholesky": (lambda: _cholesky_model("CorrelationCholesky"), (3, 3), (3,)),
    "FillScaleTriL": (lambda: _cholesky_model("FillScaleTriL"), (2, 2), (3,)),
}


def _bijector(name: str):
    try:
        return getattr(tfb, name)()
    except TypeError as error:  # TFP 0.25's Pad calls np.reshape(..., newshape=), gone in numpy 2.4
        pytest.skip(f"tfb.{name}() cannot be built with this TFP/numpy: {error}")


@pytest.fixture(scope="module")
def correlation_cholesky():
    """The CorrelationCholesky model and one sgld run on it (2 chains, 300 iterations, every row
    in the minibatch, gradients stored), shared by the shapes test (its CorrelationCholesky case)
    and the full-gradient test: the LKJ model is the costliest to compile here."""
    log_lik, log_prior, data, params = _cholesky_model("CorrelationCholesky")
    bijector = tfb.CorrelationCholesky()
    out = sgmcmc.sgld(
        log_lik, data, params, 1e-4, log_prior=log_prior, minibatch_size=len(data["x"]), n_iters=300, verbose=False,
        seed=2, n_chains=2, store_gradients=True, constraints={"L": bijector},
    )
    return log_lik, log_prior, data, params, bijector, out


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_shapes_round_trip(name, request):
    """Draws, unconstrained values and gradients of each bijector's shapes; the step API's
    constrained get_params and unconstrained sampler.params. The step-API part runs for the
    simplex and FillScaleTriL cases only: get_params maps the state by the same
    ``Constrained.to_constrained`` as the whole chain's draws (checked for every case here), and
    FillScaleTriL is the same matrix <-> vector case as CorrelationCholesky, whose step sampler
    (the LKJ model) was the costliest compile of this file."""
    make, shape, unc_shape = SHAPE_CASES[name]
    if name == "CorrelationCholesky":  # every row in the minibatch: the run serves the full-gradient test too
        log_lik, log_prior, data, params, bijector, out = request.getfixturevalue("correlation_cholesky")
        name_ = "L"
    else:
        bijector = _bijector(name)
        log_lik, log_prior, data, params = make()
        name_ = next(iter(params))
        out = sgmcmc.sgld(
            log_lik, data, params, 1e-4, log_prior=log_prior, minibatch_size=50, n_iters=300, verbose=False, seed=2,
            n_chains=2, store_gradients=True, constraints={name_: bijector},
        )
    draws, unc = out[name_], out.unconstrained[name_]
    assert draws.shape == (2, 300, *shape) and unc.shape == (2, 300, *unc_shape)
    assert out.gradients[name_].shape == unc.shape  # gradients are taken on the unconstrained scale
    assert out.settings["constraints"] == {name_: bijector}
    np.testing.assert_allclose(draws, bijector.forward(unc).numpy(), rtol=1e-5, atol=1e-6)
    if name in ("SoftmaxCentered", "IteratedSigmoidCentered"):
        assert np.all(draws > 0) and np.allclose(draws.sum(-1), 1, atol=1e-5)
    else:
        assert np.allclose(np.triu(draws, 1), 0) and np.all(np.diagonal(draws, axis1=-2, axis2=-1) > 0)
        if name == "CorrelationCholesky":  # rows of unit length: L Lᵀ is a correlation matrix
            assert np.allclose(np.linalg.norm(draws, axis=-1), 1, atol=1e-5)
            return
    # Step API: get_params is constrained, sampler.params holds the chain's unconstrained state.
    sampler = sgmcmc.sgld_setup(
        log_lik, data, params, 1e-4, log_prior=log_prior, minibatch_size=50, seed=2, constraints={name_: bijector}
    )
    sess = sgmcmc.init_sess(sampler)
    np.testing.assert_allclose(sgmcmc.get_params(sampler, sess)[name_], params[name_], atol=1e-6)
    sgmcmc.sgmcmc_step(sampler, sess)
    assert sgmcmc.get_params(sampler, sess)[name_].shape == shape
    assert tuple(sampler.params[name_].shape) == unc_shape


def test_full_gradients_agree_with_the_sampler(correlation_cholesky):
    """``full_gradients`` (which reads settings["constraints"]) and the sampler's own estimate
    with every row in the minibatch are the same exact gradient: same Jacobian, same event_ndims
    (both chains, all 300 stored iterations of the shared run)."""
    log_lik, log_prior, data, _, _, out = correlation_cholesky
    exact = sgmcmc.full_gradients(log_lik, data, out, log_prior)
    np.testing.assert_allclose(exact["L"], out.gradients["L"], rtol=1e-3, atol=1e-3)


# -- refused before anything is built ------------------------------------------------------------


@pytest.fixture
def no_sampler(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("a Sampler was built before the bad start was reported")

    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "__init__", refuse)


def _scalar_model():
    def log_lik(p, d):
        return tf.reduce_sum(tfd.Normal(0.0, p["s"]).log_prob(d["x"]))

    return log_lik, {"x": np.ones(50, np.float32)}


@pytest.mark.parametrize(
    "bijector, start, shape_name",
    [
        (tfb.Softplus(), -1.0, "s"),
        (tfb.Exp(), 0.0, "s"),
        (tfb.IteratedSigmoidCentered(), [0.5, 0.5, 0.5], "w"),
        (tfb.CorrelationCholesky(), 2 * np.eye(2), "L"),
    ],
    ids=["Softplus-negative", "Exp-zero", "IteratedSigmoidCentered-off-simplex", "CorrelationCholesky-not-unit-rows"],
)
@pytest.mark.parametrize("setup", [False, True])
def test_start_outside_the_support_is_refused(bijector, start, shape_name, setup, no_sampler):
    log_lik, data = _scalar_model()
    if shape_name != "s":
        def log_lik(p, d):  # noqa: F811 - any function of the parameter; never called
            return tf.reduce_sum(d["x"]) * tf.reduce_sum(p[shape_name])
    fn = sgmcmc.sgld_setup if setup else sgmcmc.sgld
    with pytest.raises(ValueError, match=rf"params\['{shape_name}'\] is outside the support.*{type(bijector).__name__}"):
        fn(log_lik, data, {shape_name: start}, 1e-4, constraints={shape_name: bijector})


def test_bad_constraints_arguments(no_sampler):
    log_lik, data = _scalar_model()
    with pytest.raises(ValueError, match=r"constraints names \['t'\] are not parameters"):
        sgmcmc.sgld(log_lik, data, {"s": 1.0}, 1e-4, constraints={"t": tfb.Exp()})
    with pytest.raises(TypeError, match=r"constraints\['s'\] must be a tfp.bijectors.Bijector"):
        sgmcmc.sgld(log_lik, data, {"s": 1.0}, 1e-4, constraints={"s": "positive"})
    with pytest.raises(ValueError, match=r"outside the support"):  # a list of starts: every one is checked
        sgmcmc.sgld(log_lik, data, [{"s": 1.0}, {"s": -1.0}], 1e-4, n_chains=2, constraints={"s": tfb.Exp()})


def test_flat_prior_still_adds_the_jacobian():
    log_lik, data = _scalar_model()
    sampler = sgmcmc.sgld_setup(log_lik, data, {"s": 1.5}, 1e-4, minibatch_size=10, constraints={"s": tfb.Exp()})
    xi = {"s": tf.constant([np.log(1.5)], tf.float32)}
    value = sampler.plain_estimator.log_prior({"s": xi["s"][0]})
    np.testing.assert_allclose(value.numpy(), np.log(1.5), rtol=1e-6)  # log|d e^ξ/dξ| = ξ


# -- n_iters_opt=0: the control variate anchored at the start ------------------------------------


def test_n_iters_opt_zero_anchors_at_the_start():
    """SGLD-CV with n_iters_opt=0 from θ₀ equals plain SGLD on a log-likelihood that carries the
    control variate anchored at θ₀ by hand (same minibatches and noise: same seed, same draws):
    Σᵢ [log p(xᵢ|θ) − θ·∇log p(xᵢ|θ₀)] + (n/N)·θ·∇ Σⱼ log p(xⱼ|θ₀)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0.3, 1.0, 500)
    theta0 = 0.7
    full = np.sum(x - theta0)  # ∇ Σⱼ log N(xⱼ|θ, 1) at θ₀
    n = 50

    def log_lik(p, d):
        return tf.reduce_sum(-0.5 * (d["x"] - p["theta"]) ** 2)

    def by_hand(p, d):
        m = tf.cast(tf.shape(d["x"])[0], tf.float64)
        return tf.reduce_sum(-0.5 * (d["x"] - p["theta"]) ** 2 - p["theta"] * (d["x"] - theta0)) + m / len(x) * p["theta"] * full

    def log_prior(p):
        return -0.5 * p["theta"] ** 2 / 4.0

    common = dict(log_prior=log_prior, minibatch_size=n, n_iters=200, verbose=False, seed=11, dtype=tf.float64)
    cv = sgmcmc.sgldcv(log_lik, {"x": x}, {"theta": theta0}, 1e-3, opt_stepsize=1e-3, n_iters_opt=0, **common)
    ref = sgmcmc.sgld(by_hand, {"x": x}, {"theta": theta0}, 1e-3, **common)
    np.testing.assert_allclose(cv["theta"], ref["theta"], rtol=1e-10, atol=1e-12)
    assert cv.settings["n_iters_opt"] == 0
    searched = sgmcmc.sgldcv(log_lik, {"x": x}, {"theta": theta0}, 1e-3, opt_stepsize=1e-3, n_iters_opt=10, **common)
    assert not np.allclose(searched["theta"], ref["theta"])  # the anchor (and the chain) moved


def test_n_iters_opt_zero_with_constraints_step_api():
    log_lik, data = _scalar_model()
    sampler = sgmcmc.sgldcv_setup(
        log_lik, data, {"s": 1.5}, 1e-4, opt_stepsize=1e-4, n_iters_opt=0, minibatch_size=10, verbose=False, constraints={"s": tfb.Exp()}
    )
    sess = sgmcmc.init_sess(sampler)
    np.testing.assert_allclose(sampler.estimator.anchor["s"].numpy(), np.log(1.5), rtol=1e-6)  # anchored at ξ₀
    np.testing.assert_allclose(sgmcmc.get_params(sampler, sess)["s"], 1.5, rtol=1e-6)


EVERY_SAMPLER = {
    "sgld": {}, "sghmc": dict(L=2), "sgnht": {}, "psgld": {}, "hamcmc": dict(memory=2),
    "sgldcv": dict(opt_stepsize=1e-4, n_iters_opt=5), "sghmccv": dict(opt_stepsize=1e-4, n_iters_opt=5, L=2),
    "sgnhtcv": dict(opt_stepsize=1e-4, n_iters_opt=5),
}


@pytest.mark.parametrize("method", list(EVERY_SAMPLER))
def test_every_sampler_takes_constraints(method):
    log_lik, data = _scalar_model()
    out = getattr(sgmcmc, method)(
        log_lik, data, {"s": 1.5}, 1e-4, minibatch_size=10, n_iters=20, verbose=False, seed=1,
        constraints={"s": tfb.Exp()}, **EVERY_SAMPLER[method],
    )
    assert np.all(out["s"] > 0) and out["s"].shape == (20,)
    np.testing.assert_allclose(out["s"], np.exp(out.unconstrained["s"]), rtol=1e-6)


def test_a_sampler_without_constraints_support_refuses_them(monkeypatch, no_sampler):
    """The error path scir/sgrld use (Method(..., supports_constraints=False))."""
    import dataclasses

    from sgmcmc.step.methods import METHODS

    monkeypatch.setitem(METHODS, "sgld", dataclasses.replace(METHODS["sgld"], supports_constraints=False))
    log_lik, data = _scalar_model()
    with pytest.raises(ValueError, match="sgld does not take constraints"):
        sgmcmc.sgld(log_lik, data, {"s": 1.5}, 1e-4, constraints={"s": tfb.Exp()})
