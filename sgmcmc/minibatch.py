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


def _has_repeats(indices: tf.Tensor) -> tf.Tensor:
    ordered = tf.sort(indices)
    return tf.reduce_any(tf.equal(ordered[1:], ordered[:-1]))


def sample_indices(generator: tf.random.Generator, n_rows: int, batch_size: int) -> tf.Tensor:
    """Draw ``batch_size`` distinct indices uniformly from ``[0, n_rows)`` (int64)."""
    if batch_size * (batch_size - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS:
        # int64 draws keep the modulo bias of the integer sampler below N / 2^64.
        def draw():
            return generator.uniform([batch_size], 0, n_rows, dtype=tf.int64)

        return tf.while_loop(_has_repeats, lambda _: draw(), [draw()])[0]
    seed = generator.uniform_full_int([2], dtype=tf.int64)
    return tf.random.experimental.index_shuffle(
        tf.range(batch_size, dtype=tf.int64), seed, tf.constant(n_rows - 1, tf.int64)
    )


def gather_rows(dataset: dict[str, tf.Tensor], indices: tf.Tensor) -> dict[str, tf.Tensor]:
    """The rows ``indices`` (first axis) of every entry of ``dataset``."""
    return {name: tf.gather(values, indices) for name, values in dataset.items()}
