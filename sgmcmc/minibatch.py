"""In-graph minibatch sampling: n distinct row indices out of N in O(n) work and memory."""

from __future__ import annotations

import tensorflow as tf


def sample_indices(generator: tf.random.Generator, n_rows: int, batch_size: int) -> tf.Tensor:
    """Draw ``batch_size`` distinct indices uniformly from ``[0, n_rows)``.

    The indices are the images of ``0, …, batch_size-1`` under a pseudorandom permutation of
    ``[0, n_rows)`` keyed by a fresh seed from ``generator``
    (``tf.random.experimental.index_shuffle``), so the cost is O(batch_size), never O(N),
    and sampling is without replacement.
    """
    seed = generator.uniform_full_int([2], dtype=tf.int64)
    return tf.random.experimental.index_shuffle(
        tf.range(batch_size, dtype=tf.int64), seed, tf.constant(n_rows - 1, tf.int64)
    )


def gather_rows(dataset: dict[str, tf.Tensor], indices: tf.Tensor) -> dict[str, tf.Tensor]:
    """The rows ``indices`` (first axis) of every entry of ``dataset``."""
    return {name: tf.gather(values, indices) for name, values in dataset.items()}
