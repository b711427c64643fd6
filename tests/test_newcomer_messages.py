"""The messages a newcomer met in their first hour (issue 44, items 5-7): each says what happened
and what to do, in the library's words.

- 5: ``Interrupted`` from a whole-chain call (``sgld(...)``) said "sample_chain(sampler, n)
  continues the chain", but the caller holds no sampler: it now says where the kept draws are
  and that ``checkpoint_dir=`` makes a run resumable; with ``checkpoint_dir`` it names the
  checkpoint a rerun resumes from (and the rerun does); ``sample_chain`` on a ``*_setup``
  sampler keeps the step-API advice.
- 6: a misspelt dataset key (``{"X": X, "Y": y}`` read as ``d["y"]``) lists the names there are
  and the closest one.
- 7: a ``log_lik`` with a Python ``if`` on a tensor whose source AutoGraph cannot read (code
  piped to ``python -``, ``exec``) fails on the trial evaluation, before anything is compiled,
  with a ValueError naming the fix, and without AutoGraph's "could not transform" warning. (A
  function AutoGraph can convert still samples: tests/test_autograph.py.)
"""

from __future__ import annotations

import logging
import signal
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc
import sgmcmc.run.chain
import sgmcmc.run.sampler

tfd = tfp.distributions
ARGS = dict(stepsize=5e-5, minibatch_size=100, verbose=False, seed=5)


def _interrupt_on_call(monkeypatch, when: int) -> None:
    """Ctrl-C (SIGINT, deferred by the run to the end of the chunk) during the ``when``-th chunk."""
    original = sgmcmc.run.sampler.Sampler.sample_groups
    calls = []

    def patched(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == when:
            signal.raise_signal(signal.SIGINT)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "sample_groups", patched)
    monkeypatch.setattr(sgmcmc.run.chain, "FIRST_CHUNK", 50)
    monkeypatch.setattr(sgmcmc.run.chain, "MAX_CHUNK", 100)


def _sgld(model, **kwargs):
    return sgmcmc.sgld(model.log_lik, model.dataset, model.params, log_prior=model.log_prior, **{**ARGS, **kwargs})


def test_interrupted_whole_chain_says_what_the_caller_can_do(small_gauss, monkeypatch):
    """A whole-chain call: the draws are on the exception, checkpoint_dir= makes a run resumable;
    no advice to continue a sampler the caller does not have. Fails on the former message."""
    _interrupt_on_call(monkeypatch, 2)
    with pytest.raises(sgmcmc.Interrupted) as caught:
        _sgld(small_gauss, n_iters=1000)
    message = str(caught.value)
    assert "the samples kept so far are in the exception's `samples` attribute" in message, message
    assert "cannot be continued" in message and "checkpoint_dir=" in message, message
    assert "sample_chain(sampler, n) continues the chain" not in message, message
    assert len(caught.value.samples["theta"]) == caught.value.iteration == 150


def test_interrupted_sample_chain_on_a_setup_sampler_keeps_the_step_api_advice(small_gauss, monkeypatch):
    """On a ``*_setup`` sampler the advice is right, and true: sample_chain continues the chain
    where it stopped (the draws equal one uninterrupted run's)."""
    m = small_gauss
    reference = _sgld(m, n_iters=400)
    sampler = sgmcmc.sgld_setup(m.log_lik, m.dataset, m.params, 5e-5, m.log_prior, 100, seed=5)
    _interrupt_on_call(monkeypatch, 2)
    with pytest.raises(sgmcmc.Interrupted, match=r"; sample_chain\(sampler, n\) continues the chain$") as caught:
        sgmcmc.sample_chain(sampler, 400, verbose=False)
    monkeypatch.undo()
    kept = caught.value.samples["theta"]
    rest = sgmcmc.sample_chain(sampler, 400 - len(kept), verbose=False)["theta"]
    np.testing.assert_array_equal(np.concatenate([kept, rest]), reference["theta"])


def test_interrupted_checkpointed_run_names_the_checkpoint_a_rerun_resumes_from(small_gauss, monkeypatch, tmp_path):
    """With checkpoint_dir (every 100 iterations; chunks of 50, 100, 100): interrupted after the
    third chunk (iteration 250, before its checkpoint), the message names the checkpoint written
    at iteration 150, and the same call run again resumes and gives the uninterrupted run's
    draws."""
    reference = _sgld(small_gauss, n_iters=500)
    _interrupt_on_call(monkeypatch, 3)
    run = dict(n_iters=500, checkpoint_dir=tmp_path / "run", checkpoint_every=100)
    with pytest.raises(sgmcmc.Interrupted, match=r"the same call resumes from its last checkpoint \(iteration 150\)"):
        _sgld(small_gauss, **run)
    monkeypatch.undo()
    np.testing.assert_array_equal(_sgld(small_gauss, **run)["theta"], reference["theta"])


def test_misspelt_dataset_key_lists_the_names_and_the_closest(small_gauss):
    """``d["y"]`` for a dataset with "X" and "Y"; ``params["thta"]`` in log_prior. Before: only
    "log_lik failed on a trial evaluation (KeyError: 'y'); check that it uses params[name] ..."."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)

    def log_lik(params, d):
        logits = tf.linalg.matvec(d["X"], params["beta"])
        return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(d["y"], logits))

    with pytest.raises(RuntimeError, match=r"there is no 'y'; the dataset has entries \['X', 'Y'\] and params has "
                                           r"\['beta'\]\. Did you mean dataset\['Y'\]\?"):
        sgmcmc.sgld(log_lik, {"X": X, "Y": y}, {"beta": np.zeros(3)}, 1e-4, n_iters=10, verbose=False)

    def log_prior(params):
        return tf.reduce_sum(tfd.Normal(0.0, 1.0).log_prob(params["bta"]))

    with pytest.raises(RuntimeError, match=r"log_prior failed .*there is no 'bta'; params has \['beta'\]\. "
                                           r"Did you mean params\['beta'\]\?"):
        sgmcmc.sgld(log_lik, {"X": X, "y": y}, {"beta": np.zeros(3)}, 1e-4, log_prior=log_prior, n_iters=10,
                    verbose=False)


def _without_source(code: str) -> dict:
    """Functions defined by exec: like code piped to ``python -``, AutoGraph cannot read them."""
    namespace = {"tf": tf, "tfd": tfd}
    exec(compile(textwrap.dedent(code), "<stdin>", "exec"), namespace)
    return namespace


def test_python_if_on_a_tensor_without_source_is_explained_before_sampling(small_gauss, caplog, capfd, monkeypatch):
    """Before: AutoGraph's "could not transform" warning, then ~60 lines ending in
    OperatorNotAllowedInGraphError from the stepsize check's compiled curvature. Now: a
    ValueError from the trial evaluation (nothing compiled: no sampler is built), naming the
    line and the fix, and no AutoGraph warning."""
    m = small_gauss
    fns = _without_source("""
        def log_lik(params, dataset):
            if params["theta"] > 100.0:
                return tf.reduce_sum(tfd.Normal(params["theta"], 2.0).log_prob(dataset["x"]))
            return tf.reduce_sum(tfd.Normal(params["theta"], 1.0).log_prob(dataset["x"]))
    """)
    built = []
    monkeypatch.setattr(sgmcmc.run.sampler.Sampler, "__init__", lambda *a, **k: built.append(1) or 1 / 0)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        with pytest.raises(ValueError, match=r"(?s)log_lik uses Python control flow on a tensor at <stdin>, line 3 "
                                             r"\(in log_lik\).*cannot read its source.*tf\.where.*tf\.cond.*\.py file"):
            sgmcmc.sgld(fns["log_lik"], m.dataset, m.params, 1e-4, log_prior=m.log_prior, n_iters=10, verbose=False)
    assert not built
    assert "could not transform" not in caplog.text + "".join(capfd.readouterr()), caplog.text


def test_graph_only_failure_other_than_control_flow_is_explained(small_gauss):
    """A ``.numpy()`` in log_lik runs eagerly and cannot be traced."""
    m = small_gauss

    def log_lik(params, dataset):
        scale = float(params["theta"].numpy()) * 0 + 1.0
        return tf.reduce_sum(tfd.Normal(params["theta"], scale).log_prob(dataset["x"]))

    with pytest.raises(ValueError, match=r"log_lik runs eagerly but cannot be traced into a graph.*no \.numpy\(\)"):
        sgmcmc.sgld(log_lik, m.dataset, m.params, 1e-4, log_prior=m.log_prior, n_iters=10, verbose=False)
