r"""Exact full-data gradients of the log posterior at every sample (SPEC §7).

.. math::
    \nabla\log\pi(\theta) = \nabla\log p(\theta) + \sum_{i=1}^N \nabla\log p(x_i | \theta),

summed over batches of at most :data:`sgmcmc.step.posterior.FULL_GRADIENT_BATCH_ROWS` rows and
vectorised over blocks of samples, so memory stays bounded at any N and any number of samples.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from ..graph_options import own_function
from .. import checks
from ..step.posterior import FULL_GRADIENT_BATCH_ROWS, value_and_grad
from ..data.rows import Rows
from ..analysis.samples import as_samples
from ..distribute.placement import row_collective

#: Samples per vectorised call.
SAMPLE_BLOCK = 64


def full_gradients(
    log_lik: Callable,
    dataset: Mapping[str, Any],
    samples: Mapping[str, Any],
    log_prior: Callable | None = None,
    *,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> dict[str, np.ndarray]:
    r"""The exact gradient of the log posterior at every sample, laid out like the samples.

    For an exact-score :func:`sgmcmc.ksd`, :func:`sgmcmc.stein_thin` or :func:`sgmcmc.zv`
    (e.g. on a thinned sample: the cost is N gradient evaluations per sample).

    Parameters
    ----------
    log_lik, log_prior
        The sampler's functions: ``log_lik(params, dataset)`` returns the SUM over the rows it
        is given; ``log_prior(params)`` or None (flat).
    dataset
        Name -> array with observations on the first axis. Floating entries are cast to the
        samples' dtype, integer entries kept.
    samples
        A :class:`~sgmcmc.Samples` or a dict of arrays (one chain). When
        ``samples.settings["constraints"]`` maps names to TFP bijectors, the gradient is taken
        with respect to the unconstrained values (``samples.unconstrained``) and includes the
        log-det-Jacobian, as the samplers do; ``log_lik`` and ``log_prior`` see constrained
        values.
    strategy, shard_rows
        As for the samplers (SPEC §12): under a ``MultiWorkerMirroredStrategy`` with rows
        sharded (``shard_rows`` True or unset), every worker calls this with its own rows and
        the same samples (checked); each sums the likelihood over its rows, one all-reduce per
        block of samples adds up the workers', and every worker returns the full-data gradient.
        Otherwise this process's rows are all the rows.

    Returns
    -------
    dict
        Name -> gradient, same shape and dtype (float32 or float64) as the samples.

    Notes
    -----
    Rows are summed in batches of at most ``FULL_GRADIENT_BATCH_ROWS``; per batch one compiled
    call evaluates the gradients of a block of :data:`SAMPLE_BLOCK` samples with
    ``tf.vectorized_map`` (``fallback_to_while_loop=True``, so any ``log_lik`` works). Measured
    on logistic regression (256 samples, N = 25,000, d = 55, 2 cores): 1.9 s vectorised
    against 11.2 s for a loop over samples of a compiled per-sample gradient.
    """
    s = as_samples(samples)
    values = s.pooled("unconstrained")
    names = list(s)
    dtype = tf.as_dtype(next(iter(values.values())).dtype)
    if not dtype.is_floating:
        dtype = tf.float64
    constraints = dict(s.settings.get("constraints") or {})
    rows = Rows(checks.check_dataset(dataset), dtype.as_numpy_dtype)  # read where they are
    collective = row_collective(strategy, shard_rows, "full_gradients", dict(samples=values, log_prior=log_prior is not None))
    block_rows = min(FULL_GRADIENT_BATCH_ROWS, rows.block_rows())

    def constrain(u: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {n: constraints[n].forward(v) if n in constraints else v for n, v in u.items()}

    def prior_term(u: dict[str, tf.Tensor]) -> tf.Tensor:
        value = tf.constant(0.0, dtype)
        if log_prior is not None:
            value += tf.cast(log_prior(constrain(u)), dtype)
        for n, b in constraints.items():
            value += tf.reduce_sum(b.forward_log_det_jacobian(u[n], event_ndims=u[n].shape.rank))
        return value

    @own_function(reduce_retracing=True)
    def lik_grads(block, batch):
        return tf.vectorized_map(
            lambda u: value_and_grad(lambda p: log_lik(constrain(p), batch), u)[1],
            block,
            fallback_to_while_loop=True,
        )

    @own_function(reduce_retracing=True)
    def prior_grads(block):
        return tf.vectorized_map(lambda u: value_and_grad(prior_term, u)[1], block, fallback_to_while_loop=True)

    has_prior = log_prior is not None or bool(constraints)
    m = len(next(iter(values.values())))
    out = {n: np.empty(values[n].shape, dtype.as_numpy_dtype) for n in names}
    for start in range(0, m, SAMPLE_BLOCK):
        block = {n: tf.constant(values[n][start : start + SAMPLE_BLOCK], dtype) for n in names}
        total = {n: tf.zeros_like(v) for n, v in block.items()}
        for _, batch in rows.blocks(block_rows):  # streamed: memory bounded whatever N
            total = {n: total[n] + g for n, g in lik_grads(block, batch).items()}
        if collective is not None:  # every worker's rows
            total = dict(zip(names, collective.all_reduce_sum([total[n] for n in names])))
        if has_prior:
            total = {n: total[n] + g for n, g in prior_grads(block).items()}
        for n in names:
            out[n][start : start + SAMPLE_BLOCK] = total[n].numpy()
    if s.n_chains > 1:
        out = {n: g.reshape(s[n].shape[:2] + g.shape[1:]) for n, g in out.items()}
    return out
