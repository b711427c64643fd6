"""The random draws of a chain, from one stateful ``tf.random.Generator``.

Kernels and estimators draw through :class:`ChainRandom` so that one iteration makes few random
ops (one normal draw for every parameter and chain) and the whole-chain and step-by-step APIs,
which trace the same step, consume the generator in the same order (same seed, same chain).
"""

from __future__ import annotations

import tensorflow as tf

from .minibatch import sample_indices

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """SplitMix64's finaliser: a bijective 64-bit mix, so nearby seeds give unrelated keys."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def seed_state(seed: int) -> list[int]:
    """The Philox state ``[counter_lo, counter_hi, key]`` (as int64) for a user's seed.

    ``tf.random.Generator.from_seed`` puts a small seed into Philox's *counter*, so seeds 1 and 2
    give the same stream shifted by one block (with several chains, chain 0 of seed 2 repeated
    chain 2 of seed 1). Here the seed picks the *key*, through a bijective mix, and the counter
    starts at 0: different seeds give unrelated streams.
    """
    key = _splitmix64(int(seed) & _MASK64)
    signed = key - (1 << 64) if key >= (1 << 63) else key
    return [0, 0, signed]


def generator_from_seed(seed: int) -> tf.random.Generator:
    return tf.random.Generator.from_state(seed_state(seed), alg="philox")


def reset_generator(generator: tf.random.Generator, seed: int) -> None:
    generator.reset(tf.constant(seed_state(seed), tf.int64))


class ChainRandom:
    """Random numbers for ``n_chains`` chains stepped together.

    Parameters
    ----------
    generator
        The stateful generator all draws come from.
    dtype
        The model's floating dtype.
    xla
        Draw minibatches with the samplers that have XLA kernels (:mod:`sgmcmc.minibatch`); read
        when a function is traced, so the sampler sets it with its compilation mode.
    """

    def __init__(self, generator: tf.random.Generator, dtype: tf.DType, xla: bool = False):
        self.generator = generator
        self.dtype = dtype
        self.xla = xla

    def normal(self, like: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Standard normal noise shaped like each tensor of ``like`` (one generator call)."""
        sizes = [int(v.shape.num_elements()) for v in like.values()]
        flat = tf.split(self.generator.normal([sum(sizes)], dtype=self.dtype), sizes)
        return {k: tf.reshape(x, v.shape) for (k, v), x in zip(like.items(), flat)}

    def seed(self) -> tf.Tensor:
        """A shape-[2] int64 seed for TensorFlow's stateless random ops (gamma, Poisson, …)."""
        return self.generator.uniform_full_int([2], dtype=tf.int64)

    def minibatch_indices(self, n_chains: int, n_rows: int, batch_size: int, replace: bool = False) -> tf.Tensor:
        """``[n_chains, batch_size]`` row indices, each row a uniform subset of ``[0, n_rows)``
        (``replace=True``: i.i.d. uniform rows, repeats allowed)."""
        return sample_indices(self.generator, n_rows, batch_size, n_chains, replace, self.xla)
