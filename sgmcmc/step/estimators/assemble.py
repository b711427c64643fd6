"""A sampler's estimators, made from the user's estimator spec before the sampler (issue 30.2:
the sampler receives finished estimators; it builds none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from ...data.rows import Rows
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
    log_lik: Callable,
    log_prior: Callable | None,
    dataset: dict,
    rows: Rows,
    batch_size: int,
    n_chains: int,
    dtype: tf.DType,
    shapes: dict[str, tuple],
    mode_start: dict[str, np.ndarray],
    *,
    replace: bool = False,
    reduce: Callable | None = None,
    own_estimator: Callable | None = None,
) -> Estimators:
    """The estimators ``spec`` asks for (their variables are made here).

    ``dataset``: the checked entries as the model reads them (``rows.as_read()``); ``rows``:
    the same as :class:`~sgmcmc.data.rows.Rows` (made once by the caller); ``shapes``:
    one chain's parameter shapes; ``mode_start``: where the control variate's mode search starts;
    ``reduce``: the all-reduce of every evaluation when the rows are sharded across workers;
    ``own_estimator(dataset, batch_size, n_chains)``: a model's own estimator in place of the
    plain one (the count models)."""
    if own_estimator is not None:
        if isinstance(spec, ControlVariate):
            raise ValueError("a sampler with its own estimator has no control-variate mode search")
        return Estimators(own_estimator(dataset, batch_size, n_chains), None)

    plain = MinibatchGradient(log_lik, log_prior, dataset, batch_size, n_chains, replace, reduce, rows=rows)
    if isinstance(spec, ControlVariate):  # the one-chain estimator of the mode search: the same model
        one_chain = plain if n_chains == 1 else MinibatchGradient.on(plain.posterior, batch_size, 1, replace)
        return Estimators(ControlVariateGradient(plain, mode_start), plain, one_chain)
    wrap = spec.wrap()
    if wrap is None:
        return Estimators(plain, plain)
    like = {name: tf.zeros([n_chains, *shape], dtype) for name, shape in shapes.items()}
    return Estimators(wrap(plain, like), plain)
