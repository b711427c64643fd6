"""Evaluating a one-chain function for K chains at once: vectorised, with a fallback."""

from __future__ import annotations

import warnings
from typing import Callable

import tensorflow as tf


def map_over_chains(fn: Callable, args, n_chains: int):
    """``fn`` applied to each slice of ``args`` along the leading chain axis, results stacked.

    One chain calls ``fn`` directly (no vectorisation overhead). Several chains use
    ``tf.vectorized_map`` (ops without a vectorised form run in a while loop inside it); if the
    user's code cannot be vectorised at all, ``tf.map_fn`` runs the chains one after another in
    the graph, with a warning. Both give each chain's own result.
    """
    if n_chains == 1:
        one = fn(tf.nest.map_structure(lambda x: x[0], args))
        return tf.nest.map_structure(lambda x: x[None], one)
    try:
        return tf.vectorized_map(fn, args, fallback_to_while_loop=True, warn=False)
    except Exception as error:  # the user's ops may not vectorise in any form
        warnings.warn(
            f"the model could not be vectorised over chains ({type(error).__name__}: {error}); the "
            f"{n_chains} chains are stepped one after another inside the compiled loop",
            RuntimeWarning,
            stacklevel=2,
        )
        probe = fn(tf.nest.map_structure(lambda x: x[0], args))
        signature = tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, x.dtype), probe)
        return tf.map_fn(fn, args, fn_output_signature=signature)
