"""The random draws of the chains inside one iteration: counter-based, per chain.

Noise, auxiliary draws and seeds for TensorFlow's stateless ops come from stateless Philox
calls keyed by the seed and stream, whose counter holds the chain, the global iteration t and
the call's position j within the iteration (:meth:`ChainRandom.begin` starts an iteration). A
chain's draws are therefore a function of (seed, stream, chain, t) alone: the same whatever the
chunking, whichever API runs the step, and however many chains run beside it. (One draw per
chain: under XLA a stateless draw of shape [K, S] is not a prefix of one of shape [K', S], so
chains sharing one draw would depend on K.)

Random numbers only: the minibatches do not pass through here. :mod:`sgmcmc.data.minibatch` draws
their indices ahead, on the host, the sampler gathers their rows (:mod:`sgmcmc.data.rows`) and
hands one iteration's block to the estimator as an argument
(:class:`~sgmcmc.step.contract.Minibatches`).
"""

from __future__ import annotations

import tensorflow as tf

from ..data.minibatch import philox_key

_PHILOX = 1  # TensorFlow's algorithm id
#: Calls one iteration may make (the counter's j): far above any kernel's.
MAX_CALLS_PER_ITERATION = 1 << 16
_CHAIN_SHIFT = 40  # chain k's counters start at k·2^40 blocks: no overlap below 2^40 blocks a call
#: Most chains whose draws are written out one by one in the program (above: a loop over chains).
UNROLLED_CHAINS = 16


class ChainRandom:
    """Random numbers for ``n_chains`` chains stepped together.

    Parameters
    ----------
    seed
        The user's seed (an int).
    stream
        Which of the sampler's streams (:mod:`sgmcmc.data.minibatch`: the chains', storage, mode search).
    dtype
        The model's floating dtype.
    chains
        The indices of the chains this object draws for (default ``0 … n_chains − 1``).
    """

    def __init__(self, seed: int, stream: int, dtype: tf.DType, n_chains: int, chains=None):
        self.dtype = dtype
        self.chains = list(range(n_chains)) if chains is None else [int(c) for c in chains]
        self.stream = int(stream)
        # A variable, not a constant: a compiled program reads the key when it runs, so a new seed
        # (reseed: a restore, or a reused sampler, api/reuse.py) needs no new trace.
        self._key = tf.Variable(self._key_of(seed), trainable=False, name="philox_key")
        self._t = None
        self._calls = 0
        #: Added to the call's position inside a loop over repeated inner steps: a tensor there
        #: (:meth:`sgmcmc.step.contract.BoundEstimator.repeat`), else None.
        self._offset = None

    def _key_of(self, seed: int) -> tf.Tensor:
        return tf.constant([philox_key(seed, self.stream, 0) >> 64], tf.uint64)  # the half that depends on the stream

    def reseed(self, seed: int) -> None:
        """Draw the streams of ``seed`` from now on (the compiled programs read the key when they run)."""
        self._key.assign(self._key_of(seed))

    @property
    def calls(self) -> int:
        """Calls made in this iteration so far (the counter's j, before any loop offset)."""
        return self._calls

    def seek(self, calls: int, offset: tf.Tensor | None = None) -> None:
        """Make the next call the iteration's ``calls``-th, plus ``offset`` (a uint64 tensor
        inside a loop over repeated inner steps, :meth:`sgmcmc.step.contract.BoundEstimator.repeat`;
        None outside one)."""
        self._calls, self._offset = int(calls), offset

    def begin(self, t: tf.Tensor) -> None:
        """Start iteration ``t`` (traced)."""
        self._t = tf.cast(t, tf.uint64)
        self._calls = 0
        self._offset = None

    def _counters(self) -> tf.Tensor:
        """``[K, 2]`` uint64: this call's Philox counter for each chain (chain k in the high
        bits of the first word; t and the call's position j in the second), then the next call."""
        if self._t is None:
            raise RuntimeError("ChainRandom.begin(t) must start the iteration before any draw")
        high = self._t * MAX_CALLS_PER_ITERATION + self._calls
        if self._offset is not None:
            high = high + self._offset
        self._calls += 1
        low = tf.constant([chain << _CHAIN_SHIFT for chain in self.chains], tf.uint64)
        return tf.stack([low, tf.fill([len(self.chains)], high)], axis=1)

    def _per_chain(self, draw, dtype: tf.DType) -> tf.Tensor:
        """``[K, …]``: ``draw(counter)`` for each chain's counter, stacked. Up to
        :data:`UNROLLED_CHAINS` chains the draws are written out one by one; beyond, one draw
        inside a loop over the chains (the same bits: one Philox call per chain either way). The
        loop keeps the program's size independent of K: written out, 3,000 chains took 166 s to
        trace and 86 s to compile (tests/test_simplex_samplers.py, 10 SCIR steps)."""
        counters = self._counters()
        if len(self.chains) <= UNROLLED_CHAINS:
            return tf.stack([draw(counters[k]) for k in range(len(self.chains))])
        return tf.map_fn(draw, counters, fn_output_signature=dtype)

    def normal(self, like: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Standard normal noise shaped like each ``[K, …]`` tensor of ``like`` (one draw per chain)."""
        sizes = [int(v.shape[1:].num_elements()) for v in like.values()]
        flat = self._per_chain(
            lambda c: tf.raw_ops.StatelessRandomNormalV2(shape=[sum(sizes)], key=self._key.read_value(), counter=c, alg=_PHILOX, dtype=self.dtype),
            self.dtype,
        )
        parts = tf.split(flat, sizes, axis=1)
        return {k: tf.reshape(x, v.shape) for (k, v), x in zip(like.items(), parts)}

    def uniform(self, shape: list[int], minval: float, maxval: float) -> tf.Tensor:
        """``[K, *shape]`` uniform on ``[minval, maxval)`` in the model dtype."""
        u = self._per_chain(
            lambda c: tf.raw_ops.StatelessRandomUniformV2(shape=shape, key=self._key.read_value(), counter=c, alg=_PHILOX, dtype=self.dtype),
            self.dtype,
        )
        return minval + (maxval - minval) * u

    def seed(self) -> tf.Tensor:
        """A ``[2]`` int64 seed for TensorFlow's stateless random ops (gamma, Poisson, …) drawing
        for all chains at once (SCIR's draws: its chains depend on the chain count): the first
        chain's :meth:`chain_seeds` row."""
        return self._seed_draw(self._counters()[0])

    def chain_seeds(self) -> tf.Tensor:
        """``[K, 2]`` int64 seeds for stateless random ops, chain k's own."""
        return self._per_chain(self._seed_draw, tf.int64)

    def _seed_draw(self, counter: tf.Tensor) -> tf.Tensor:
        return tf.raw_ops.StatelessRandomUniformFullIntV2(shape=[2], key=self._key.read_value(), counter=counter, alg=_PHILOX, dtype=tf.int64)
