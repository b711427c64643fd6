"""In-graph minibatch sampling: n distinct row indices out of N in O(n) expected work.

Two exact samplers of a uniformly random n-subset, chosen at trace time:

* rejection: draw n indices with replacement and redraw all of them while any repeats.
  Conditional on being distinct, an i.i.d. uniform tuple is uniform over distinct tuples,
  so the set is a uniform n-subset. A draw is accepted with probability
  ``prod_{i<n} (1 - i/N) ≈ exp(-n(n-1)/2N)`` (0.81 for n = 500, N = 581,012).
* permutation: the images of ``0, …, n-1`` under a pseudorandom permutation of ``[0, N)``
  (``tf.random.experimental.index_shuffle``), for when repeats would be common.

Rejection is used while ``n(n-1)/2N ≤ 1`` (acceptance ≥ e⁻¹ ≈ 0.37). On the CPU it costs the
same as ``index_shuffle`` for n = 500 (benchmarks/RESULTS.md), but its ops (integer draws,
sort) have GPU and XLA kernels, while ``index_shuffle`` has a CPU kernel only.
"""

from __future__ import annotations

import tensorflow as tf

#: Largest expected number of colliding pairs n(n-1)/2N for which rejection is used.
MAX_EXPECTED_COLLISIONS = 1.0


def _rows_with_repeats(indices: tf.Tensor) -> tf.Tensor:
    ordered = tf.sort(indices, axis=-1)
    return tf.reduce_any(tf.equal(ordered[:, 1:], ordered[:, :-1]), axis=-1)


def sample_indices(generator: tf.random.Generator, n_rows: int, batch_size: int, n_chains: int = 1) -> tf.Tensor:
    """Draw ``[n_chains, batch_size]`` int64 indices; each row holds ``batch_size`` distinct
    indices drawn uniformly from ``[0, n_rows)``, independently of the other rows. A minibatch of
    every row is every row, in order: no random number is drawn (the log-likelihood is a sum)."""
    if batch_size == n_rows:
        return tf.tile(tf.range(n_rows, dtype=tf.int64)[None], [n_chains, 1])
    if batch_size * (batch_size - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS:
        # int64 draws keep the modulo bias of the integer sampler below N / 2^64.
        def draw():
            return generator.uniform([n_chains, batch_size], 0, n_rows, dtype=tf.int64)

        def redraw_repeated_rows(indices):
            # Each row is its own rejection sampler: only rows with a repeat are replaced.
            return tf.where(_rows_with_repeats(indices)[:, None], draw(), indices)

        return tf.while_loop(
            lambda indices: tf.reduce_any(_rows_with_repeats(indices)), redraw_repeated_rows, [draw()]
        )[0]
    seeds = generator.uniform_full_int([n_chains, 2], dtype=tf.int64)
    positions = tf.range(batch_size, dtype=tf.int64)
    max_index = tf.constant(n_rows - 1, tf.int64)
    return tf.stack(
        [tf.random.experimental.index_shuffle(positions, seeds[k], max_index) for k in range(n_chains)]
    )


def gather_rows(dataset: dict[str, tf.Tensor], indices: tf.Tensor) -> dict[str, tf.Tensor]:
    """The rows ``indices`` (first axis) of every entry of ``dataset``; ``indices`` of shape
    ``[K, n]`` give entries of shape ``[K, n, ...]``."""
    return {name: tf.gather(values, indices) for name, values in dataset.items()}
