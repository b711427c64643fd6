"""A sampler's estimators, made from the user's estimator spec before the sampler (issue 30.2:
the sampler receives finished estimators; it builds none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from ..posterior import Posterior
from .control_variate import ControlVariate, ControlVariateGradient
from .plain import MinibatchGradient
from .spec import EstimatorSpec


@dataclass(frozen=True)
class Estimators:
    """What a sampler calls.

    Attributes
    ----------
    chain
        ``estimator(params, minibatch, rng, t)`` of the K chains' iterations.
    plain
        The plain K-chain minibatch estimator of ``log_lik`` + ``log_prior`` that ``chain`` wraps
        (``chain`` itself for ``estimator="plain"``); None for a model of its own (the count
        models of scir/sgrld).
    one_chain
        The plain estimator for one chain: the control variate's mode search and its full-data
        passes (``plain`` itself for one chain); None without a control variate.
    """

    chain: Any
    plain: MinibatchGradient | None
    one_chain: MinibatchGradient | None = None


def assemble_estimators(
    spec: EstimatorSpec,
    posterior: Posterior,
    batch_size: int,
    n_chains: int,
    dtype: tf.DType,
    shapes: dict[str, tuple],
    mode_start: dict[str, np.ndarray],
    *,
    replace: bool = False,
    own_estimator: Callable | None = None,
) -> Estimators:
    """The estimators ``spec`` asks for (their variables are made here).

    ``posterior``: the model (made once by the caller, :mod:`sgmcmc.api.build`; with rows
    sharded, its ``reduce`` all-reduces every evaluation), which every estimator made here
    holds; ``shapes``: one chain's parameter shapes; ``mode_start``: where the control
    variate's mode search starts; ``own_estimator(dataset, batch_size, n_chains)``: a model's
    own estimator in place of the plain one (the count models)."""
    if own_estimator is not None:
        if isinstance(spec, ControlVariate):
            raise ValueError("a sampler with its own estimator has no control-variate mode search")
        return Estimators(own_estimator(posterior.dataset, batch_size, n_chains), None)

    plain = MinibatchGradient.on(posterior, batch_size, n_chains, replace)
    if isinstance(spec, ControlVariate):  # the one-chain estimator of the mode search: the same model
        one_chain = plain if n_chains == 1 else MinibatchGradient.on(posterior, batch_size, 1, replace)
        return Estimators(ControlVariateGradient(plain, mode_start), plain, one_chain)
    wrap = spec.wrap()
    if wrap is None:
        return Estimators(plain, plain)
    like = {name: tf.zeros([n_chains, *shape], dtype) for name, shape in shapes.items()}
    return Estimators(wrap(plain, like), plain)
