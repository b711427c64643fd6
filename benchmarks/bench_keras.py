"""Per-iteration cost of a Keras network's ``log_lik`` (``sgmcmc.keras.from_model``) against a
hand-written ``log_lik`` of the same network (issue 32.4: target ≤ 1.2×).

The network: an MLP 784-100-10 (ReLU; the issue's trial network), categorical likelihood, N(0, 1)
prior, on MNIST-shaped data (N = 10,000 random images, integer labels), SGLD with minibatches of
500 rows, float32, the library's default compilation mode. ``--sizes 64,100,10 --minibatch 100``:
the digits vignette's network, where a fixed per-call overhead would weigh more. Both ``log_lik`` read the same
dataset dict and the same starting values; the prior is the same hand-written function for both
(the Keras adapter's own prior is timed as a third row).

Marginal µs/iteration = (time of a 3·10^3-iteration ``sgld(...)`` − time of a 10^3 one) / 2·10^3,
each a whole call after a warm-up call, medians over ``--repeats`` in one process, the variants
alternated within each repeat so load drifts hit them alike.

Usage: python benchmarks/bench_keras.py [--repeats 5] [--iters 1000] [--chains 1] [--sizes 784,100,10] [--minibatch 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sgmcmc  # noqa: E402  (first: quiet TensorFlow start-up)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def network(n_in: int, hidden: int, n_out: int) -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((n_in,)), keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(n_out)])


def hand_written(names: list[str]):
    """The same network written by hand over the same parameter names."""
    kernel1, bias1, kernel2, bias2 = names

    def log_lik(params, dataset):
        hidden = tf.nn.relu(tf.matmul(dataset["x"], params[kernel1]) + params[bias1])
        logits = tf.matmul(hidden, params[kernel2]) + params[bias2]
        log_probs = tf.nn.log_softmax(logits)
        return tf.reduce_sum(tf.gather(log_probs, dataset["y"], axis=1, batch_dims=1))

    def log_prior(params):
        return tf.add_n([tf.reduce_sum(-0.5 * tf.square(params[k])) for k in names])

    return log_lik, log_prior


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iters", type=int, default=1_000)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--sizes", default="784,100,10", help="inputs, hidden units, classes")
    parser.add_argument("--minibatch", type=int, default=500)
    args = parser.parse_args(argv)
    n_in, hidden, n_out = (int(v) for v in args.sizes.split(","))

    rng = np.random.default_rng(1)
    data = {"x": rng.random((10_000, n_in), dtype=np.float32), "y": rng.integers(0, n_out, 10_000)}
    bnn = sgmcmc.keras.from_model(network(n_in, hidden, n_out), "categorical", prior_scale=1.0)
    hand_lik, hand_prior = hand_written(bnn.names)
    params = bnn.params
    # the two log_lik agree (same network, same parameters)
    a, b = float(bnn.log_lik(params, data)), float(hand_lik(params, data))
    assert abs(a - b) < 1e-4 * abs(b), (a, b)
    variants = {
        "hand-written log_lik": (hand_lik, hand_prior),
        "keras log_lik": (bnn.log_lik, hand_prior),
        "keras log_lik + log_prior": (bnn.log_lik, bnn.log_prior),
    }

    def run(variant: str, n_iters: int) -> float:
        log_lik, log_prior = variants[variant]
        start = time.perf_counter()
        sgmcmc.sgld(log_lik, data, params, 1e-5, log_prior, args.minibatch, n_iters, verbose=False, seed=1, n_chains=args.chains)
        return time.perf_counter() - start

    times = {v: {"short": [], "long": []} for v in variants}
    for variant in variants:  # warm-up: tracing, compilation
        run(variant, args.iters)
    for _ in range(args.repeats):
        for variant in variants:
            times[variant]["short"].append(run(variant, args.iters))
            times[variant]["long"].append(run(variant, 3 * args.iters))
    marginal = {
        v: (statistics.median(t["long"]) - statistics.median(t["short"])) / (2 * args.iters) * 1e6 for v, t in times.items()
    }
    base = marginal["hand-written log_lik"]
    print(f"MLP {args.sizes}, minibatch {args.minibatch}, {args.chains} chain(s), {args.repeats} repeats; "
          f"load average at the end: {os.getloadavg()[0]:.2f}")
    for variant, us in marginal.items():
        print(f"{variant:>28}: {us:7.1f} µs/it   ratio {us / base:.3f}")
    return {"marginal_us": marginal, "ratio": marginal["keras log_lik"] / base}


if __name__ == "__main__":
    main()
