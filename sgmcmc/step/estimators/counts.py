r"""The minibatch estimate of the gamma shapes for the simplex samplers (SPEC §9, thesis §5.3):

.. math:: \hat a = \alpha + \frac{N}{n}\sum_{i\in S} z_i,

S a fresh uniform n-subset per chain and per call, :math:`\sum_{i\in S} z_i` the category counts
the user's ``counts(params, minibatch, seed)`` returns (for latent-variable models such as LDA,
after its own random local step, drawn with stateless TF ops on ``seed``).

It keeps the estimator signature ``estimator(params, minibatch, rng, t)`` of :mod:`sgmcmc.step.estimators`, so
the sampler loop runs it like any other. What it returns, :class:`CountsEstimate`, has the
``log_post`` and ``grads`` fields the loop reads, plus ``a_hat``, which is what the SCIR/SGRLD
kernels (:mod:`sgmcmc.step.dynamics.cir`) read. These samplers use no gradient: ``grads`` is empty.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

from ..contract import Minibatch, Params, map_over_chains

Counts = Callable[[Params, dict[str, tf.Tensor], tf.Tensor], dict[str, tf.Tensor]]


class CountsEstimate(NamedTuple):
    """What the counts estimator returns for K chains.

    ``log_post`` ``[K]``: the Dirichlet log density of the current ω under â (see
    :func:`dirichlet_log_density`), for progress and divergence checks; ``grads``: ``{}`` (no
    gradient is used or stored); ``a_hat``: name → â, ``[K, *shape]``, strictly positive."""

    log_post: tf.Tensor
    grads: Params
    a_hat: Params


def dirichlet_log_density(omega: tf.Tensor, a_hat: tf.Tensor) -> tf.Tensor:
    r"""Per chain, :math:`\sum\left[\sum_j (\hat a_j - 1)\log\omega_j + \log\Gamma(\sum_j\hat a_j)
    - \sum_j\log\Gamma(\hat a_j)\right]`, the log density of every simplex (last axis) of ω under
    Dir(â), summed over the stacked simplices: the minibatch estimate of the log posterior of a
    Dirichlet–categorical model (exact when the minibatch is all the data). ω is clamped below at
    the dtype's smallest normal number, so a component that rounded to 0 (float32, tiny α) gives a
    finite value and is not taken for a divergence."""
    log_omega = tf.math.log(tf.maximum(omega, np.finfo(omega.dtype.as_numpy_dtype).tiny))
    per_simplex = (
        tf.reduce_sum((a_hat - 1.0) * log_omega, axis=-1)
        + tf.math.lgamma(tf.reduce_sum(a_hat, axis=-1))
        - tf.reduce_sum(tf.math.lgamma(a_hat), axis=-1)
    )
    return tf.reduce_sum(tf.reshape(per_simplex, [tf.shape(omega)[0], -1]), axis=1)


class MinibatchCounts:
    """The counts estimator for ``n_chains`` chains, each with its own minibatch and seed.

    Parameters
    ----------
    counts
        The user's ``counts(params, minibatch, seed)`` for ONE chain: ``params`` name → ω,
        ``minibatch`` name → the minibatch's rows, ``seed`` a shape-[2] int64 tensor for stateless
        random ops; returns name → the minibatch's category counts, shaped like the parameter.
    alpha
        name → the Dirichlet prior's concentrations, broadcastable to the parameter's shape.
    dataset
        name → entry (:mod:`sgmcmc.data.rows`), observations on the first axis, all of length ``n_rows``;
        the minibatches come from the sampler's blocks, handed in as an argument.
    batch_size, n_chains
        Rows per minibatch (n) and chains (K).
    replace
        Draw the rows i.i.d. with replacement (``minibatch_replace=True``).
    """

    def __init__(self, counts: Counts, alpha: dict[str, np.ndarray], dataset: dict[str, tf.Tensor], batch_size: int, n_chains: int = 1, replace: bool = False):
        self.replace = bool(replace)
        self.counts = counts
        self.alpha = alpha
        self.dataset = dataset
        self.n_rows = int(next(iter(dataset.values())).shape[0])
        self.batch_size = batch_size
        self.n_chains = n_chains
        self.scale = self.n_rows / batch_size

    def __call__(self, params: Params, minibatch: Minibatch, rng, t=None) -> CountsEstimate:
        batch = minibatch.rows
        seeds = rng.chain_seeds()  # [K, 2]: chain k's own

        def one_chain(args):
            p, b, s = args
            out = self.counts(p, b, s)
            return {name: tf.cast(out[name], p[name].dtype) for name in p}

        counts = map_over_chains(one_chain, (params, batch, seeds), self.n_chains)
        a_hat = {}
        for name, omega in params.items():
            alpha = tf.constant(self.alpha[name], omega.dtype)
            a_hat[name] = alpha + tf.constant(self.scale, omega.dtype) * counts[name]
        log_post = tf.add_n([dirichlet_log_density(params[name], a_hat[name]) for name in params])
        return CountsEstimate(log_post, {}, a_hat)
