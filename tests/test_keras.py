"""sgmcmc.keras (SPEC §13): a Keras model as a Bayesian neural network.

Every number is checked against an independent float64 numpy implementation
(``tests/reference_keras.py``), a hand computation, or full-data NUTS.

Broken variants run (each makes the tests named fail; numbers in the commit messages):
* ``log_lik`` as the MEAN over rows instead of the sum: ``test_log_lik_matches_numpy`` (all forms);
* the prior with the variance s in place of s² (``z = θ / sd**2``): ``test_log_prior_exact``;
* ``predict`` averaging logits, then one softmax: ``test_predict_is_the_numpy_ensemble_average``;
* the network called with ``training=True`` (batch statistics, dropout on):
  ``test_inference_mode_layers``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
import zlib

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
import sgmcmc.keras as sk
import make_keras_nuts_reference
from reference_keras import ensemble_normal, ensemble_probs, log_lik_rows, mlp, normal_log_prior, small_cnn

N_IN, N_HIDDEN = 4, 6


# -- three ways to write the same network ------------------------------------------------------


class Subclassed(keras.Model):
    def __init__(self, n_out: int, batch_norm: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.n_out, self.batch_norm = n_out, batch_norm
        self.hidden = keras.layers.Dense(N_HIDDEN, activation="tanh", name="hidden")
        self.norm = keras.layers.BatchNormalization(name="norm") if batch_norm else None
        self.drop = keras.layers.Dropout(0.5) if batch_norm else None
        self.out = keras.layers.Dense(n_out, name="out")

    def call(self, x):  # no `training` argument: the adapter must still run it in inference mode
        h = self.hidden(x)
        if self.batch_norm:
            h = self.drop(self.norm(h))
        return self.out(h)

    def get_config(self):
        return {**super().get_config(), "n_out": self.n_out, "batch_norm": self.batch_norm}


def build(arch: str, n_out: int, batch_norm: bool = False) -> keras.Model:
    def stateful():
        return [keras.layers.BatchNormalization(name="norm"), keras.layers.Dropout(0.5)] if batch_norm else []

    if arch == "sequential":
        return keras.Sequential([keras.Input((N_IN,)), keras.layers.Dense(N_HIDDEN, activation="tanh", name="hidden"),
                                 *stateful(), keras.layers.Dense(n_out, name="out")])
    if arch == "functional":
        inputs = keras.Input((N_IN,))
        h = keras.layers.Dense(N_HIDDEN, activation="tanh", name="hidden")(inputs)
        for layer in stateful():
            h = layer(h)
        return keras.Model(inputs, keras.layers.Dense(n_out, name="out")(h))
    model = Subclassed(n_out, batch_norm)
    model(np.zeros((1, N_IN), np.float32))  # built by calling it once
    return model


def name_of(bnn, suffix: str) -> str:
    (name,) = [n for n in bnn.names if n.endswith(suffix)]
    return name


def random_params(bnn, rng, scale: float = 0.8) -> dict[str, np.ndarray]:
    """Random weights (not the model's own), float32 as the model computes."""
    return {k: (scale * rng.standard_normal(np.shape(v))).astype(np.float32) for k, v in bnn.params.items()}


def weights(bnn, params) -> tuple:
    return tuple(params[name_of(bnn, s)] for s in ("hidden/kernel", "hidden/bias", "out/kernel", "out/bias"))


def student_t(y, out):
    """A likelihood function: per-row Student-t(4) log-density with scale 0.5 around the output."""
    return tfp.distributions.StudentT(4.0, out[:, 0], 0.5).log_prob(y)


#: likelihood case -> (from_model arguments, number of outputs, targets from rng, reference form)
CASES = {
    "categorical_int": (dict(likelihood="categorical"), 3, lambda r, n: r.integers(0, 3, n), "categorical"),
    "categorical_onehot": (dict(likelihood="categorical"), 3, lambda r, n: np.eye(3, dtype=np.float32)[r.integers(0, 3, n)], "categorical"),
    "bernoulli": (dict(likelihood="bernoulli"), 1, lambda r, n: r.integers(0, 2, n), "bernoulli"),
    "normal_fixed": (dict(likelihood="normal", noise_scale=0.7), 1, lambda r, n: r.normal(size=n).astype(np.float32), "normal"),
    "normal_learn": (dict(likelihood="normal", noise_scale="learn"), 1, lambda r, n: r.normal(size=n).astype(np.float32), "normal"),
    "callable": (dict(likelihood=student_t), 1, lambda r, n: r.normal(size=n).astype(np.float32), "student_t"),
}


def case_data(case: str, rng, n: int = 37):
    args, n_out, targets, form = CASES[case]
    return args, n_out, {"x": rng.normal(size=(n, N_IN)).astype(np.float32), "y": targets(rng, n)}, form


def reference_log_lik(bnn, case, params, data, form, **bn) -> float:
    noise = None
    if case == "normal_fixed":
        noise = 0.7
    elif case == "normal_learn":
        noise = float(np.exp(params["noise_log_scale"]))
    out = mlp(data["x"], *map(np.float64, weights(bnn, params)), **bn)
    return float(log_lik_rows(form, data["y"], out, noise).sum())


# -- log_lik ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sequential", "functional", "subclassed"])
@pytest.mark.parametrize("case", list(CASES))
def test_log_lik_matches_numpy(arch, case):
    """The SUM over rows of the likelihood at random weights (not the model's), against numpy in
    float64. float32 model: relative error observed ≤ 3e-7 over the 18 cases; bound 1e-5. The
    broken variant (mean over rows) is off by a factor of 37."""
    rng = np.random.default_rng(zlib.crc32(f"{arch}/{case}".encode()))
    args, n_out, data, form = case_data(case, rng)
    bnn = sk.from_model(build(arch, n_out), **args)
    params = random_params(bnn, rng)
    if case == "normal_learn":
        assert bnn.names[-1] == "noise_log_scale" and bnn.params["noise_log_scale"] == 0.0
        params["noise_log_scale"] = np.float32(-0.4)
    expected = reference_log_lik(bnn, case, params, data, form)
    assert float(bnn.log_lik(params, data)) == pytest.approx(expected, rel=1e-5)
    # the model's own weights are untouched and are the starting values
    np.testing.assert_array_equal(bnn.params[name_of(bnn, "out/kernel")], bnn.model.get_layer("out").kernel.numpy())


def test_log_lik_of_the_vignettes_cnn_matches_numpy():
    """bnn_keras.py's CNN (reshape, two 3×3 convolutions with ReLU and 2×2 max pooling, a dense
    layer), here on 12 × 12 images, at random weights: the summed categorical log-likelihood
    against a numpy convolution in float64 (observed relative error 3e-8; bound 1e-5), and it
    samples: two SGLD iterations from those weights move every parameter. A reference that flips
    the kernels (a true convolution, not Keras' correlation) gives −72.198 against the model's
    −71.916 (0.4 %, far beyond the bound) and fails."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "vignettes"))
    from bnn_keras import cnn

    side, rng = 12, np.random.default_rng(5)
    bnn = sk.from_model(cnn(side), "categorical", prior_scale=1.0)
    params = {k: rng.normal(0, 0.3, np.shape(v)).astype(np.float32) for k, v in bnn.params.items()}
    data = {"x": rng.random((25, side * side)).astype(np.float32), "y": rng.integers(0, 10, 25)}
    ordered = [params[name] for name in bnn.names]  # conv1 kernel, bias, conv2 kernel, bias, dense kernel, bias
    expected = log_lik_rows("categorical", data["y"], small_cnn(data["x"], side, *map(np.float64, ordered))).sum()
    assert float(bnn.log_lik(params, data)) == pytest.approx(expected, rel=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sgmcmc.StepsizeWarning)
        out = sgmcmc.sgld(bnn.log_lik, data, params, 1e-4, log_prior=bnn.log_prior, minibatch_size=5, n_iters=2,
                          verbose=False, seed=1)
    for name in bnn.names:
        assert not np.allclose(np.asarray(out[name])[-1], params[name]), name


def test_log_lik_compiled_vectorised_and_its_gradient():
    """Under XLA and ``tf.vectorized_map`` over a chain axis (what n_chains does), each chain's
    value is its own numpy value; the gradient equals a hand-written TF version's."""
    rng = np.random.default_rng(5)
    args, n_out, data, form = case_data("categorical_int", rng)
    bnn = sk.from_model(build("functional", n_out), **args)
    stack = [random_params(bnn, rng) for _ in range(4)]
    stacked = {k: np.stack([p[k] for p in stack]) for k in bnn.names}

    @tf.function(jit_compile=True)
    def per_chain(stacked):
        return tf.vectorized_map(lambda p: bnn.log_lik(p, data), stacked)

    values = per_chain(stacked).numpy()
    expected = [reference_log_lik(bnn, "categorical_int", p, data, form) for p in stack]
    np.testing.assert_allclose(values, expected, rtol=1e-5)

    def by_hand(params):
        w1, b1, w2, b2 = weights(bnn, params)
        logits = tf.matmul(tf.tanh(tf.matmul(data["x"], w1) + b1), w2) + b2
        return tf.reduce_sum(tf.gather(tf.nn.log_softmax(logits), data["y"], axis=1, batch_dims=1))

    params = {k: tf.constant(v) for k, v in stack[0].items()}
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(params)
        keras_value, hand_value = bnn.log_lik(params, data), by_hand(params)
    for k in bnn.names:
        np.testing.assert_allclose(tape.gradient(keras_value, params[k]), tape.gradient(hand_value, params[k]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sequential", "functional", "subclassed"])
def test_inference_mode_layers(arch):
    """Batch normalisation uses its moving statistics (set here to non-default values) and dropout
    is off, whatever the model's call signature; the model's state is never updated."""
    rng = np.random.default_rng(11)
    args, n_out, data, form = case_data("categorical_int", rng)
    model = build(arch, n_out, batch_norm=True)
    norm = model.get_layer("norm")
    norm.moving_mean.assign(rng.normal(size=N_HIDDEN).astype(np.float32))
    norm.moving_variance.assign(rng.uniform(0.2, 2.0, N_HIDDEN).astype(np.float32))
    bnn = sk.from_model(model, **args)
    params = random_params(bnn, rng)
    bn = dict(gamma=params[name_of(bnn, "norm/gamma")], beta=params[name_of(bnn, "norm/beta")],
              moving_mean=norm.moving_mean.numpy(), moving_variance=norm.moving_variance.numpy(), epsilon=norm.epsilon)
    expected = reference_log_lik(bnn, "categorical_int", params, data, form, bn=bn)
    values = [float(bnn.log_lik(params, data)) for _ in range(3)]
    assert values[0] == pytest.approx(expected, rel=1e-5) and len(set(values)) == 1  # dropout off: deterministic
    with tf.GradientTape() as tape:
        p = {k: tf.constant(v) for k, v in params.items()}
        tape.watch(p)
        bnn.log_lik(p, data)
    np.testing.assert_array_equal(norm.moving_mean.numpy(), bn["moving_mean"])  # not updated


# -- log_prior --------------------------------------------------------------------------------------


def test_log_prior_exact():
    """Σ log N(θ | 0, s²) against scipy for a number, a dict and "he" (s² = 2 / fan-in for kernels,
    1 for biases), with the learned noise's N(0, 1). Observed relative error ≤ 2e-7 (float32);
    bound 1e-6. Broken variant (θ / s² instead of θ / s) fails the number and "he" cases."""
    model = build("sequential", 1)
    rng = np.random.default_rng(3)
    bnn = sk.from_model(model, "normal", noise_scale="learn")
    params = random_params(bnn, rng, scale=1.5)
    names = bnn.names
    k1, b1, k2, b2 = (name_of(bnn, s) for s in ("hidden/kernel", "hidden/bias", "out/kernel", "out/bias"))
    he = {k1: np.sqrt(2 / N_IN), b1: 1.0, k2: np.sqrt(2 / N_HIDDEN), b2: 1.0, "noise_log_scale": 1.0}
    by_name = {k1: 0.3, b1: 2.0, k2: 0.5, b2: 4.0}
    for prior_scale, sds in [
        (0.6, {**{k: 0.6 for k in names}, "noise_log_scale": 1.0}),
        (by_name, {**by_name, "noise_log_scale": 1.0}),
        ({**by_name, "noise_log_scale": 0.25}, {**by_name, "noise_log_scale": 0.25}),
        ("he", he),
    ]:
        bnn = sk.from_model(model, "normal", prior_scale=prior_scale, noise_scale="learn")
        assert float(bnn.log_prior(params)) == pytest.approx(normal_log_prior(params, sds), rel=1e-6), prior_scale
    # a convolution kernel's fan-in is every axis but the last (Keras' convention)
    conv = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(5, 3, name="conv2d"), keras.layers.Flatten(),
                             keras.layers.Dense(2)])  # named: other tests' Conv2D layers advance Keras' counter
    sd = sk.from_model(conv, "categorical", prior_scale="he").prior_sd
    assert sd[name_of_path(sd, "conv2d/kernel")] == pytest.approx(np.sqrt(2 / 27))


def name_of_path(names, suffix):
    (name,) = [n for n in names if n.endswith(suffix)]
    return name


# -- against full-data NUTS ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def breast_cancer():
    return make_keras_nuts_reference.breast_cancer()


def nuts_reference() -> tuple[np.ndarray, np.ndarray]:
    """Full-data NUTS (TFP) on the hand-written log posterior of the same logistic regression,
    prior N(0, 1) on every coefficient: 4 chains × 500 draws after 300 adaptation steps, float64
    (ESS ≥ 1,900 for every coefficient: the reference's own error is ≤ 0.03 posterior sd). Its
    posterior means and sds are stored (tests/data/keras_nuts_breast_cancer.npz; ~30 s of NUTS
    per run before): tests/make_keras_nuts_reference.py regenerates the file bit for bit."""
    stored = np.load(make_keras_nuts_reference.OUT)
    return stored["mean"], stored["sd"]


def test_sgldcv_on_a_keras_logistic_regression_matches_nuts(breast_cancer):
    """A Keras Dense(1) on scikit-learn's breast-cancer data (569 × 30, standardised), bernoulli,
    prior_scale 1, sampled by SGLD-CV through the adapter, against full-data NUTS on the same
    posterior written by hand. Stepsize 4e-3 (ε·λ_max ≈ 0.34 at the mode; check_stepsize passes),
    8 chains × 5,000 kept. Over the 31 coefficients, seeds 1–5: max |mean difference| 0.22–0.33
    posterior sd, max |log sd ratio| 0.13–0.21. Bounds 0.6 and 0.35. Broken: without the prior,
    5.2 sd and 1.52; log_lik as the mean over the minibatch (check_model=False), 1.76 sd and 0.64."""
    X, y = breast_cancer
    ref_mean, ref_sd = nuts_reference()
    keras.utils.set_random_seed(0)
    bnn = sk.from_model(keras.Sequential([keras.Input((X.shape[1],)), keras.layers.Dense(1)]), "bernoulli")
    out = sgmcmc.sgldcv(bnn.log_lik, {"x": X, "y": y}, bnn.params, 4e-3, log_prior=bnn.log_prior, minibatch_size=57,
                        n_iters=6_000, burn_in=1_000, n_iters_opt=2_000, n_chains=8, verbose=False, seed=1)
    kernel, bias = (name_of(bnn, s) for s in ("kernel", "bias"))
    draws = np.concatenate([out[kernel].reshape(-1, X.shape[1]), out[bias].reshape(-1, 1)], axis=1)
    z = (draws.mean(0) - ref_mean) / ref_sd
    log_ratio = np.log(draws.std(0) / ref_sd)
    assert np.max(np.abs(z)) < 0.6, z
    assert np.max(np.abs(log_ratio)) < 0.35, log_ratio


# -- predict ------------------------------------------------------------------------------------------


def fake_samples(bnn, rng, n_chains: int, n_kept: int) -> dict[str, np.ndarray]:
    lead = (n_chains, n_kept) if n_chains > 1 else (n_kept,)
    return {k: (0.8 * rng.standard_normal((*lead, *np.shape(v)))).astype(np.float32) for k, v in bnn.params.items()}


def pooled_list(samples, names, n_chains):
    """The draws as a list of dicts, chain 0's first (numpy, independently of predict)."""
    flat = {k: v.reshape(-1, *v.shape[2:]) if n_chains > 1 else v for k, v in samples.items()}
    return [{k: flat[k][i] for k in names} for i in range(len(flat[names[0]]))]


@pytest.mark.parametrize("case", ["categorical_int", "bernoulli", "normal_fixed", "normal_learn"])
@pytest.mark.parametrize("n_chains", [1, 3])
def test_predict_is_the_numpy_ensemble_average(case, n_chains):
    """The posterior predictive over pooled draws, 10 rows in batches of 3, all draws and 4
    equally spaced ones (indices ⌊(j+1)T/4⌋ − 1, as thinning keeps them): probabilities averaged
    (not logits), the normal's mean and sd by the law of total variance. Observed max error 6e-8;
    bound 1e-6. Broken variant (softmax of the averaged logits): errors 0.05–0.2."""
    rng = np.random.default_rng(21)
    args, n_out, data, form = case_data(case, rng, n=10)
    bnn = sk.from_model(build("sequential", n_out), **args)
    samples = fake_samples(bnn, rng, n_chains, 6)
    draws = pooled_list(samples, bnn.names, n_chains)
    T = len(draws)
    for n_draws, index in ((None, np.arange(T)), (4, np.array([(j + 1) * T // 4 - 1 for j in range(4)]))):
        chosen = [draws[i] for i in index]
        outputs = [mlp(data["x"], *map(np.float64, weights(bnn, d))) for d in chosen]
        got = bnn.predict(samples, data["x"], batch_size=3, draws=n_draws)
        if form == "normal":
            sds = [0.7 if case == "normal_fixed" else float(np.exp(d["noise_log_scale"])) for d in chosen]
            for a, b in zip(got, ensemble_normal(outputs, sds)):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_allclose(got, ensemble_probs(outputs, form), rtol=1e-6, atol=1e-6)


def test_predict_streams_in_bounded_memory(monkeypatch):
    """Draws are grouped by bytes: with the group cap set to two draws' weights, 5 draws run as
    3 compiled calls per batch and give the same average."""
    import sgmcmc.keras.network as network

    rng = np.random.default_rng(2)
    args, n_out, data, _ = case_data("categorical_int", rng, n=9)
    bnn = sk.from_model(build("functional", n_out), **args)
    samples = fake_samples(bnn, rng, 1, 5)
    whole = bnn.predict(samples, data["x"])
    monkeypatch.setattr(network, "PREDICT_DRAW_BYTES", 2 * sum(np.asarray(v).nbytes for v in bnn.params.values()))
    np.testing.assert_allclose(bnn.predict(samples, data["x"], batch_size=4), whole, rtol=1e-6)


# -- evaluate, to_model ---------------------------------------------------------------------------------


def test_evaluate_against_hand_computed_numbers():
    """Four rows, three classes, two confidence bins (0, 0.5] and (0.5, 1]:
    row  probs              y  argmax  conf  correct
    0    (0.7, 0.2, 0.1)    0  0       0.7   1
    1    (0.1, 0.6, 0.3)    2  1       0.6   0
    2    (0.2, 0.3, 0.5)    2  2       0.5   1
    3    (0.4, 0.4, 0.2)    1  0       0.4   0     (ties: the first class)
    accuracy 2/4; nll −(log .7 + log .3 + log .5 + log .4)/4; bins: (0, .5] rows 2, 3 —
    conf .45, acc .5; (.5, 1] rows 0, 1 — conf .65, acc .5: ECE = ½·.05 + ½·.15 = 0.1;
    Brier: (.09+.04+.01) + (.01+.36+.49) + (.04+.09+.25) + (.16+.36+.04) = 1.94, / 4."""
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.4, 0.4, 0.2]])
    y = np.array([0, 2, 2, 1])
    expected = {"accuracy": 0.5, "nll": -np.log([0.7, 0.3, 0.5, 0.4]).mean(), "ece": 0.1, "brier": 1.94 / 4}
    for labels in (y, np.eye(3)[y]):  # integer labels or one-hot
        got = sk.evaluate(probs, labels, bins=2)
        assert got == pytest.approx(expected, abs=1e-12)
    # two classes given as P(y = 1): Brier over both classes, i.e. 2 (p − y)²
    p1 = np.array([0.9, 0.2, 0.6])
    got = sk.evaluate(p1, np.array([1, 0, 0]), bins=10)
    assert got["accuracy"] == pytest.approx(2 / 3) and got["brier"] == pytest.approx(2 * (0.01 + 0.04 + 0.36) / 3)
    assert got["ece"] == pytest.approx((abs(1 - 0.9) + abs(1 - 0.8) + abs(0 - 0.6)) / 3)
    fig, ax = sk.plot_calibration(probs, y, bins=2)
    assert ax.get_xlabel().startswith("confidence") and len(ax.lines) == 2
    with pytest.raises(ValueError, match="probabilities, not logits"):
        sk.evaluate(np.array([[2.0, -1.0]]), [0])


def test_agreement_and_total_variation_against_hand_computed_numbers():
    """The NeurIPS 2021 BDL competition's metrics (SPEC §15), the evaluate test's four rows
    against a reference q:
    row  p                  q                  argmax p, q  ½Σ|p − q|
    0    (0.7, 0.2, 0.1)    (0.5, 0.5, 0.0)    0, 0 (tie)   ½(.2+.3+.1) = .30
    1    (0.1, 0.6, 0.3)    (0.1, 0.6, 0.3)    1, 1         0
    2    (0.2, 0.3, 0.5)    (0.6, 0.3, 0.1)    2, 0         ½(.4+0+.4) = .40
    3    (0.4, 0.4, 0.2)    (0.2, 0.2, 0.6)    0, 2         ½(.2+.2+.4) = .40
    agreement 2/4, TV 1.1/4. Broken variants checked: TV without the ½ (0.55) and agreement
    counting argmax ties as disagreement (0.25) fail."""
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.4, 0.4, 0.2]])
    q = np.array([[0.5, 0.5, 0.0], [0.1, 0.6, 0.3], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])
    assert sk.agreement(p, q) == pytest.approx(0.5, abs=1e-12)
    assert sk.total_variation(p, q) == pytest.approx(1.1 / 4, abs=1e-12)
    assert sk.agreement(p, p) == 1.0 and sk.total_variation(q, q) == 0.0
    # two classes as P(y = 1): TV is |p − q| per row
    assert sk.total_variation([0.9, 0.2], [0.6, 0.2]) == pytest.approx(0.15)
    assert sk.agreement([0.9, 0.2], [0.4, 0.2]) == 0.5
    with pytest.raises(ValueError, match="the same shape"):
        sk.agreement(p, q[:3])
    with pytest.raises(ValueError, match="ref_probs must be finite, non-negative and sum to 1"):
        sk.total_variation(p, np.log(q + 1e-3))


@pytest.mark.parametrize("arch", ["sequential", "functional", "subclassed"])
def test_to_model_holds_the_draw(arch, tmp_path):
    """The clone's predictions are the one-draw ensemble; the original model is unchanged; the
    Sequential clone survives model.save / keras.models.load_model."""
    rng = np.random.default_rng(8)
    args, n_out, data, _ = case_data("categorical_int", rng, n=10)
    model = build(arch, n_out, batch_norm=True)
    model.get_layer("norm").moving_mean.assign(rng.normal(size=N_HIDDEN).astype(np.float32))
    bnn = sk.from_model(model, **args)
    before = model(data["x"]).numpy()
    samples = fake_samples(bnn, rng, 2, 3)
    draw = {k: v[1, 2] for k, v in samples.items()}
    clone = sk.to_model(bnn, draw)
    expected = bnn.predict({k: v[None] for k, v in draw.items()}, data["x"])
    np.testing.assert_allclose(tf.nn.softmax(clone(data["x"], training=False)).numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model(data["x"]).numpy(), before)
    if arch == "sequential":
        clone.save(tmp_path / "draw.keras")
        loaded = keras.models.load_model(tmp_path / "draw.keras")
        np.testing.assert_allclose(loaded(data["x"]).numpy(), clone(data["x"]).numpy(), rtol=1e-6)


# -- with the samplers ---------------------------------------------------------------------------------


def test_chains_vectorise_the_keras_log_lik():
    """sgld with n_chains=1, 2 and 4 over a Keras MLP, each chain from its own start: chain k of a
    K-chain run is chain k of a run with fewer chains (noise and minibatches are keyed by the
    chain index), up to the float32 rounding of the vectorised arithmetic (observed ≤ 3e-6 after
    30 iterations; bound 1e-4)."""
    rng = np.random.default_rng(4)
    args, n_out, data, form = case_data("categorical_int", rng, n=200)
    bnn = sk.from_model(build("sequential", n_out), **args)
    starts = [random_params(bnn, rng, 0.5) for _ in range(4)]
    run = lambda k: sgmcmc.sgld(bnn.log_lik, data, starts[:k] if k > 1 else starts[0], 1e-3, log_prior=bnn.log_prior,
                                minibatch_size=50, n_iters=30, n_chains=k, verbose=False, seed=3)
    one, two, four = run(1), run(2), run(4)
    for name, start in starts[0].items():
        assert one[name].shape == (30, *start.shape) and four[name].shape == (4, 30, *start.shape)
        np.testing.assert_allclose(two[name][0], one[name], atol=1e-4)
        np.testing.assert_allclose(four[name][:2], two[name], atol=1e-4)
    # every chain moved from its own start
    assert all(not np.allclose(four[bnn.names[0]][k, -1], starts[k][bnn.names[0]]) for k in range(4))


MIRRORED = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import sgmcmc
    loaded_by_import = "sgmcmc.keras" in sys.modules
    sgmcmc.keras
    loaded_on_use = "sgmcmc.keras" in sys.modules
    import keras, numpy as np
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(3)])
    bnn = sgmcmc.keras.from_model(model, "categorical")
    rng = np.random.default_rng(0)
    data = {"x": rng.normal(size=(300, 4)).astype(np.float32), "y": rng.integers(0, 3, 300)}
    kw = dict(log_prior=bnn.log_prior, minibatch_size=30, n_iters=100, n_chains=2, verbose=False, seed=1)
    one = sgmcmc.sgld(bnn.log_lik, data, bnn.params, 1e-3, **kw)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two = sgmcmc.sgld(bnn.log_lik, data, bnn.params, 1e-3, strategy=strategy, **kw)
    print(json.dumps({"diff": max(float(np.abs(one[k] - two[k]).max()) for k in bnn.names),
                      "shape": list(two[bnn.names[0]].shape),
                      "adapter": [loaded_by_import, loaded_on_use]}))
""")


@pytest.fixture(scope="module")
def fresh_process():
    """One fresh Python process (TensorFlow's logical devices must be set before it starts)
    serving two tests: whether ``import sgmcmc`` loads the adapter, then two chains over
    MirroredStrategy against one device. Its JSON result (a process start costs ~10 s)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(sgmcmc.__file__)), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", MIRRORED], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_mirrored_strategy(fresh_process):
    """Two chains over MirroredStrategy's 2 CPU devices (a fresh process: logical devices are set
    before TensorFlow starts) equal the one-device run (observed difference 0)."""
    result = fresh_process
    assert result["shape"] == [2, 100, 4, 5]
    assert result["diff"] <= 1e-6, result


# -- bad input ------------------------------------------------------------------------------------------


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"not built.*model\.build\(input_shape\).*calling it once"):
        sk.from_model(keras.Sequential([keras.layers.Dense(3)]), "categorical")
    with pytest.raises(ValueError, match=r"not built"):
        sk.from_model(Subclassed(3), "categorical")
    with pytest.raises(TypeError, match="Keras 3 model"):
        sk.from_model(lambda x: x, "categorical")
    with pytest.raises(ValueError, match=r"bernoulli' needs one logit per row.*\(batch, 10\).*'categorical'"):
        sk.from_model(build("sequential", 10), "bernoulli")
    with pytest.raises(ValueError, match=r"categorical' needs one logit per class.*'bernoulli'"):
        sk.from_model(build("functional", 1), "categorical")
    with pytest.raises(ValueError, match=r"bernoulli' needs one logit per row"):
        sk.from_model(build("subclassed", 10), "bernoulli")  # a subclassed model's output shape is traced too
    with pytest.raises(ValueError, match=r"unknown likelihood 'poisson'.*'categorical'"):
        sk.from_model(build("sequential", 3), "poisson")
    with pytest.raises(ValueError, match=r"needs noise_scale=.*'learn'"):
        sk.from_model(build("sequential", 1), "normal")
    with pytest.raises(ValueError, match=r"noise_scale is only for likelihood='normal'"):
        sk.from_model(build("sequential", 3), "categorical", noise_scale=1.0)
    with pytest.raises(ValueError, match=r"averaged over the rows.*-keras.losses.sparse_categorical_crossentropy"):
        sk.from_model(build("sequential", 3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match=r"negative log-likelihood"):
        sk.from_model(build("sequential", 3), keras.losses.sparse_categorical_crossentropy)
    model = build("sequential", 3)
    names = sk.from_model(model, "categorical").names
    with pytest.raises(ValueError, match=r"unknown names \['dense/kernel'\]; missing \[.*\]"):
        sk.from_model(model, "categorical", prior_scale={"dense/kernel": 1.0})
    with pytest.raises(ValueError, match=r"must be positive and finite \(a positive sd\); got -1.0"):
        sk.from_model(model, "categorical", prior_scale={**{k: 1.0 for k in names}, names[0]: -1.0})
    with pytest.raises(ValueError, match=r"'he'; got 'xavier'"):
        sk.from_model(model, "categorical", prior_scale="xavier")


def test_bad_data_and_callables_are_refused_before_sampling():
    rng = np.random.default_rng(0)
    args, n_out, data, _ = case_data("categorical_int", rng)
    bnn = sk.from_model(build("sequential", n_out), **args)
    with pytest.raises(RuntimeError, match=r"no entry .x.; its entries are \['X', 'y'\].*from_model\(\.\.\., x=\.\.\., y=\.\.\.\)"):
        sgmcmc.sgld(bnn.log_lik, {"X": data["x"], "y": data["y"]}, bnn.params, 1e-4, minibatch_size=10, n_iters=10, verbose=False)
    with pytest.raises(ValueError, match=r"float labels: pass y.astype\(int\)"):
        bnn.log_lik(bnn.params, {"x": data["x"], "y": data["y"].astype(np.float32)})
    mean_reduced = sk.from_model(build("sequential", 1), lambda y, out: tf.reduce_mean(student_t(y, out)))
    data1 = {"x": data["x"], "y": rng.normal(size=len(data["y"])).astype(np.float32)}
    with pytest.raises(ValueError, match=r"returned a scalar.*one log-likelihood per row.*Remove the reduction"):
        mean_reduced.log_lik(mean_reduced.params, data1)
    # the samplers' trial evaluation reports it (as a RuntimeError) before anything is compiled
    with pytest.raises(RuntimeError, match=r"returned a scalar.*one log-likelihood per row.*Remove the reduction"):
        sgmcmc.sgld(mean_reduced.log_lik, data1, mean_reduced.params, 1e-4, minibatch_size=10, n_iters=10, verbose=False)
    # the samplers' float64 mode with a float32 Keras model: refused with the fix
    with pytest.raises(TypeError, match=r"computes in float32: run the sampler with dtype=tf.float32.*set_floatx\('float64'\)"):
        sgmcmc.sgld(bnn.log_lik, data, bnn.params, 1e-4, minibatch_size=10, n_iters=10, verbose=False, dtype=tf.float64)


def test_import_sgmcmc_leaves_the_adapter_unloaded(fresh_process):
    """``import sgmcmc`` does not load ``sgmcmc.keras`` (its first use does): measured, the adapter
    adds ~0.01 s on first use, Keras itself being loaded by TensorFlow Probability already. A
    broken variant importing the adapter eagerly in ``sgmcmc/__init__.py`` fails the first assert.
    Checked in the mirrored test's fresh process (``fresh_process``), right after its first
    ``import sgmcmc`` (only TensorFlow imported before it, to set the logical devices)."""
    assert fresh_process["adapter"] == [False, True], fresh_process
