"""In-graph minibatch sampling: n distinct row indices out of N in O(n) expected work.

Graph mode uses one exact sampler of a uniformly random n-subset for n ≤ N/2:

* first distinct: draw M i.i.d. uniform indices and keep the first n distinct ones in draw
  order (``tf.unique`` keeps first occurrences in order). That is sequential sampling with
  every repeat rejected, so the ordered n values are uniform over ordered n-tuples of distinct
  indices. M is the mean plus 4 standard deviations (+1) of the number of draws that collect n
  distinct values (a sum of geometric variables); in the rare event that M draws hold fewer,
  all are drawn again, which keeps the result exact (success is a relabelling-invariant event).
  About 10 kernels whatever N and n: the earlier Feistel network dispatched ~230 per draw at
  N = 10^4 (benchmarks/RESULTS.md).
* top keys, for n > N/2: the indices of the n largest of N i.i.d. float64 keys (a tie has
  probability ~N²/2^54): O(N log n) = O(n log n) work.

``tf.unique`` has no XLA kernel (its output size is data-dependent), so XLA-compiled chains
(:attr:`sgmcmc.sampler.Sampler.jit_compile`) use two other exact samplers, chosen at trace time:

* rejection: draw n indices with replacement and redraw all of them while any repeats.
  Conditional on being distinct, an i.i.d. uniform tuple is uniform over distinct tuples,
  so the set is a uniform n-subset. A draw is accepted with probability
  ``prod_{i<n} (1 - i/N) ≈ exp(-n(n-1)/2N)`` (0.81 for n = 500, N = 581,012).
* permutation: the images of ``0, …, n-1`` under a keyed pseudorandom permutation of
  ``[0, N)``, fresh keys per draw, for when repeats would be common: an 8-round Feistel network
  on the smallest even number of bits covering N, with cycle walking (an image ≥ N is
  permuted again until it falls in range: fewer than 4 passes on average). Like
  ``tf.random.experimental.index_shuffle``, which it replaces, it is a pseudorandom — not a
  perfectly uniform — permutation family; the subsets pass the uniformity tests of
  tests/test_minibatch.py. Unlike ``index_shuffle`` (a CPU kernel only) its ops are integer
  arithmetic with GPU and XLA kernels.

Rejection is used while ``n(n-1)/2N ≤ 1`` (acceptance ≥ e⁻¹ ≈ 0.37). The two modes therefore
draw different minibatches from one seed: the same seed gives the same chain within one mode.

With ``replace=True`` (``minibatch_replace=True``, SPEC §8) the n indices are i.i.d. uniform on
``[0, N)``: one generator call, no loop. The estimate (N/n) Σ_{j≤n} f(x_{i_j}) stays unbiased
(each term has mean Σᵢ f(xᵢ)/N); repeats are expected n(n−1)/2N times per minibatch.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

#: Largest expected number of colliding pairs n(n-1)/2N for which rejection is used.
MAX_EXPECTED_COLLISIONS = 1.0


def _rows_with_repeats(indices: tf.Tensor) -> tf.Tensor:
    ordered = tf.sort(indices, axis=-1)
    return tf.reduce_any(tf.equal(ordered[:, 1:], ordered[:, :-1]), axis=-1)


def draws_for_distinct(n_rows: int, batch_size: int) -> int:
    """M: the mean + 4 sd (+1) of the number of i.i.d. uniform draws from ``[0, n_rows)`` that
    collect ``batch_size`` distinct values (draw i+1 is new with probability (N − i)/N)."""
    i = np.arange(batch_size, dtype=np.float64)
    p = (n_rows - i) / n_rows
    mean, var = np.sum(1 / p), np.sum((1 - p) / p**2)
    return int(math.ceil(mean + 4 * math.sqrt(var))) + 1


def _first_distinct(generator, n_rows: int, batch_size: int, n_chains: int) -> tf.Tensor:
    m = draws_for_distinct(n_rows, batch_size)
    offsets = tf.range(n_chains, dtype=tf.int64)[:, None] * n_rows  # chain k's values in [kN, (k+1)N)

    def draw():
        values = generator.uniform([n_chains, m], 0, n_rows, dtype=tf.int64) + offsets
        distinct = tf.unique(tf.reshape(values, [-1])).y  # chain by chain, first occurrences in order
        counts = tf.math.bincount(tf.cast(distinct // n_rows, tf.int32), minlength=n_chains, maxlength=n_chains)
        return [distinct, tf.reshape(counts, [n_chains])]

    distinct, counts = tf.while_loop(
        lambda distinct, counts: tf.reduce_any(counts < batch_size),
        lambda distinct, counts: draw(),
        draw(),
        shape_invariants=[tf.TensorShape([None]), tf.TensorShape([n_chains])],
    )
    starts = tf.cumsum(tf.cast(counts, tf.int64), exclusive=True)
    positions = starts[:, None] + tf.range(batch_size, dtype=tf.int64)[None]
    return tf.gather(distinct, positions) - offsets


def _top_keys(generator, n_rows: int, batch_size: int, n_chains: int) -> tf.Tensor:
    keys = generator.uniform([n_chains, n_rows], dtype=tf.float64)
    return tf.cast(tf.math.top_k(keys, batch_size, sorted=False).indices, tf.int64)


def sample_indices(
    generator: tf.random.Generator, n_rows: int, batch_size: int, n_chains: int = 1, replace: bool = False, xla: bool = False
) -> tf.Tensor:
    """Draw ``[n_chains, batch_size]`` int64 indices; each row holds ``batch_size`` distinct
    indices drawn uniformly from ``[0, n_rows)``, independently of the other rows. A minibatch of
    every row is every row, in order: no random number is drawn (the log-likelihood is a sum).
    ``replace=True``: i.i.d. uniform indices (repeats allowed), one generator call. ``xla``:
    the samplers with XLA kernels (module docstring)."""
    if replace:
        return generator.uniform([n_chains, batch_size], 0, n_rows, dtype=tf.int64)
    if batch_size == n_rows:
        return tf.tile(tf.range(n_rows, dtype=tf.int64)[None], [n_chains, 1])
    if not xla:
        if 2 * batch_size > n_rows:
            return _top_keys(generator, n_rows, batch_size, n_chains)
        return _first_distinct(generator, n_rows, batch_size, n_chains)
    if batch_size * (batch_size - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS:
        # int64 draws keep the modulo bias of the integer sampler below N / 2^64.
        def draw():
            return generator.uniform([n_chains, batch_size], 0, n_rows, dtype=tf.int64)

        def redraw_repeated_rows(indices):
            # Each row is its own rejection sampler: only rows with a repeat are replaced. (A list,
            # like the loop variables: eager while_loop does not repack a single tensor.)
            return [tf.where(_rows_with_repeats(indices)[:, None], draw(), indices)]

        return tf.while_loop(
            lambda indices: tf.reduce_any(_rows_with_repeats(indices)), redraw_repeated_rows, [draw()]
        )[0]
    keys = generator.uniform([n_chains, FEISTEL_ROUNDS, 1], 0, _PRIME, dtype=tf.int64)
    positions = tf.tile(tf.range(batch_size, dtype=tf.int64)[None], [n_chains, 1])
    return _feistel_permutation(positions, keys, n_rows)


#: Rounds of the Feistel network (4 make a strong pseudorandom permutation for large domains;
#: more keep tiny domains, where each half has 1–2 bits, close to uniform).
FEISTEL_ROUNDS = 8
_PRIME = 2_147_483_647  # 2^31 - 1: products of two values below it stay below 2^62


def _round_function(half: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """A keyed hash of a half-block (values < 2^31): two multiply-mod-prime steps with a shift."""
    h = (half * 48_271 + key) % _PRIME
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 13))
    return (h * 16_807 + key) % _PRIME


def _feistel_permutation(x: tf.Tensor, keys: tf.Tensor, n_rows: int) -> tf.Tensor:
    """Apply, per row of ``x`` ([K, n] in ``[0, n_rows)``), the permutation of ``[0, n_rows)``
    keyed by that row's ``keys`` ([K, rounds, 1]): a balanced Feistel network on ``2·h`` bits
    (``4^h ≥ n_rows``) with cycle walking back into range."""
    h = max(1, (max(1, int(n_rows - 1).bit_length()) + 1) // 2)
    shift = tf.constant(h, tf.int64)
    mask = tf.constant((1 << h) - 1, tf.int64)
    bits = tf.bitwise

    def encrypt(v):
        left, right = bits.right_shift(v, shift), bits.bitwise_and(v, mask)
        for r in range(FEISTEL_ROUNDS):
            mixed = bits.bitwise_and(_round_function(right, keys[:, r]), mask)
            left, right = right, bits.bitwise_xor(left, mixed)
        return bits.bitwise_or(bits.left_shift(left, shift), right)

    def walk(v):
        return [tf.where(v >= n_rows, encrypt(v), v)]

    return tf.while_loop(lambda v: tf.reduce_any(v >= n_rows), walk, [encrypt(x)])[0]


def gather_rows(dataset: dict[str, tf.Tensor], indices: tf.Tensor) -> dict[str, tf.Tensor]:
    """The rows ``indices`` (first axis) of every entry of ``dataset``; ``indices`` of shape
    ``[K, n]`` give entries of shape ``[K, n, ...]``."""
    return {name: tf.gather(values, indices) for name, values in dataset.items()}
