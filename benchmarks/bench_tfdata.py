"""Issue 46.3 measured: a ``tf.data`` pipeline of minibatches read by the host feed (what
``sgld(dataset=<tf.data.Dataset>, n_rows=N)`` does) against an iterator consumed inside the
compiled loop, and against the array dataset.

Covertype-shaped logistic regression (benchmarks/logreg_model.py), N = 100,000, n = 500, one
chain; µs per iteration of 2,000 iterations after a warm-up call:
  sgld arrays        the library, dataset = dict of arrays (host gather, XLA loop)
  sgld tf.data       the library, dataset = from_tensor_slices(...).shuffle(10_000).batch(500, True)
  sgld tf.data (pre) the library, a pipeline of ready batches (from_tensor_slices of [N/n, n, …]):
                     the feed's own cost, without the per-row work of shuffle and batch
  loop in-graph      a bare SGLD loop calling the iterator's get_next() inside tf.while_loop
                     (graph mode: XLA cannot compile an iterator), on the shuffled pipeline
  loop in-graph (pre) the same on the pipeline of ready batches
  loop block (XLA)   the same bare loop reading a block of ready batches, under XLA

Usage: python benchmarks/bench_tfdata.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402

tf.get_logger().setLevel("ERROR")  # each repeat traces its bare loop afresh
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402

N_ROWS, BATCH, ITERS, STEPSIZE = 100_000, 500, 2_000, 1e-5


def library(dataset, n_rows=None) -> float:
    sampler = sgmcmc.sgld_setup(log_lik, dataset, start(), STEPSIZE, log_prior, minibatch_size=BATCH, seed=1,
                                n_rows=n_rows, check_stepsize=False)
    sgmcmc.sample_chain(sampler, ITERS, False)  # compiles, fills the pipeline
    begin = time.perf_counter()
    sgmcmc.sample_chain(sampler, ITERS, False)
    return (time.perf_counter() - begin) / ITERS * 1e6


def bare_loop(read, jit: bool):
    """SGLD on the logistic regression, ``read(source, i)`` giving iteration i's minibatch."""
    @tf.function(jit_compile=jit, autograph=False)
    def run(params, source):
        def body(i, params):
            batch = read(source, i)
            with tf.GradientTape() as tape:
                tape.watch(params)
                value = log_prior(params) + N_ROWS / BATCH * log_lik(params, batch)
            grads = tape.gradient(value, params)
            noise = {k: tf.random.stateless_normal(tf.shape(v), [i, 7]) for k, v in params.items()}
            return i + 1, {k: v + STEPSIZE / 2 * grads[k] + np.sqrt(STEPSIZE) * noise[k] for k, v in params.items()}

        return tf.while_loop(lambda i, _: i < ITERS, body, (tf.constant(0), params))[1]

    return run


def timed(run, params, source) -> float:
    run(params, source)
    begin = time.perf_counter()
    run(params, source)
    return (time.perf_counter() - begin) / ITERS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    data = make_data(N_ROWS)
    data = {k: v.astype(np.float32) for k, v in data.items()}
    shuffled = tf.data.Dataset.from_tensor_slices(data).shuffle(10_000, seed=1).batch(BATCH, drop_remainder=True)
    ready = tf.data.Dataset.from_tensor_slices({k: v.reshape(-1, BATCH, *v.shape[1:]) for k, v in data.items()})
    params = {k: tf.constant(v) for k, v in start().items()}
    block = {k: tf.constant(v.reshape(-1, BATCH, *v.shape[1:])) for k, v in data.items()}  # read cyclically
    cases = {
        "sgld arrays": lambda: library(data),
        "sgld tf.data": lambda: library(shuffled, N_ROWS),
        "sgld tf.data (pre)": lambda: library(ready, N_ROWS),
        "loop in-graph": lambda: timed(bare_loop(lambda it, i: it.get_next(), False), params, iter(shuffled.repeat())),
        "loop in-graph (pre)": lambda: timed(bare_loop(lambda it, i: it.get_next(), False), params, iter(ready.repeat())),
        "loop block (XLA)": lambda: timed(
            bare_loop(lambda b, i: {k: tf.gather(v, i % (N_ROWS // BATCH)) for k, v in b.items()}, True), params, block
        ),
    }
    for name, case in cases.items():
        values = [case() for _ in range(repeats)]
        print(f"{name:20s} {statistics.median(values):8.1f} µs/it  (runs: {', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
