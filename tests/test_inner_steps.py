"""SGHMC's L kicks run in a ``tf.while_loop`` (``BoundEstimator.repeat``) and give the chain that
writing the kicks out gives, bit for bit: each kick's minibatch and random draws are the ones the
written-out loop would take (sgmcmc/step/contract.py).

The reference is the kernel as it was written before the loop (below, ``written_out``), patched in
for one run. Every estimator that keeps state across kicks is covered (SAGA's table is updated by
each kick; SVRG refreshes its anchor at the first), and cSGHMC, whose exploration stage switches
the noise off; plain SGHMC and SGHMC-CV under XLA are the stored chains of
tests/chain_fingerprints.py. Broken variants checked: the loop without the random calls' offset (every kick
draws the first kick's noise) and without the minibatches' offset (every kick reads the second
minibatch) — each fails every case.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc.api.reuse import clear_compiled_cache
from sgmcmc.step.dynamics import sghmc
from sgmcmc.step.dynamics.sgld import switch_noise

RNG = np.random.default_rng(4)
X = RNG.normal(size=(300, 3))
DATA = {"X": X, "y": X @ np.array([0.5, -1.0, 2.0]) + RNG.normal(size=300)}
START = {"b": np.zeros(3)}


def log_lik(params, data):
    return -0.5 * tf.reduce_sum((data["y"] - tf.linalg.matvec(data["X"], params["b"])) ** 2)


def log_prior(params):
    return -0.005 * tf.reduce_sum(params["b"] ** 2)


def written_out(self, params, aux, estimate, rng, eps, noise_on=None):
    """SGHMC's iteration with the L kicks written out in Python (the kernel before the loop)."""
    params = dict(params)
    refresh = switch_noise(rng.normal(params), noise_on)
    nu = {k: tf.sqrt(tf.cast(eps[k], params[k].dtype)) * refresh[k] for k in params}
    first = None
    for step in range(self.L):
        est = estimate(params)
        first = est if first is None else first
        noise = switch_noise(rng.normal(params), noise_on)
        fraction = 0.5 if step == 0 else 1.0
        for k in params:
            nu[k] = sghmc.sghmc_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], fraction)
            params[k] = params[k] + nu[k]
    return params, aux, first


CASES = {
    #  name: (method, arguments, XLA); one compilation mode each (both are covered, the loop's
    #  risk is XLA's; SVRG's in-graph full-data pass reads numpy rows through a py_function, so
    #  it runs in graph mode either way)
    "sghmc-saga-xla": ("sghmc", {"estimator": "saga"}, True),
    "sghmccv-graph": ("sghmccv", {"n_iters_opt": 50}, False),
    "sghmc-svrg-graph": ("sghmc", {"estimator": "svrg", "svrg_period": 7}, False),
    "csghmc-xla": ("csghmc", {"n_cycles": 2, "exploration": 0.5}, True),
}


def chain(method: str, extra: dict) -> dict:
    clear_compiled_cache()
    out = getattr(sgmcmc, method)(
        log_lik, DATA, START, 1e-4, log_prior=log_prior, minibatch_size=20, n_iters=40, n_chains=2, L=4,
        seed=7, verbose=False, check_stepsize=False, store_gradients=True, **extra,
    )
    return {"b": out["b"], "log_post": out.log_posterior, "grads": out.gradients["b"]}


@pytest.mark.parametrize("case", list(CASES))
def test_the_kicks_loop_is_the_written_out_kicks(case, monkeypatch):
    method, extra, xla = CASES[case]
    monkeypatch.setenv("SGMCMC_XLA", "1" if xla else "0")
    looped = chain(method, extra)
    monkeypatch.setattr(sghmc.SGHMC, "update_at", written_out)
    reference = chain(method, extra)
    for name in looped:
        np.testing.assert_array_equal(looped[name], reference[name], err_msg=name)
    kept = looped["b"][0, :, 0]
    assert kept.size >= 20 and np.unique(kept).size == kept.size  # the chain moves
