"""Nothing computed is lost: Ctrl-C (also mid-chunk), op errors and divergence carry the samples.

Each test compares what the exception carries with an uninterrupted run of the same seed, so a
dropped chunk, a shifted row or a fabricated sample fails it.
"""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
import sgmcmc.run.chain
import sgmcmc.run.calls
import sgmcmc.run.sampler

ARGS = dict(stepsize=1e-4, minibatch_size=100, verbose=False, seed=5)


@pytest.fixture(scope="module")
def reference(small_gauss):
    return sgmcmc.sgld(small_gauss.log_lik, small_gauss.dataset, small_gauss.params, log_prior=small_gauss.log_prior, n_iters=2000, **ARGS)


def _patch_run_chunk(monkeypatch, on_call):
    original = sgmcmc.run.sampler.Sampler.sample_groups
    calls = []

    def patched(self, *args, **kwargs):
        calls.append(1)
        on_call(len(calls))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "sample_groups", patched)
    monkeypatch.setattr(sgmcmc.run.chain, "FIRST_CHUNK", 50)
    monkeypatch.setattr(sgmcmc.run.chain, "MAX_CHUNK", 200)
    return calls


def _run(model, **kwargs):
    return sgmcmc.sgld(model.log_lik, model.dataset, model.params, log_prior=model.log_prior, **{**ARGS, **kwargs})


def test_ctrl_c_mid_chunk_raises_interrupted_with_that_chunk_kept(small_gauss, reference, monkeypatch):
    """A SIGINT delivered by another thread while the third chunk runs in TensorFlow: the chunk
    finishes, is kept, and Interrupted (a KeyboardInterrupt) carries every sample so far."""
    started = threading.Event()

    def kill_soon():
        started.wait()
        os.kill(os.getpid(), signal.SIGINT)

    def on_call(n):
        if n == 3:
            started.set()

    _patch_run_chunk(monkeypatch, on_call)
    killer = threading.Thread(target=kill_soon)
    killer.start()
    with pytest.raises(sgmcmc.Interrupted) as caught:
        _run(small_gauss, n_iters=2000)
    killer.join()
    assert isinstance(caught.value, KeyboardInterrupt)
    got = caught.value.samples["theta"]
    assert caught.value.iteration == len(got) >= 50 + 200  # at least the first two chunks, and the third
    np.testing.assert_array_equal(got, reference["theta"][: len(got)])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_second_ctrl_c_interrupts_at_once(small_gauss, monkeypatch):
    def on_call(n):
        if n == 2:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    _patch_run_chunk(monkeypatch, on_call)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(small_gauss, n_iters=2000)
    assert not isinstance(caught.value, sgmcmc.Interrupted)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_op_error_mid_run_carries_the_samples(small_gauss, reference, monkeypatch):
    def on_call(n):
        if n == 3:
            raise tf.errors.InvalidArgumentError(None, None, "indices[3] = 7 is not in [0, 5)")

    _patch_run_chunk(monkeypatch, on_call)
    with pytest.raises(sgmcmc.SamplingError, match="not in") as caught:
        _run(small_gauss, n_iters=2000)
    got = caught.value.samples["theta"]
    assert len(got) == caught.value.iteration == 250
    np.testing.assert_array_equal(got, reference["theta"][:250])
    assert isinstance(caught.value.__cause__, tf.errors.InvalidArgumentError)


def test_divergence_mid_chunk_with_thinning_keeps_every_earlier_kept_sample(small_gauss):
    """log_lik turns NaN once θ passes a threshold the chain reaches mid-run."""
    model = small_gauss
    mean = float(model.mean[0])

    def log_lik(params, dataset):
        value = model.log_lik(params, dataset)
        return tf.where(params["theta"] > mean + 0.02, tf.constant(np.nan, value.dtype), value)

    start = {"theta": mean - 1.0}
    with pytest.raises(sgmcmc.DivergenceError, match="smaller stepsize") as caught:
        sgmcmc.sgld(log_lik, model.dataset, start, log_prior=model.log_prior, n_iters=3000, thin=3, check_model=False, **ARGS)
    at = caught.value.iteration
    got = caught.value.samples["theta"]
    assert len(got) == (at - 1) // 3
    reference = sgmcmc.sgld(model.log_lik, model.dataset, start, log_prior=model.log_prior, n_iters=at - 1, **ARGS)
    np.testing.assert_array_equal(got, reference["theta"][2::3])
    # The iteration that diverged started from the first state past the threshold.
    assert reference["theta"][at - 2] > mean + 0.02
    assert np.all(reference["theta"][: at - 2] <= mean + 0.02)


def test_mode_search_divergence_promises_no_samples(small_gauss):
    with pytest.raises(sgmcmc.DivergenceError, match="No samples exist yet"):
        sgmcmc.sgldcv(small_gauss.log_lik, small_gauss.dataset, small_gauss.params, 1e-4, opt_stepsize=10.0,
                      log_prior=small_gauss.log_prior, minibatch_size=100, n_iters=10, n_iters_opt=200, verbose=False, seed=1)


def test_continuing_a_chain_equals_one_long_run(small_gauss):
    """sample_chain(s, a) then sample_chain(s, b) == one run of a + b (burn-in and thinning on the
    global counter); a = 251 ends on no kept iteration (a = 250: the next test)."""
    model = small_gauss
    whole = _run(model, n_iters=700, burn_in=100, thin=3, n_chains=2)
    sampler = sgmcmc.sgld_setup(model.log_lik, model.dataset, model.params, 1e-4, model.log_prior, 100, seed=5, n_chains=2)
    first = sgmcmc.sample_chain(sampler, 251, verbose=False, burn_in=100, thin=3)
    second = sgmcmc.sample_chain(sampler, 449, verbose=False, burn_in=100, thin=3)
    np.testing.assert_array_equal(np.concatenate([first["theta"], second["theta"]], axis=1), whole["theta"])
    np.testing.assert_array_equal(
        np.concatenate([first.log_posterior, second.log_posterior], axis=1)[:, :-1], whole.log_posterior[:, :-1]
    )


@pytest.mark.parametrize("name, estimator", [("sgld", "plain"), ("sghmc", "saga")])
def test_a_run_ending_on_a_kept_sample_stores_what_one_long_run_stores(small_gauss, name, estimator):
    """a = 250 ends on a kept iteration (burn-in 100, thin 3): its last log-posterior estimate
    and gradient come from one more group of the run's own program, the state then put back
    (Sampler.estimate_for_storage), so they are the ones the continuing run's next iteration
    makes: the whole run's, bit for bit, and the chain goes on unchanged. SGHMC with SAGA: the
    put-back group updates SAGA's table, which must be put back too (checked: putting back all
    but the estimator's variables fails this case). (Before: a separate program on a storage
    stream, another minibatch: 2 of 2 chains' last entries differed.)"""
    model = small_gauss
    args = dict(log_prior=model.log_prior, minibatch_size=100, seed=5, n_chains=2, estimator=estimator)
    stepsize = 1e-4 if name == "sgld" else 1e-5
    kept = dict(verbose=False, burn_in=100, thin=3, store_gradients=True)
    whole = getattr(sgmcmc, name)(model.log_lik, model.dataset, model.params, stepsize, n_iters=400, **args, **kept)
    sampler = getattr(sgmcmc, f"{name}_setup")(model.log_lik, model.dataset, model.params, stepsize, **args)
    first = sgmcmc.sample_chain(sampler, 250, **kept)
    second = sgmcmc.sample_chain(sampler, 150, **kept)
    assert first["theta"].shape[1] == 50
    np.testing.assert_array_equal(np.concatenate([first["theta"], second["theta"]], axis=1), whole["theta"])
    np.testing.assert_array_equal(np.concatenate([first.log_posterior, second.log_posterior], axis=1), whole.log_posterior)
    np.testing.assert_array_equal(
        np.concatenate([first.gradients["theta"], second.gradients["theta"]], axis=1), whole.gradients["theta"]
    )


@pytest.mark.parametrize("name, estimator, minibatch_size", [("sgld", "plain", 1_000), ("sghmc", "saga", 100)])
def test_the_storage_programs_estimate_leaves_the_chain_alone(small_gauss, monkeypatch, name, estimator, minibatch_size):
    """Above STORAGE_SNAPSHOT_BYTES (a state too large to copy) a run ending on a kept sample gets
    its last estimate from a separate program on the storage stream (Sampler.estimate_for_storage's
    fallback; here forced by a 0-byte limit). The chain goes on unchanged, bit for bit, and the
    boundary entry is the estimate at the last kept state: with n = N (every row, no draw) the
    exact one, which the whole run's next iteration also makes (float32, rtol 1e-5: the two
    programs sum the 1,000 rows' terms in their own orders; measured 0 under XLA's fusion
    emitters, 1.3e-6 and 2.3e-6 under the package's XLA flags (sgmcmc/_xla_flags.py), where the
    neighbouring kept entries, one thinning group away, differ by 8–15, relative 0.3–4). SAGA:
    the program must not write the table (``for_storage``; checked: the table-writing estimator
    in its place changes 88 of the 200 continued entries)."""
    monkeypatch.setattr(sgmcmc.run.calls, "STORAGE_SNAPSHOT_BYTES", 0)
    model = small_gauss
    args = dict(log_prior=model.log_prior, minibatch_size=minibatch_size, seed=5, n_chains=2, estimator=estimator)
    stepsize = 1e-4 if name == "sgld" else 1e-5
    kept = dict(verbose=False, burn_in=100, thin=3, store_gradients=True)
    whole = getattr(sgmcmc, name)(model.log_lik, model.dataset, model.params, stepsize, n_iters=400, **args, **kept)
    sampler = getattr(sgmcmc, f"{name}_setup")(model.log_lik, model.dataset, model.params, stepsize, **args)
    first = sgmcmc.sample_chain(sampler, 250, **kept)
    assert sampler.calls.storage_program is not None  # the fallback ran
    second = sgmcmc.sample_chain(sampler, 150, **kept)
    np.testing.assert_array_equal(np.concatenate([first["theta"], second["theta"]], axis=1), whole["theta"])
    np.testing.assert_array_equal(first.log_posterior[:, :-1], whole.log_posterior[:, :49])
    boundary = (first.log_posterior[:, -1], first.gradients["theta"][:, -1])
    assert np.all(np.isfinite(boundary[0])) and np.all(np.isfinite(boundary[1]))
    if minibatch_size == model.n_rows:
        np.testing.assert_allclose(boundary[0], whole.log_posterior[:, 49], rtol=1e-5)
        np.testing.assert_allclose(boundary[1], whole.gradients["theta"][:, 49], rtol=1e-5)


def test_a_failing_end_of_run_estimate_keeps_every_sample(small_gauss, monkeypatch):
    """An op error in the estimate at the last kept sample (run/chain.py, after the last chunk)
    raises SamplingError carrying every kept sample, that entry's log posterior NaN, and the
    chain can go on (before: the raw TensorFlow error, and the samples were lost)."""
    model = small_gauss
    args = dict(log_prior=model.log_prior, minibatch_size=100, seed=5)
    kept = dict(verbose=False, burn_in=100, thin=3)
    whole = sgmcmc.sgld(model.log_lik, model.dataset, model.params, 1e-4, n_iters=400, **args, **kept)
    sampler = sgmcmc.sgld_setup(model.log_lik, model.dataset, model.params, 1e-4, **args)

    def fail(*_):
        raise tf.errors.InternalError(None, None, "the storage estimate broke")

    monkeypatch.setattr(sampler.calls, "estimate_for_storage", fail)
    with pytest.raises(sgmcmc.SamplingError, match="the last kept sample .iteration 250. failed") as caught:
        sgmcmc.sample_chain(sampler, 250, **kept)
    got = caught.value.samples
    np.testing.assert_array_equal(got["theta"], whole["theta"][:50])
    np.testing.assert_array_equal(got.log_posterior[:49], whole.log_posterior[:49])
    assert np.isnan(got.log_posterior[49])
    monkeypatch.undo()
    np.testing.assert_array_equal(sgmcmc.sample_chain(sampler, 150, **kept)["theta"], whole["theta"][50:])


def test_seeds_give_unrelated_streams(make_gaussian_1d):
    """Seeds 1 and 2 once gave the same random stream shifted by one Philox block (the seed went
    into the counter): with 4 float64 chains and exact gradients (no minibatch draws), chains 0-1
    of seed 2 repeated chains 2-3 of seed 1. With exact gradients SGLD's noise is
    recovered exactly from the chain, ξ = (Δθ − (ε/2) g(θ)) / √ε, g(θ) = −(θ − m)/s². No chain's
    noise may follow another's (either seed) at any small shift. With Generator.from_seed the
    correlation is 1.0."""
    model = make_gaussian_1d(tf.float64, n_rows=1_000, seed=7)
    eps = 1e-4
    mean, var = float(model.mean[0]), float(model.cov[0, 0])
    noise = []
    for seed in (1, 2):
        theta = _run(model, n_iters=200, n_chains=4, seed=seed, minibatch_size=model.n_rows, dtype=tf.float64)["theta"]
        theta = np.concatenate([np.full((4, 1), model.params["theta"]), theta], axis=1)
        noise.append((np.diff(theta, axis=1) + eps / 2 * (theta[:, :-1] - mean) / var) / np.sqrt(eps))
    noise = np.concatenate(noise)  # 8 chains
    assert np.std(noise) == pytest.approx(1.0, abs=0.1)
    for a in range(len(noise)):
        for b in range(len(noise)):
            for shift in range(0, 4):
                if a == b and shift == 0:
                    continue
                x, y = noise[a][shift:], noise[b][: len(noise[b]) - shift]
                assert abs(np.corrcoef(x, y)[0, 1]) < 0.4, (a, b, shift)


def test_storage_that_cannot_fit_is_refused_before_the_mode_search(small_gauss, monkeypatch):
    import sgmcmc.run.mode_search

    def no_mode_search(sampler, n):
        raise AssertionError("the mode search ran before the storage check")

    monkeypatch.setattr(sgmcmc.run.mode_search, "mode_steps", no_mode_search)
    with pytest.raises(MemoryError, match="thin"):
        sgmcmc.sgldcv(small_gauss.log_lik, small_gauss.dataset, small_gauss.params, 1e-4, opt_stepsize=1e-5,
                      log_prior=small_gauss.log_prior, minibatch_size=100, n_iters=10**13, verbose=False, seed=1)
