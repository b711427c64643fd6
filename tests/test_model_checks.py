"""Mistakes that would silently give a wrong posterior stop the set-up with a clear message,
found by the trial evaluation before anything is compiled (issue 12, item 2); honest models
pass; ``check_model=False`` lets an honest-but-unusual model through. Also the set-up's
memory (item 3): no needless copies of the dataset, and the storage estimate.

Each guard's tests were run with the guard removed from inputs.py and failed: connectivity
(test_unused_parameter, test_parameter_used_only_through_an_integer_cast), additivity
(test_log_lik_not_a_sum_over_its_rows x2, test_constant_added_once_...), the integer-cast
retry (test_integer_entry_in_float_arithmetic), the extreme rows of integer entries in the
trial batch (test_one_based_labels_out_of_range), astype(copy=False)
(test_float32_entry_is_not_copied), the min/max NaN scan
(test_dataset_check_allocates_nothing_...). Running the trial on the CPU (a GPU's tf.gather
returns zeros out of range) cannot be tested without a GPU."""

from __future__ import annotations

import re
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
import sgmcmc.run.sampler
from sgmcmc import checks
from sgmcmc.data.rows import Rows, aligned_empty

tfd = tfp.distributions

VIGNETTES = Path(__file__).resolve().parents[1] / "vignettes"


@pytest.fixture
def nothing_compiled(monkeypatch):
    """Fail loudly if anything is compiled (``tf.function``) or a Sampler is built: every
    guard must fire in the eager trial evaluation, before both."""

    def refuse_function(*args, **kwargs):
        raise AssertionError("tf.function was called before the mistake was reported")

    def refuse_sampler(self, *args, **kwargs):
        raise AssertionError("a Sampler was built before the mistake was reported")

    monkeypatch.setattr(tf, "function", refuse_function)
    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "__init__", refuse_sampler)


@pytest.fixture(scope="module")
def regression():
    """y = 1 + 2 z + N(0, 1) noise, 400 rows."""
    rng = np.random.default_rng(12)
    z = rng.normal(size=400).astype(np.float32)
    y = (1.0 + 2.0 * z + rng.normal(size=400)).astype(np.float32)
    return {"z": z, "y": y}


def _run(log_lik, dataset, params, **kwargs):
    args = dict(minibatch_size=50, n_iters=20, verbose=False, seed=1)
    args.update(kwargs)
    return sgmcmc.sgld(log_lik, dataset, params, 1e-4, **args)


# -- a parameter nothing uses ------------------------------------------------------------------


def test_unused_parameter(regression, nothing_compiled):
    def log_lik(params, dataset):  # typo: params["a"] where params["b"] was meant
        mean = params["a"] + params["a"] * dataset["z"]
        return tf.reduce_sum(tfd.Normal(mean, 1.0).log_prob(dataset["y"]))

    with pytest.raises(ValueError, match=re.escape("params ['b'] have no gradient path to log_lik")) as info:
        _run(log_lik, regression, {"a": 0.0, "b": 0.0})
    assert "check_model=False" in str(info.value)
    assert "misspelt" in str(info.value)


def test_parameter_used_only_through_an_integer_cast(regression, nothing_compiled):
    """Connectivity, not a zero value: a cast to integers cuts the gradient path."""

    def log_lik(params, dataset):
        shift = tf.cast(tf.cast(params["b"], tf.int32), tf.float32)
        return tf.reduce_sum(tfd.Normal(params["a"] + shift, 1.0).log_prob(dataset["y"]))

    with pytest.raises(ValueError, match=r"params \['b'\] have no gradient path"):
        _run(log_lik, regression, {"a": 0.0, "b": 0.0})


def test_parameter_used_only_in_the_prior_is_used(regression):
    """A hyperparameter that only the prior sees (as in the BNN vignette) is connected."""

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["a"], 1.0).log_prob(dataset["y"]))

    def log_prior(params):
        return tfd.Normal(0.0, tf.exp(params["log_s"])).log_prob(params["a"]) + tfd.Normal(0.0, 1.0).log_prob(params["log_s"])

    out = _run(log_lik, regression, {"a": 0.0, "log_s": 0.0}, log_prior=log_prior)
    assert out["log_s"].shape == (20,)


def test_unused_parameter_opt_out(regression):
    def log_lik(params, dataset):  # "b" deliberately carried along unused
        return tf.reduce_sum(tfd.Normal(params["a"], 1.0).log_prob(dataset["y"]))

    out = _run(log_lik, regression, {"a": 0.0, "b": 0.0}, check_model=False)
    assert out["b"].shape == (20,) and np.all(np.isfinite(out["b"]))


# -- additivity over rows ----------------------------------------------------------------------


def _closes_over_full_data(dataset):
    y_all = tf.constant(dataset["y"])

    def log_lik(params, batch):  # ignores its dataset argument
        return tf.reduce_sum(tfd.Normal(params["a"], 1.0).log_prob(y_all))

    return log_lik


def _mean_over_rows(dataset):
    def log_lik(params, batch):
        return tf.reduce_mean(tfd.Normal(params["a"], 1.0).log_prob(batch["y"]))

    return log_lik


@pytest.mark.parametrize("make", [_closes_over_full_data, _mean_over_rows], ids=["closes_over_data", "mean"])
def test_log_lik_not_a_sum_over_its_rows(make, regression, nothing_compiled):
    with pytest.raises(ValueError, match="log_lik is not additive over rows") as info:
        _run(make(regression), regression, {"a": 0.0})
    message = str(info.value)
    assert "the SUM of the log-likelihood over the rows it is given" in message
    assert "the gradient of 'a'" in message
    assert "check_model=False" in message


@pytest.mark.parametrize("make", [_closes_over_full_data, _mean_over_rows], ids=["closes_over_data", "mean"])
def test_non_additive_gaps_are_far_above_the_tolerance(make, regression):
    data = Rows(checks.check_dataset(regression), np.float32).as_read()
    gaps = checks.additivity_gaps(make(regression), data, checks.check_params({"a": 0.0}, tf.float32))
    assert min(gaps.values()) > 100 * checks.ADDITIVITY_RTOL, gaps


def test_constant_added_once_is_caught_and_opt_out_runs(regression, nothing_compiled, monkeypatch):
    """A normalising constant added once instead of per row changes only the value (not the
    gradient, so the samples would be right): caught by default, allowed with the opt-out."""

    def log_lik(params, dataset):
        return tf.reduce_sum(-0.5 * (dataset["y"] - params["a"]) ** 2) - 0.9189385

    with pytest.raises(ValueError, match=r"not additive over rows: .* in its value by"):
        _run(log_lik, regression, {"a": 0.0})
    monkeypatch.undo()
    out = _run(log_lik, regression, {"a": 0.0}, check_model=False)
    assert out["a"].shape == (20,)


# -- integer entries ---------------------------------------------------------------------------


def test_integer_entry_in_float_arithmetic(nothing_compiled):
    rng = np.random.default_rng(4)
    x = rng.normal(size=300).astype(np.float32)
    y = (rng.uniform(size=300) < 0.5).astype(np.int64)  # 0/1 labels as integers

    def log_lik(params, dataset):
        z = params["w"] * dataset["x"]
        return tf.reduce_sum(dataset["y"] * z - tf.math.softplus(z))

    with pytest.raises(TypeError, match=re.escape("dataset['y'] holds integers but log_lik uses it in floating-point")) as info:
        _run(log_lik, {"x": x, "y": y}, {"w": 0.0})
    assert "tf.cast(dataset['y'], tf.float32)" in str(info.value)
    assert "y.astype(np.float32)" in str(info.value)


N_GROUPS = 10


@pytest.fixture(scope="module")
def grouped():
    """Group means; labels 0..9 with every group present, and one row far past the first 10."""
    rng = np.random.default_rng(6)
    group = rng.integers(0, N_GROUPS, size=1_000)
    group[:N_GROUPS] = np.arange(N_GROUPS)
    x = (group + rng.normal(size=1_000)).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(tf.gather(params["u"], dataset["group"]), 1.0).log_prob(dataset["x"]))

    return log_lik, x, group


def test_one_based_labels_out_of_range(grouped, nothing_compiled):
    """R's 1-based labels 1..10 for 10 groups: the label 10 sits only in row 700, outside the
    first 10 trial rows, so the trial batch must include each integer entry's extreme rows."""
    log_lik, x, group = grouped
    labels = np.where(group == 0, 1, group)  # 1..9 ...
    labels[700] = N_GROUPS  # ... and a single 10
    with pytest.raises(ValueError, match=re.escape("must be 0-based, in [0, 10)")) as info:
        _run(log_lik, {"x": x, "group": labels}, {"u": np.zeros(N_GROUPS)})
    assert "dataset['group'] holds 1..10" in str(info.value)
    assert "pass labels - 1" in str(info.value)


def test_zero_based_labels_run(grouped):
    log_lik, x, group = grouped
    out = _run(log_lik, {"x": x, "group": group}, {"u": np.zeros(N_GROUPS)})
    assert out["u"].shape == (20, N_GROUPS)


# -- honest models pass ------------------------------------------------------------------------


def _vignette(name):
    sys.path.insert(0, str(VIGNETTES))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(VIGNETTES))


def _honest_models():
    """(name, log_lik, log_prior, dataset, params, dtype) of the suite's and vignettes' models."""
    from conftest import gaussian_1d, gaussian_3d
    from sgmcmc.datasets import gaussian_mixture_data, synthetic_covertype

    models = []
    for name, m, dtype in [
        ("gauss1d", gaussian_1d(n_rows=2_000), tf.float32),
        ("gauss1d_f64", gaussian_1d(tf.float64, n_rows=2_000), tf.float64),
        ("gauss3d", gaussian_3d(n_rows=2_000), tf.float32),
    ]:
        models.append((name, m.log_lik, m.log_prior, m.dataset, m.params, dtype))
    cov = synthetic_covertype(n_rows=5_000)
    logistic = _vignette("logistic_regression")
    start = {"bias": 0.0, "beta": np.zeros(54)}
    models.append(("logistic", logistic.log_lik, logistic.log_prior, {"X": cov[:, 1:], "y": cov[:, 0]}, start, tf.float32))
    main_job = _vignette("main_job")
    models.append(("main_job", main_job.log_lik, main_job.log_prior, {"X": cov[:, 1:], "y": cov[:, 0]}, start, tf.float32))
    mixture = _vignette("gauss_mixture")
    models.append(("mixture", mixture.log_lik, mixture.log_prior, {"X": gaussian_mixture_data()},
                   {"theta1": np.zeros(2), "theta2": np.zeros(2)}, tf.float32))
    vignette = _vignette("bnn_mnist")  # the thesis network as a Keras model (sgmcmc.keras.from_model)
    bnn = vignette.thesis_network()
    names = vignette.weight_names(bnn)
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(500, 784)).astype(np.float32)
    labels = rng.integers(0, 10, size=500)
    thesis_params = {"A": rng.normal(size=(100, 10)), "B": rng.normal(size=(784, 100)), "a": np.zeros(10), "b": np.zeros(100)}
    keras_params = {names[k]: v for k, v in thesis_params.items()}
    keras_params.update({"lambdaA": 1.0, "lambdaB": 1.0, "lambdaa": 1.0, "lambdab": 1.0})
    models.append(("bnn_one_hot", bnn.log_lik, vignette.make_log_prior(bnn),
                   {"X": images, "y": np.eye(10, dtype=np.float32)[labels]}, keras_params, tf.float32))
    bnn_params = {**thesis_params, "lambdaA": 1.0, "lambdaB": 1.0, "lambdaa": 1.0, "lambdab": 1.0}
    gamma = tfp.distributions.Gamma(concentration=1.0, rate=1.0)

    def bnn_log_prior(params):  # the vignette's prior over the thesis' letters
        return tf.add_n([
            tf.reduce_sum(tfp.distributions.Normal(0.0, tf.math.rsqrt(params[lam])).log_prob(params[k])) + gamma.log_prob(params[lam])
            for k, lam in vignette.PRECISIONS.items()
        ])

    def bnn_gather(params, dataset):  # integer labels picked out with tf.gather
        hidden = tf.nn.softmax(tf.matmul(dataset["X"], params["B"]) + params["b"])
        log_beta = tf.nn.log_softmax(tf.matmul(hidden, params["A"]) + params["a"])
        return tf.reduce_sum(tf.gather(log_beta, dataset["y"], batch_dims=1))

    models.append(("bnn_gather", bnn_gather, bnn_log_prior, {"X": images, "y": labels}, bnn_params, tf.float32))
    return models


HONEST = _honest_models()


@pytest.mark.parametrize("model", HONEST, ids=[m[0] for m in HONEST])
def test_honest_models_pass_the_checks(model):
    _, log_lik, log_prior, dataset, params, dtype = model
    data = Rows(checks.check_dataset(dataset), dtype.as_numpy_dtype).as_read()
    start = checks.check_params(params, dtype)
    checks.trial_evaluation(log_lik, log_prior, data, start, dtype)
    # and with a wide margin: the tolerance is 1e-3
    gaps = checks.additivity_gaps(log_lik, data, start)
    assert max(gaps.values()) < (1e-5 if dtype == tf.float32 else 1e-12), gaps


# -- dataset conversion and memory ---------------------------------------------------------------


def test_float32_entry_is_not_copied():
    x = np.random.default_rng(1).normal(size=(1_000, 3)).astype(np.float32)
    y = np.arange(1_000)
    data = Rows(checks.check_dataset({"x": x, "y": y}), np.float32).as_read()
    assert np.shares_memory(data["x"], x) and np.shares_memory(data["y"], y)
    data64 = Rows(checks.check_dataset({"x": x.astype(np.float64)}), np.float64).as_read()
    assert data64["x"].dtype == np.float64
    cast = Rows(checks.check_dataset({"x": x.astype(np.float64)}), np.float32).as_read()["x"]
    assert cast.dtype == np.float32 and not np.shares_memory(cast, x)


def test_dataset_check_allocates_nothing_the_size_of_the_data():
    x = np.ones((2_000_000, 10), np.float32)  # 80 MB; a boolean temporary of it is 20 MB
    x[1_999_999, 3] = np.nan
    tracemalloc.start()  # numpy reports its allocations to tracemalloc
    try:
        with pytest.raises(ValueError, match=re.escape("first at row 1999999")):
            checks.check_dataset({"x": x})
        x[1_999_999, 3] = 0.0
        checks.check_dataset({"x": x})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the scan works in 16 MB chunks (a 4 MB boolean temporary each)
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MB while checking an 80 MB entry"


def test_dataframe_as_dataset():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.normal(size=200), "g": rng.integers(0, 3, size=200)})
    data = Rows(checks.check_dataset(frame), np.float32).as_read()
    assert set(data) == {"x", "g"}
    assert data["x"].dtype == np.float32 and data["g"].dtype.kind == "i"
    np.testing.assert_allclose(data["x"], frame["x"].to_numpy(), rtol=1e-6)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(tf.gather(params["u"], dataset["g"]), 1.0).log_prob(dataset["x"]))

    out = _run(log_lik, frame, {"u": np.zeros(3)})
    assert out["u"].shape == (20, 3)
    series = Rows(checks.check_dataset({"x": frame["x"], "g": frame["g"]}), np.float64).as_read()
    np.testing.assert_array_equal(series["x"], frame["x"].to_numpy())


def test_dataframe_with_non_string_columns():
    with pytest.raises(TypeError, match="column names .* are not strings"):
        checks.check_dataset(pd.DataFrame(np.ones((5, 2))))


def test_as_tensor_shares_aligned_arrays_and_copies_others_once():
    aligned = aligned_empty((4, 3), np.float32)
    aligned[:] = np.arange(12, dtype=np.float32).reshape(4, 3)
    tensor = checks.as_tensor(aligned)
    aligned[0, 0] = 99.0
    assert float(tensor[0, 0]) == 99.0  # the same memory
    base = np.zeros(4 * 3 + 1, np.float32)
    unaligned = base[1:].reshape(4, 3)  # 4 bytes past an aligned start: never 64-aligned
    unaligned[:] = np.arange(12).reshape(4, 3)
    copied = checks.as_tensor(unaligned)
    unaligned[0, 0] = 99.0
    np.testing.assert_array_equal(copied.numpy(), np.arange(12, dtype=np.float32).reshape(4, 3))
    strided = np.arange(20, dtype=np.float32).reshape(4, 5)[:, 1:]
    np.testing.assert_array_equal(checks.as_tensor(strided).numpy(), strided)
    assert float(tf.reduce_sum(tf.gather(copied, [1, 3]))) == float(unaligned[[1, 3]].sum())


# -- storage ------------------------------------------------------------------------------------


def test_check_storage_estimate():
    shapes = {"beta": (54,), "bias": ()}
    assert checks.check_storage(1_000, 1, shapes, tf.float32, False, limit_bytes=10**9) == 1_000 * 56 * 4
    assert checks.check_storage(1_000, 2, shapes, tf.float64, True, limit_bytes=10**9) == 2_000 * (2 * 55 + 1) * 8


def test_check_storage_too_big():
    with pytest.raises(MemoryError, match=r"needs 3\.8 GiB, more than the 1\.0 GiB available") as info:
        checks.check_storage(10_000_000, 1, {"beta": (100,)}, tf.float32, False, limit_bytes=2**30)
    message = str(info.value)
    for remedy in ("thin=", "fewer n_iters", "sgmcmc_step"):
        assert remedy in message
    with pytest.raises(MemoryError, match="do not store the gradients"):
        checks.check_storage(10_000_000, 1, {"beta": (100,)}, tf.float32, True, limit_bytes=2**30)


def test_check_storage_against_available_memory():
    available = checks.available_memory()
    assert available is None or available > 0
    checks.check_storage(10, 1, {"theta": ()}, tf.float32, True)  # a few bytes always fit
    if available is not None:
        with pytest.raises(MemoryError):
            checks.check_storage(available // 4 + 1, 1, {"theta": ()}, tf.float32, False)
