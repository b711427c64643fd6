"""``estimator=`` takes a name or a spec object (issue 19): the same chain either way, and
clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc import SAGA, SVRG, ControlVariate


def _model():
    x = np.random.default_rng(0).normal(1.0, 1.0, size=200)

    def log_lik(params, data):
        return -0.5 * tf.reduce_sum(tf.square(data["x"] - params["mu"]))

    return log_lik, {"x": x}, {"mu": 0.5}


@pytest.mark.parametrize(
    "by_name, by_spec",
    [
        (dict(estimator="svrg", svrg_period=7), dict(estimator=SVRG(period=7))),
        (dict(estimator="saga", max_memory=10**8), dict(estimator=SAGA(max_memory=10**8))),
        (dict(estimator="cv", opt_stepsize=1e-3, n_iters_opt=50), dict(estimator=ControlVariate(1e-3, 50))),
    ],
)
def test_a_spec_gives_the_chain_of_the_name_and_keywords(by_name, by_spec):
    """Bit for bit, and the same settings (a broken variant that dropped the spec's period —
    SVRG(period=7) run with the default 100 — differs from iteration 8 on)."""
    log_lik, data, params = _model()
    common = dict(minibatch_size=20, n_iters=40, verbose=False, seed=4)
    a = sgmcmc.sgld(log_lik, data, params, 1e-3, **common, **by_name)
    b = sgmcmc.sgld(log_lik, data, params, 1e-3, **common, **by_spec)
    np.testing.assert_array_equal(a["mu"], b["mu"])
    assert a.settings == b.settings


def test_a_spec_with_the_keywords_is_refused():
    log_lik, data, params = _model()
    with pytest.raises(ValueError, match="carries its own options; leave svrg_period at the default"):
        sgmcmc.sgld_setup(log_lik, data, params, 1e-3, estimator=SVRG(period=7), svrg_period=9)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: SVRG(period=0), ValueError, "svrg_period must be a positive whole number"),
        (lambda: SAGA(max_memory=-1), ValueError, "max_memory must be positive"),
        (lambda: ControlVariate(n_iters_opt=-1), ValueError, "n_iters_opt must be a whole number >= 0"),
    ],
)
def test_a_bad_spec_is_refused_when_made(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_an_unknown_estimator_names_the_choices():
    log_lik, data, params = _model()
    with pytest.raises(ValueError, match=r"estimator must be one of 'plain', 'cv', 'svrg', 'saga', got 'sarah' \(or a spec"):
        sgmcmc.sgld_setup(log_lik, data, params, 1e-3, estimator="sarah")
