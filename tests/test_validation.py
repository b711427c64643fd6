"""Bad input raises before anything runs, with a message that says what to fix; divergence
and Ctrl-C lose nothing computed (SPEC §2, §4)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
import sgmcmc.run.sampler

tfd = tfp.distributions

SAMPLERS = ("sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv")
CV_SAMPLERS = ("sgldcv", "sghmccv", "sgnhtcv")


@pytest.fixture
def no_sampler(monkeypatch):
    """Fail loudly if a Sampler (variables, compiled functions) is ever built: every check
    must happen before that."""

    def refuse(self, *args, **kwargs):
        raise AssertionError("a Sampler was built before the bad input was reported")

    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "__init__", refuse)


@pytest.fixture(scope="module")
def two_params():
    """log_lik over two scalar parameters, mean theta + phi."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=500).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["theta"] + params["phi"], 1.0).log_prob(dataset["x"]))

    return log_lik, {"x": x}, {"theta": 0.0, "phi": 0.0}


def _call(name, model, setup=False, **kwargs):
    """Call sampler ``name`` (or ``name_setup``) on ``model`` with valid defaults + kwargs."""
    args = dict(stepsize=1e-4, log_prior=model.log_prior, minibatch_size=100, verbose=False, seed=1)
    if name.endswith("cv"):
        args.update(opt_stepsize=1e-5, n_iters_opt=100)
    if not setup:
        args["n_iters"] = 100
    else:
        if not name.endswith("cv"):
            args.pop("verbose")
    log_lik = kwargs.pop("log_lik", model.log_lik)
    dataset = kwargs.pop("dataset", model.dataset)
    params = kwargs.pop("params", model.params)
    args.update(kwargs)
    fn = getattr(sgmcmc, f"{name}_setup" if setup else name)
    return fn(log_lik, dataset, params, **args)


# -- per-parameter settings -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name, what",
    [("sgld", "stepsize"), ("sghmc", "alpha"), ("sgnht", "a"), ("sgldcv", "opt_stepsize"), ("sghmccv", "stepsize")],
)
def test_setting_dict_with_missing_name(name, what, two_params, no_sampler):
    log_lik, dataset, params = two_params
    args = dict(stepsize=1e-5, minibatch_size=50, n_iters=10, verbose=False)
    if name.endswith("cv"):
        args["opt_stepsize"] = 1e-5
    args[what] = {"theta": 1e-5}
    with pytest.raises(ValueError, match=re.escape(f"{what} dict must have exactly the names of params")) as info:
        getattr(sgmcmc, name)(log_lik, dataset, params, **args)
    assert "missing ['phi']" in str(info.value)


@pytest.mark.parametrize("name, what", [("sgld", "stepsize"), ("sghmc", "alpha"), ("sgnht", "a"), ("sgnhtcv", "opt_stepsize")])
def test_setting_dict_with_unknown_name(name, what, two_params, no_sampler):
    log_lik, dataset, params = two_params
    args = dict(stepsize=1e-5, minibatch_size=50, n_iters=10, verbose=False)
    if name.endswith("cv"):
        args["opt_stepsize"] = 1e-5
    args[what] = {"theta": 1e-5, "phi": 1e-5, "psi": 1e-5}
    with pytest.raises(ValueError, match=r"unknown \['psi'\]"):
        getattr(sgmcmc, name)(log_lik, dataset, params, **args)


@pytest.mark.parametrize("value", [0, -1e-4, 0.0, float("nan"), float("inf")])
@pytest.mark.parametrize("name", SAMPLERS)
def test_non_positive_stepsize(name, value, small_gauss, no_sampler):
    with pytest.raises(ValueError, match="stepsize must be positive"):
        _call(name, small_gauss, stepsize=value)


def test_non_positive_stepsize_in_dict(two_params, no_sampler):
    log_lik, dataset, params = two_params
    with pytest.raises(ValueError, match=re.escape("stepsize['phi'] must be positive")):
        sgmcmc.sgld(log_lik, dataset, params, {"theta": 1e-5, "phi": -1e-5}, n_iters=10, verbose=False)


@pytest.mark.parametrize("name, kwargs, match", [
    ("sghmc", dict(alpha=-0.1), "alpha must be positive"),
    ("sgnht", dict(a=0), "a must be positive"),
    ("sgldcv", dict(opt_stepsize=-1e-5), "opt_stepsize must be positive"),
    ("sgnhtcv", dict(opt_stepsize=0.0), "opt_stepsize must be positive"),
])
def test_non_positive_other_settings(name, kwargs, match, small_gauss, no_sampler):
    with pytest.raises(ValueError, match=match):
        _call(name, small_gauss, **kwargs)


def test_stepsize_not_a_number(small_gauss, no_sampler):
    with pytest.raises(TypeError, match="stepsize must be a number"):
        _call("sgld", small_gauss, stepsize="1e-4")


# -- counts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -10])
@pytest.mark.parametrize("name", SAMPLERS)
def test_non_positive_n_iters(name, value, small_gauss, no_sampler):
    with pytest.raises(ValueError, match="n_iters must be a positive whole number"):
        _call(name, small_gauss, n_iters=value)


def test_fractional_n_iters(small_gauss, no_sampler):
    with pytest.raises(TypeError, match="n_iters must be a whole number"):
        _call("sgld", small_gauss, n_iters=10.5)


@pytest.mark.parametrize("setup", [False, True])
@pytest.mark.parametrize("name", CV_SAMPLERS)
def test_negative_n_iters_opt(name, setup, small_gauss, no_sampler):
    # 0 is allowed: the control variate is anchored at the start (tests/test_constraints.py)
    with pytest.raises(ValueError, match="n_iters_opt must be a whole number >= 0"):
        _call(name, small_gauss, setup=setup, n_iters_opt=-1)


@pytest.mark.parametrize("setup", [False, True])
@pytest.mark.parametrize("name", ["sghmc", "sghmccv"])
def test_non_positive_L(name, setup, small_gauss, no_sampler):
    with pytest.raises(ValueError, match="L must be a positive whole number"):
        _call(name, small_gauss, setup=setup, L=0)


# -- dataset ------------------------------------------------------------------------------------


def test_dataset_entries_of_different_lengths(small_gauss, no_sampler):
    x = small_gauss.dataset["x"]
    with pytest.raises(ValueError, match="different lengths on the first axis"):
        _call("sgld", small_gauss, dataset={"x": x, "y": x[:-1]})


def test_minibatch_larger_than_dataset(small_gauss, no_sampler):
    with pytest.raises(ValueError, match=r"larger than the dataset \(N=1000 rows\)"):
        _call("sgldcv", small_gauss, minibatch_size=1001)


def test_minibatch_proportion_rounding_to_zero(small_gauss, no_sampler):
    with pytest.raises(ValueError, match="rounds to 0 rows"):
        _call("sghmc", small_gauss, minibatch_size=1e-4)


def test_minibatch_neither_proportion_nor_count(small_gauss, no_sampler):
    with pytest.raises(ValueError, match="neither a proportion"):
        _call("sgld", small_gauss, minibatch_size=2.5)


@pytest.mark.parametrize("one", [1.0, np.float32(1.0), np.float64(1.0)])
def test_minibatch_float_one_is_refused_naming_all_rows(one, small_gauss, no_sampler):
    """Issue 23.4: ``minibatch_size=1.0`` silently meant one row (R's reading: below 1 a
    proportion, else a count); a user writing 1.0 meant all rows. Now refused before anything is
    built, naming the count of all rows. Fails on the old batch_size (it returned 1)."""
    with pytest.raises(ValueError, match=r"minibatch_size=.*1\.0.* is ambiguous.*count minibatch_size=1000.*integer 1"):
        _call("sgld", small_gauss, minibatch_size=one)


def test_minibatch_edge_values_have_one_meaning_each():
    """The R-semantics edge values, decided (inputs.batch_size docstring, README): the integer 1
    is one row, N (int or whole float) all rows, a proportion just below 1 rounds, whole floats
    above 1 are counts; NaN, infinities, 0, negatives and booleans are refused with a message
    (NaN fell through to "neither a proportion nor a count", a negative was not called
    negative)."""
    from sgmcmc.checks import batch_size

    assert batch_size(1, 1000) == 1 and batch_size(np.int64(1), 1000) == 1
    assert batch_size(1000, 1000) == 1000 and batch_size(1000.0, 1000) == 1000
    assert batch_size(0.9999, 1000) == 1000 and batch_size(0.5, 1000) == 500 and batch_size(500.0, 1000) == 500
    for bad, words in [(np.nan, "not a finite number"), (np.inf, "not a finite number"),
                       (0, "must be positive"), (-0.5, "must be positive"), (-3, "must be positive"),
                       (1.5, "neither a proportion")]:
        with pytest.raises(ValueError, match=words):
            batch_size(bad, 1000)
    with pytest.raises(TypeError, match="proportion in \\(0, 1\\) or a count"):
        batch_size(True, 1000)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_in_data(bad, small_gauss, no_sampler):
    x = small_gauss.dataset["x"].copy()
    x[17] = bad
    with pytest.raises(ValueError, match=re.escape("dataset['x'] contains NaN or Inf (first at row 17)")):
        _call("sgld", small_gauss, dataset={"x": x})


# -- the user's functions -----------------------------------------------------------------------


def test_log_lik_not_scalar(small_gauss, no_sampler):
    def log_lik(params, dataset):  # forgot tf.reduce_sum
        return tfd.Normal(params["theta"], 1.0).log_prob(dataset["x"])

    with pytest.raises(ValueError, match=r"log_lik must return a scalar .* tf\.reduce_sum"):
        _call("sgld", small_gauss, log_lik=log_lik)


def test_log_prior_not_scalar(gauss3d, no_sampler):
    def log_prior(params):  # a vector of per-coordinate log densities
        return tfd.Normal(0.0, 5.0).log_prob(params["theta"])

    with pytest.raises(ValueError, match=r"log_prior must return a scalar .*shape \[3\]"):
        _call("sgnht", gauss3d, log_prior=log_prior)


def test_float64_constant_in_float32_model(small_gauss, no_sampler):
    weights = tf.constant(np.ones(1))  # float64, as numpy arrays default to

    def log_lik(params, dataset):
        return tf.reduce_sum(weights * tfd.Normal(params["theta"], 1.0).log_prob(dataset["x"]))

    with pytest.raises(TypeError, match=re.escape("create constants with dtype=tf.float32")):
        _call("sgld", small_gauss, log_lik=log_lik)


def test_float64_tfp_constant_in_float32_model(small_gauss, no_sampler):
    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["theta"], tf.constant(1.0, tf.float64)).log_prob(dataset["x"]))

    with pytest.raises(TypeError, match=re.escape("create constants with dtype=tf.float32")):
        _call("sgldcv", small_gauss, log_lik=log_lik)


def test_float32_constant_in_float64_model(gauss1d_f64, no_sampler):
    """The mirror case: the message must name the offending float32 and not advise switching
    to float64, which the model already uses."""

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["theta"], tf.constant(1.0, tf.float32)).log_prob(dataset["x"]))

    with pytest.raises(TypeError, match=re.escape("create constants with dtype=tf.float64")) as info:
        _call("sgld", gauss1d_f64, log_lik=log_lik, dtype=tf.float64)
    summary = str(info.value).split(" (")[0]  # the package's own sentence, before the TF error
    assert "float32" in summary, str(info.value)
    assert "or run the sampler with dtype=tf.float64" not in str(info.value), str(info.value)


def test_log_lik_returning_float64(small_gauss, no_sampler):
    def log_lik(params, dataset):
        return tf.cast(tf.reduce_sum(tfd.Normal(params["theta"], 1.0).log_prob(dataset["x"])), tf.float64)

    with pytest.raises(TypeError, match="returned a float64 value but the model runs in float32"):
        _call("sgld", small_gauss, log_lik=log_lik)


def test_log_lik_with_wrong_dataset_name(small_gauss, no_sampler):
    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["theta"], 1.0).log_prob(dataset["y"]))

    with pytest.raises(RuntimeError, match="failed on a trial evaluation"):
        _call("sgld", small_gauss, log_lik=log_lik)


def test_log_lik_not_finite_at_start(small_gauss, no_sampler):
    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(0.0, params["theta"]).log_prob(dataset["x"]))

    with pytest.raises(ValueError, match="at the starting values"):
        _call("sgld", small_gauss, log_lik=log_lik, params={"theta": -1.0})


# -- params, dtype, seed ----------------------------------------------------------------------


def test_empty_params(small_gauss, no_sampler):
    with pytest.raises(ValueError, match="params is empty"):
        _call("sgld", small_gauss, params={})


def test_non_numeric_params(small_gauss, no_sampler):
    with pytest.raises(TypeError, match=re.escape("params['theta'] is not numeric")):
        _call("sgldcv", small_gauss, params={"theta": "zero"})


def test_params_not_a_dict(small_gauss, no_sampler):
    with pytest.raises(TypeError, match="params must be a dict"):
        _call("sgld", small_gauss, params=[0.0])


def test_non_finite_start(small_gauss, no_sampler):
    with pytest.raises(ValueError, match="contains NaN or Inf"):
        _call("sgld", small_gauss, params={"theta": np.inf})


@pytest.mark.parametrize("dtype, error, match", [
    ("float16", ValueError, "dtype=float16 is not supported"),
    (tf.int32, ValueError, "dtype=int32 is not supported"),
    ("not-a-dtype", TypeError, "is not a TensorFlow dtype"),
])
@pytest.mark.parametrize("setup", [False, True])
def test_bad_dtype(dtype, error, match, setup, small_gauss, no_sampler):
    with pytest.raises(error, match=match):
        _call("sgld", small_gauss, setup=setup, dtype=dtype)


@pytest.mark.parametrize("seed", ["1", 1.5, True, [1]])
@pytest.mark.parametrize("name", ["sgld", "sgnhtcv"])
def test_seed_not_int(name, seed, small_gauss, no_sampler):
    with pytest.raises(TypeError, match="seed must be an int or None"):
        _call(name, small_gauss, seed=seed)


# -- divergence -----------------------------------------------------------------------------------


def test_divergence_with_huge_stepsize(gauss1d):
    m = gauss1d
    with pytest.raises(sgmcmc.DivergenceError, match="smaller stepsize") as info:
        sgmcmc.sgld(m.log_lik, m.dataset, m.params, 10.0, log_prior=m.log_prior, minibatch_size=100,
                    n_iters=1_000, verbose=False, seed=1, check_stepsize=False)  # divergence, not the refusal
    e = info.value
    assert re.search(rf"diverged at iteration {e.iteration}\b", str(e))
    assert e.iteration >= 1
    assert set(e.samples) == {"theta"}
    assert e.samples["theta"].shape == (e.iteration - 1,)
    assert np.all(np.isfinite(e.samples["theta"]))


@pytest.fixture(scope="module")
def slow_divergence(gauss1d):
    """SGLD started at the exact mode with eps = 5/N: the deviation from the mean follows
    d_{k+1} = rho d_k + noise with rho = 1 - eps * lambda / 2 = -1.5, so it stays finite for
    ~100 iterations (past the first compiled chunk) before float32 overflows."""
    m = gauss1d
    eps = 5.0 / m.n_rows
    kwargs = dict(log_prior=m.log_prior, minibatch_size=100, seed=1, check_stepsize=False)  # divergence, not refusal
    return m, eps, {"theta": float(m.mean[0])}, kwargs


def test_divergence_after_some_steps_keeps_samples(slow_divergence):
    m, eps, start, kwargs = slow_divergence
    with pytest.raises(sgmcmc.DivergenceError, match=r"sgld diverged at iteration \d+.*try a smaller stepsize") as info:
        sgmcmc.sgld(m.log_lik, m.dataset, start, eps, n_iters=2_000, verbose=False, **kwargs)
    e = info.value
    assert e.iteration > 20
    assert f"iteration {e.iteration}:" in str(e)
    theta = e.samples["theta"]
    assert theta.shape == (e.iteration - 1,)
    assert np.all(np.isfinite(theta))
    # the kept samples are the real chain: once the deviation dwarfs the noise it grows by
    # exactly rho = 1 - eps * lambda / 2 per step
    rho = 1 - eps / m.cov[0, 0] / 2
    deviation = theta.astype(np.float64) - m.mean[0]
    np.testing.assert_allclose(deviation[-20:] / deviation[-21:-1], rho, rtol=1e-3)
    assert abs(deviation[-1]) > 1e15


def test_divergence_in_step_api(slow_divergence):
    m, eps, start, kwargs = slow_divergence
    whole = None
    try:
        sgmcmc.sgld(m.log_lik, m.dataset, start, eps, n_iters=2_000, verbose=False, **kwargs)
    except sgmcmc.DivergenceError as e:
        whole = e
    sampler = sgmcmc.sgld_setup(m.log_lik, m.dataset, start, eps, **kwargs)
    sess = sgmcmc.init_sess(sampler, verbose=False)
    with pytest.raises(sgmcmc.DivergenceError, match="try a smaller stepsize") as info:
        for _ in range(2_000):
            sgmcmc.sgmcmc_step(sampler, sess)
    assert f"iteration {info.value.iteration}:" in str(info.value)
    assert info.value.iteration > 20
    # same seed, same step function: diverges at the same iteration as the whole chain
    assert whole is not None and info.value.iteration == whole.iteration
    # nothing computed is lost: the variables keep the last finite state
    last = sgmcmc.get_params(sampler, sess)
    for name, rows in whole.samples.items():
        np.testing.assert_allclose(last[name], rows[-1], rtol=1e-5)


def test_divergence_in_mode_search(small_gauss):
    with pytest.raises(sgmcmc.DivergenceError, match="smaller opt_stepsize"):
        _call("sgldcv", small_gauss, opt_stepsize=1.0, n_iters_opt=200)


# -- Ctrl-C -------------------------------------------------------------------------------------


def _interrupt_on_call(monkeypatch, owner, attribute, call_number):
    original = getattr(owner, attribute)
    calls = []

    def interrupted(sampler, n):
        calls.append(n)
        if len(calls) == call_number:
            raise KeyboardInterrupt
        return original(sampler, n)

    monkeypatch.setattr(owner, attribute, interrupted)
    return calls


# Ctrl-C during sampling: tests/test_interruption.py.


def test_ctrl_c_during_mode_search_propagates(small_gauss, monkeypatch):
    """Before sampling starts there are no samples to return: KeyboardInterrupt goes through."""
    import sgmcmc.run.mode_search

    _interrupt_on_call(monkeypatch, sgmcmc.run.mode_search, "mode_steps", 2)
    with pytest.raises(KeyboardInterrupt):
        _call("sgldcv", small_gauss, n_iters_opt=5_000)


# -- start-up noise -------------------------------------------------------------------------------


def test_quiet_tensorflow_startup_sets_level_only_when_unset_and_before_import(monkeypatch):
    import sys

    from sgmcmc import _quiet

    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    assert _quiet.quiet_tensorflow_startup() is False  # TensorFlow is loaded here: too late
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    monkeypatch.delitem(sys.modules, "tensorflow")
    assert _quiet.quiet_tensorflow_startup() is True
    assert __import__("os").environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's choice wins
    assert _quiet.quiet_tensorflow_startup() is False
    assert __import__("os").environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def _python(code: str, **env_changes) -> "subprocess.CompletedProcess":
    """Run ``code`` in a fresh interpreter importing this checkout's sgmcmc, with
    TF_CPP_MIN_LOG_LEVEL unset unless given."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_import_prints_nothing_on_stderr_and_defers_keras():
    # Issue 23: each import printed TF's absl/oneDNN/cudart start-up lines (8 lines with TF 2.21
    # on this CPU-only machine). Broken variant checked: __init__ calling only
    # quiet_tensorflow_startup (the level, no filtered import) prints those 8 lines: fails.
    # Keras is not loaded by ``import sgmcmc`` (sgmcmc/_quiet.py, "Keras, deferred") and loads on
    # first use: ``import keras``, ``tf.keras``, ``tfp.layers`` and ``sgmcmc.keras`` all work
    # after it. Broken variants checked: no deferral prints "sgmcmc True"; a marker left in
    # sys.modules fails ``import keras``: both fail.
    done = _python(
        "import sgmcmc, sys; print(sgmcmc.__name__, 'keras' in sys.modules)\n"
        "import tensorflow as tf, tensorflow_probability as tfp, keras\n"
        "print(tf.keras.layers.Dense is keras.layers.Dense, sgmcmc.keras.__name__,\n"
        "      tfp.layers.DenseVariational.__name__)"
    )
    expected = "sgmcmc False\nTrue sgmcmc.keras DenseVariational\n"
    assert done.returncode == 0 and done.stdout == expected, done.stderr
    assert done.stderr == "", done.stderr


def test_startup_filter_drops_only_the_known_lines():
    # What the filter must not hide: any line it does not know (an error, a Python warning).
    # sgmcmc/_quiet.py needs only the standard library: loaded from its file, without the
    # package's __init__ (TensorFlow's import, ~8 CPU s of a fresh process).
    from pathlib import Path

    quiet = Path(__file__).resolve().parents[1] / "sgmcmc" / "_quiet.py"
    code = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('quiet', {str(quiet)!r})\n"
        "quiet = importlib.util.module_from_spec(spec); spec.loader.exec_module(quiet)\n"
        "assert 'tensorflow' not in sys.modules\n"
        "with quiet._startup_lines_filtered():\n"
        "    os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
        "    os.write(2, b'I0000 00:00:1795588492.450373   19880 cudart_stub.cc:31] Could not find cuda drivers\\n')\n"
        "    os.write(2, b'E0000 00:00:1795588469.715210   19801 cuda_platform.cc:52] failed call to cuInit\\n')\n"
        "    print('a real problem', file=sys.stderr)\n"
    )
    done = _python(code)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        "E0000 00:00:1795588469.715210   19801 cuda_platform.cc:52] failed call to cuInit",
        "a real problem",
    ]


#: One fresh interpreter for the two tests below (each TensorFlow import costs a process ~4 s):
#: the user's TF_CPP_MIN_LOG_LEVEL=0 (set before the import, so TensorFlow's W lines are not
#: hidden by the log level, as when TensorFlow is imported before sgmcmc), ``import sgmcmc``,
#: a marker line, then a start too short for its labels (the trial evaluation's failure).
LOG_LEVEL_0_RUN = (
    "import sys\n"
    "import sgmcmc\n"
    "print('-- imported --', file=sys.stderr, flush=True)\n"
    "import numpy as np, tensorflow as tf\n"
    "g = np.random.default_rng(1).integers(0, 5, 1000); y = np.zeros(1000, np.float32)\n"
    "ll = lambda p, d: tf.reduce_sum(-0.5 * tf.square(d['y'] - tf.gather(p['a'], d['g'])))\n"
    "try:\n"
    "    sgmcmc.sgld(ll, {'g': g, 'y': y}, {'a': np.zeros(3, np.float32)}, 1e-4, minibatch_size=100,\n"
    "                n_iters=10, verbose=False)\n"
    "except ValueError as e:\n"
    "    print('refused' if 'has shape (3,)' in str(e) else e)\n"
)


@pytest.fixture(scope="module")
def log_level_0_run():
    done = _python(LOG_LEVEL_0_RUN, TF_CPP_MIN_LOG_LEVEL="0")
    assert done.returncode == 0 and "-- imported --" in done.stderr, (done.stdout, done.stderr)
    imported, _, trial = done.stderr.partition("-- imported --")
    return done.stdout, imported, trial


def test_users_log_level_means_no_filtering(log_level_0_run):
    # A user who sets TF_CPP_MIN_LOG_LEVEL chooses TensorFlow's logging: the absl lines come through.
    _, imported, _ = log_level_0_run
    assert "absl::InitializeLog" in imported


# ---------------------------------------------------------------- issue 23.7: hints that name the problem
# Each case below ended in "log_lik failed on a trial evaluation (...); check that it uses
# params[name] and dataset[name] with the names you passed", blamed 0-based labels, or (a
# categorical) was "not numeric (dtype object)" / silently its category values. Run against the
# pre-change inputs.py (a patched copy): all five tests fail.

GROUPS = 5


def _grouped(labels, start_size=GROUPS):
    rng = np.random.default_rng(0)
    y = rng.normal(size=len(labels)).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(-0.5 * tf.square(dataset["y"] - tf.gather(params["a"], dataset["g"])))

    return log_lik, {"g": labels, "y": y}, {"a": np.zeros(start_size, np.float32)}


def _labels(n=1000):
    return np.random.default_rng(1).integers(0, GROUPS, n)


def test_start_too_short_for_the_labels_is_named(no_sampler):
    log_lik, data, start = _grouped(_labels(), start_size=3)
    with pytest.raises(ValueError, match=r"dataset\['g'\] holds 0\.\.4 \(0-based labels of 5 groups\) but "
                       r"params\['a'\] has shape \(3,\).*shape \(5,\)") as err:
        sgmcmc.sgld(log_lik, data, start, 1e-4, minibatch_size=100, n_iters=10, verbose=False)
    assert "must be 0-based" not in str(err.value)


def test_start_of_wrong_shape_in_arithmetic_is_a_shape_mismatch(no_sampler):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(1000, 5)).astype(np.float32), rng.normal(size=1000).astype(np.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(-0.5 * tf.square(dataset["y"] - tf.linalg.matvec(dataset["X"], params["beta"])))

    with pytest.raises(ValueError, match=r"shape mismatch.*params \['beta'\] have sizes the data do not.*"
                       r"\{'beta': \(3,\)\}.*\{'X': \(5,\), 'y': \(\)\}") as err:
        sgmcmc.sgld(log_lik, {"X": x, "y": y}, {"beta": np.zeros(3, np.float32)}, 1e-4, minibatch_size=100,
                    n_iters=10, verbose=False)
    assert "with the names you passed" not in str(err.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_labels_are_named_as_indices(dtype, no_sampler):
    log_lik, data, start = _grouped(_labels().astype(dtype))
    with pytest.raises(TypeError, match=r"(?s)dataset\['g'\] holds floats but log_lik uses it as indices.*astype\(np\.int32\)"):
        sgmcmc.sgld(log_lik, data, start, 1e-4, minibatch_size=100, n_iters=10, verbose=False)


@pytest.mark.parametrize("categories", ["strings", "integers"])
def test_categorical_column_is_named_as_categorical(categories, no_sampler):
    pd = pytest.importorskip("pandas")
    labels = _labels()
    values = np.array(list("abcde"))[labels] if categories == "strings" else labels + 1
    log_lik, data, start = _grouped(labels)
    frame = pd.DataFrame({"g": pd.Categorical(values), "y": data["y"]})
    with pytest.raises(TypeError, match=r"dataset\['g'\] is a pandas Categorical with 5 categories.*cat\.codes"):
        sgmcmc.sgld(log_lik, frame, start, 1e-4, minibatch_size=100, n_iters=10, verbose=False)


def test_trial_failure_leaks_no_rendezvous_line(log_level_0_run):
    """TensorFlow's W lines not hidden by the log level (the user's TF_CPP_MIN_LOG_LEVEL=0; was:
    TensorFlow imported before sgmcmc, the same level in a process of its own): the start too
    short for its labels raises our message, and stderr holds no "local_rendezvous" line (two
    leaked before; a patched copy without the trial's filter printed them here too: fails)."""
    stdout, _, trial = log_level_0_run
    assert stdout == "refused\n", (stdout, trial)
    assert "local_rendezvous" not in trial, trial


def test_params_as_a_list_of_arrays_says_to_name_them():
    """Issue 29.7: params given as Keras' get_weights() (a list of arrays) said "a list of 4
    starting dicts but n_chains=1"; it must say that params is a dict of named values and how to
    make one (fails on the former message)."""
    import tensorflow as tf

    weights = [np.zeros((3, 2), np.float32), np.zeros(2, np.float32), np.zeros((2, 1), np.float32), np.zeros(1, np.float32)]
    with pytest.raises(TypeError, match=r"params must be a dict.*get_weights\(\).*from_model"):
        sgmcmc.sgld_setup(lambda p, d: tf.reduce_sum(d["x"]), {"x": np.ones((10, 3))}, weights, 1e-3)
