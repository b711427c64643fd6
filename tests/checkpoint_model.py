"""The small model of tests/test_checkpoints.py, importable by the child process it kills."""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

import sgmcmc

X = np.random.default_rng(0).normal(0.3, 1.0, size=2000).astype(np.float32)
RUN = dict(minibatch_size=100, n_iters=20_000, verbose=False, seed=3, n_chains=2, burn_in=100, thin=2, store_gradients=True)


def log_lik(params, dataset):
    return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["m"]))


def run(checkpoint_dir=None, checkpoint_every=10_000):
    return sgmcmc.sgnht(log_lik, {"x": X}, {"m": 0.0}, 1e-5, checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, **RUN)


if __name__ == "__main__":  # the child: run with checkpoints until killed
    run(sys.argv[1], int(sys.argv[2]))
