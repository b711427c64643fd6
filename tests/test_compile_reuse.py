"""Compiled programs reused across whole-chain calls (issue 31.3, ``sgmcmc/api/reuse.py``).

A second call with the same model, shapes and settings takes the first call's sampler: it must
trace nothing, and give the chain a new sampler gives, bit for bit — for every kind of state a
run carries (momenta, thermostats, preconditioners, L-BFGS pairs, SVRG anchors, SAGA tables, the
CV mode search). What the model reads from outside must invalidate it when it changes.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc.api import reuse
from sgmcmc.run.saved_state import state_bytes

from chain_fingerprints import GRADIENT, regression, sample

class Traces:
    """Calls of the model's Python code while tracing (not in the eager trial evaluation). An
    object, which the reuse key holds by identity (a dict would be compared by value, and the
    count changes with every trace)."""

    def __init__(self):
        self.count = 0

    def __getitem__(self, _):
        return self.count

    def __setitem__(self, _, value):
        self.count = value


TRACES = Traces()
SCALE = 1.0


def counted_log_lik(params, data):
    if not tf.executing_eagerly():
        TRACES["log_lik"] += 1
    logits = SCALE * (tf.linalg.matvec(data["x"], params["b"]) + params["c"])
    return tf.reduce_sum(data["y"] * logits - tf.math.softplus(logits))


def log_prior(params):
    return -0.5 * tf.reduce_sum(params["b"] ** 2) - 0.5 * params["c"] ** 2


@pytest.fixture(scope="module")
def data():
    return regression()[0]


@pytest.fixture(autouse=True)
def empty_cache():
    reuse.clear_compiled_cache()
    yield
    reuse.clear_compiled_cache()


def run(data, seed, log_lik=counted_log_lik, stepsize=2e-3, check_stepsize=False, **kw):
    return sgmcmc.sgld(
        log_lik, data, {"b": np.zeros(3), "c": np.float64(0.0)}, stepsize, log_prior=log_prior, minibatch_size=10,
        n_iters=30, seed=seed, dtype="float64", verbose=False, check_stepsize=check_stepsize, **kw,
    )


def test_a_second_call_traces_nothing_and_gives_a_new_samplers_chain(data):
    """One new sampler (seed 2), then reused for seed 1 and for seed 2 again: the reuses trace
    nothing, and the last gives the new sampler's chain (after running another seed)."""
    before = TRACES["log_lik"]
    fresh = run(data, seed=2)
    assert TRACES["log_lik"] > before  # the new sampler did trace (the counter counts traces)
    assert reuse.cached_count() == 1
    before = TRACES["log_lik"]
    other = run(data, seed=1)
    again = run(data, seed=2)
    assert TRACES["log_lik"] == before, "a second call traced the model again"
    assert reuse.cached_count() == 1
    for k in ("b", "c"):
        np.testing.assert_array_equal(again[k], fresh[k])
    assert not np.array_equal(other["b"], fresh["b"])  # and the seed was taken


def test_the_stepsize_check_is_reused_too(data):
    run(data, seed=1, check_stepsize=True)
    before = TRACES["log_lik"]
    run(data, seed=2, check_stepsize=True)
    assert TRACES["log_lik"] == before


def test_other_settings_or_arrays_build_a_new_sampler(data):
    run(data, seed=1)
    run(data, seed=1, stepsize=1e-3)
    run(data, seed=1, n_chains=2)
    run({k: v.copy() for k, v in data.items()}, seed=1)  # equal values, other arrays: identity decides
    assert reuse.cached_count() == 4


def test_a_rebound_global_the_model_reads_is_noticed(data):
    """The model reads SCALE: a reused program would keep 1.0 (a plausible wrong chain)."""
    global SCALE
    first = run(data, seed=3)
    try:
        SCALE = 0.5
        changed = run(data, seed=3)
    finally:
        SCALE = 1.0
    assert reuse.cached_count() == 2  # a new sampler, not the first one's program
    assert not np.array_equal(changed["b"], first["b"])


def test_a_small_array_changed_in_place_is_noticed(data):
    weights = np.ones(3)

    def log_lik(params, d):
        logits = tf.linalg.matvec(d["x"] * weights, params["b"]) + params["c"]
        return tf.reduce_sum(d["y"] * logits - tf.math.softplus(logits))

    first = run(data, seed=4, log_lik=log_lik)
    weights[1] = 3.0
    changed = run(data, seed=4, log_lik=log_lik)
    assert reuse.cached_count() == 2  # a new sampler, not the first one's program
    assert not np.array_equal(changed["b"], first["b"])


def test_a_new_function_object_with_the_same_code_and_values_reuses(data):
    def make():
        def log_lik(params, d):
            if not tf.executing_eagerly():
                TRACES["log_lik"] += 1
            logits = tf.linalg.matvec(d["x"], params["b"]) + params["c"]
            return tf.reduce_sum(d["y"] * logits - tf.math.softplus(logits))
        return log_lik

    run(data, seed=1, log_lik=make())
    before = TRACES["log_lik"]
    run(data, seed=1, log_lik=make())
    assert TRACES["log_lik"] == before


def test_off_by_environment_and_not_for_the_step_api(data, monkeypatch):
    sgmcmc.sgld_setup(counted_log_lik, data, {"b": np.zeros(3), "c": np.float64(0.0)}, 2e-3, log_prior=log_prior,
                      minibatch_size=10, dtype="float64", check_stepsize=False)
    assert reuse.cached_count() == 0
    monkeypatch.setenv("SGMCMC_REUSE", "0")
    run(data, seed=1)
    assert reuse.cached_count() == 0


def test_a_run_that_raises_is_not_kept(data):
    with pytest.raises(sgmcmc.DivergenceError):
        run(data, seed=1, stepsize=1e300)
    assert reuse.cached_count() == 0


#: One case per kind of state a reused sampler must start again from (estimators' and kernels').
REUSED_CASES = [
    ("sgld", "plain"), ("sghmc", "svrg"), ("sgnht", "saga"), ("psgld", "plain"), ("hamcmc", "plain"),
    ("osgld", "plain"), ("baoab", "cv"), ("sgldcv", "cv"), ("sghmccv", "cv"),
]


@pytest.mark.parametrize("name,estimator", REUSED_CASES)
def test_a_reused_sampler_gives_a_new_samplers_chain(name, estimator):
    """Each case of the refactoring record (tests/chain_fingerprints.py): a new sampler's chain
    (seed 11), then the same sampler reused for seed 3 and again for seed 11, which must give the
    new sampler's chain bit for bit (one compilation per case). (Not
    against the stored record: whether an entry sits on a 64-byte boundary decides whether
    SVRG reads it in place under XLA or through a host callback in graph mode, whose normal
    draws differ, and that is allocation luck.)"""
    model = regression()
    fresh = sample(name, estimator, GRADIENT[name], model, seed=11)
    assert reuse.cached_count() == 1
    other = sample(name, estimator, GRADIENT[name], model, seed=3)
    again = sample(name, estimator, GRADIENT[name], model, seed=11)
    assert reuse.cached_count() == 1  # reused twice, not a second sampler
    for k in ("b", "c"):
        np.testing.assert_array_equal(again[k], fresh[k])
    assert not np.array_equal(other["b"], fresh["b"])  # the reuse took the other seed


def test_kept_samplers_hold_no_block_buffers_and_respect_the_byte_cap(data, monkeypatch):
    run(data, seed=1)
    kept = reuse._entries[0]
    assert not kept.sampler.feeds.holds_buffers and kept.nbytes == state_bytes(kept.sampler) > 0
    reuse.clear_compiled_cache()
    monkeypatch.setattr(reuse, "KEEP_BYTES", kept.nbytes - 1)  # one sampler alone is above it
    run(data, seed=1)
    assert reuse.cached_count() == 0
