"""The package's compiled functions trace without AutoGraph where the code allows it, with it where
it does not (``sgmcmc/graph_options.AutographIfNeeded``): the same chain either way, bit for bit.

The comparison run traces every function with AutoGraph from the start (the behaviour before the
change, forced by patching ``AutographIfNeeded``). A model with tensor-dependent Python control
flow makes the first trace fail and the function fall back; the chain must not notice (a failed
trace that left the random-number source's or the minibatches' counters advanced would give
another chain). Without the fallback the first model raises ``OperatorNotAllowedInGraphError``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc import graph_options

X = np.random.default_rng(3).normal([0.5, -1.0], 1.0, size=(2_000, 2))


def plain_log_lik(params, data):
    return -0.5 * tf.reduce_sum((data["x"] - params["mu"]) ** 2)


def branching_log_lik(params, data):
    """The same likelihood, written with Python control flow on a tensor (AutoGraph's job)."""
    total = -0.5 * tf.reduce_sum((data["x"] - params["mu"]) ** 2)
    if tf.reduce_max(tf.abs(params["mu"])) > 1e3:  # never true on this chain
        total = total - 1e6
    return total


def looping_log_lik(params, data):
    """With a loop over a tensor too (which does not vectorise over chains either way)."""
    total = branching_log_lik(params, data)
    for _ in tf.range(tf.shape(params["mu"])[0] - 2):  # no iterations
        total = total + 1.0
    return total


def run(log_lik, method: str, autograph_everywhere: bool = False) -> tuple[dict, list, list]:
    """The chain, the AutographIfNeeded objects made, the RuntimeWarnings' messages."""
    made = []
    original = graph_options.AutographIfNeeded.__init__

    def recording(self, fn, options):
        original(self, fn, options)
        if autograph_everywhere:  # the behaviour before AutographIfNeeded
            self.converted = tf.function(fn, **options)
        made.append(self)

    graph_options.AutographIfNeeded.__init__ = recording
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(sgmcmc, method)(
                log_lik, {"x": X}, {"mu": np.zeros(2)}, 1e-5, minibatch_size=50, n_iters=300, verbose=False, seed=7,
                n_chains=2, dtype=tf.float64, **({"n_iters_opt": 100} if method.endswith("cv") else {}),
            )
    finally:
        graph_options.AutographIfNeeded.__init__ = original
    return out, made, [str(w.message)[:60] for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("method,jit", [("sgld", True), ("sghmccv", False)])
def test_same_chain_with_and_without_autograph(method, jit, monkeypatch):
    """No fallback for a model without tensor control flow (every function traced without
    AutoGraph), a fallback for one with it; both chains equal AutoGraph's bit for bit, with the
    same warnings (the failed trace warned that the model "could not be vectorised over chains"
    when ``map_over_chains`` caught its error)."""
    monkeypatch.setenv("SGMCMC_XLA", "1" if jit else "0")
    for log_lik, falls_back in ((plain_log_lik, False), (branching_log_lik, True), (looping_log_lik, True)):
        out, made, warned = run(log_lik, method)
        assert made and any(f.converted is not None for f in made) == falls_back, log_lik.__name__
        reference, _, reference_warned = run(log_lik, method, autograph_everywhere=True)
        np.testing.assert_array_equal(out["mu"], reference["mu"])
        assert warned == reference_warned, log_lik.__name__
        assert np.all(np.isfinite(out["mu"])) and abs(out["mu"][:, 150:].mean(axis=(0, 1)) - X.mean(0)).max() < 0.2


def test_an_error_in_the_model_is_raised_as_it_is():
    """A genuine error while tracing (a shape mismatch) is not swallowed by the fallback."""

    def broken(params, data):
        return -0.5 * tf.reduce_sum((data["x"] - tf.concat([params["mu"], params["mu"]], 0)) ** 2)

    with pytest.raises(Exception, match="[Ii]ncompatible shapes|[Dd]imensions must be equal"):
        sgmcmc.sgld(broken, {"x": X}, {"mu": np.zeros(2)}, 1e-4, minibatch_size=50, n_iters=10, verbose=False)
