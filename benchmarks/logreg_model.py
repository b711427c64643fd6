"""The benchmark model: Bayesian logistic regression, Laplace(0, 1) prior, covertype-shaped."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def make_data(n_rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Covertype-shaped synthetic data: ``X`` (n_rows, 54) in [0, 1], ``y`` in {0, 1}."""
    from sgmcmc.datasets import synthetic_covertype

    data = synthetic_covertype(n_rows=n_rows, seed=seed)
    return {"X": data[:, 1:], "y": data[:, 0]}


def log_lik(params, dataset):
    z = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    return tf.reduce_sum(dataset["y"] * z - tf.math.softplus(z))


def log_prior(params):
    return -tf.reduce_sum(tf.abs(params["beta"])) - tf.abs(params["bias"])


def start(d: int = 54) -> dict[str, np.ndarray]:
    return {"bias": np.float32(0.0), "beta": np.zeros(d, np.float32)}
