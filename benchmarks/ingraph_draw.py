"""Issue 45.3 measured: minibatch indices drawn inside the compiled program, against the host's.

Session 2 measured only the gather (resident_gather.py: XLA's gather of 500 random rows from
the 128 MB covertype tensor 166 µs against 53 for reading a block the host filled). This adds
the index draw and the model, at both sizes of the SGMCMCJax comparison: one process,
covertype-shaped SGLD on logistic regression (54 features, n = 500, float32), XLA, a compiled
``while`` loop of ``--iters`` iterations per call, µs per iteration (median of --repeats):

  block        the rows read from a block the host gathered ahead (what the package runs; the
               host's work is timed apart as ``host draw + gather``)
  replace      indices drawn in the program, i.i.d. (stateless uniform), one gather
  distinct     indices drawn in the program without replacement, approximately as the package
               would: i.i.d. draws sorted, each duplicate redrawn once (a second draw and sort)
  host draw + gather   the package's numpy draw (MinibatchIndices.draw) and gather (Rows.take)
               of one block, per iteration: the feed thread's CPU

Usage: python benchmarks/ingraph_draw.py [--n-rows 10000,581012] [--iters 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402,F401  (the package's XLA flags)
from logreg_model import make_data  # noqa: E402
from sgmcmc.data.minibatch import MinibatchIndices  # noqa: E402
from sgmcmc.data.rows import Rows  # noqa: E402

BATCH, STEPSIZE = 500, 1e-6


def sgld_update(beta, x, y, noise, n_rows: int):
    """One SGLD step on the minibatch (x, y): β + ε/2 ∇(log prior + N/n log lik) + √ε ξ."""
    with tf.GradientTape() as tape:
        tape.watch(beta)
        z = tf.linalg.matvec(x, beta)
        log_post = -tf.reduce_sum(tf.abs(beta)) + n_rows / BATCH * tf.reduce_sum(y * z - tf.math.softplus(z))
    return beta + STEPSIZE / 2 * tape.gradient(log_post, beta) + tf.sqrt(STEPSIZE) * noise


def loops(x_all: tf.Tensor, y_all: tf.Tensor, iters: int):
    n_rows = int(x_all.shape[0])
    d = int(x_all.shape[1])

    def noise(t):
        return tf.random.stateless_normal([d], seed=tf.stack([tf.constant(7, tf.int64), t]))

    @tf.function(jit_compile=True)
    def from_block(beta, xb, yb):
        def body(t, beta):
            return t + 1, sgld_update(beta, tf.gather(xb, t), tf.gather(yb, t), noise(t), n_rows)

        return tf.while_loop(lambda t, b: t < iters, body, (tf.constant(0, tf.int64), beta))[1]

    def draw(t, salt):
        return tf.random.stateless_uniform([BATCH], seed=tf.stack([t, tf.constant(salt, tf.int64)]),
                                           minval=0, maxval=n_rows, dtype=tf.int64)

    @tf.function(jit_compile=True)
    def replace(beta):
        def body(t, beta):
            idx = draw(t, 11)
            return t + 1, sgld_update(beta, tf.gather(x_all, idx), tf.gather(y_all, idx), noise(t), n_rows)

        return tf.while_loop(lambda t, b: t < iters, body, (tf.constant(0, tf.int64), beta))[1]

    @tf.function(jit_compile=True)
    def distinct(beta):
        def body(t, beta):
            idx = tf.sort(draw(t, 11))
            dup = tf.concat([[False], idx[1:] == idx[:-1]], 0)
            idx = tf.sort(tf.where(dup, draw(t, 13), idx))  # one redraw of the duplicates
            return t + 1, sgld_update(beta, tf.gather(x_all, idx), tf.gather(y_all, idx), noise(t), n_rows)

        return tf.while_loop(lambda t, b: t < iters, body, (tf.constant(0, tf.int64), beta))[1]

    return from_block, replace, distinct


def timed(fn, repeats: int, iters: int) -> float:
    fn()  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-rows", default="10000,581012")
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    for n_rows in [int(v) for v in args.n_rows.split(",")]:
        data = make_data(n_rows)
        x_all, y_all = tf.constant(data["X"], tf.float32), tf.constant(data["y"], tf.float32)
        rows = Rows({"X": data["X"], "y": data["y"]}, np.float32)
        indices = MinibatchIndices(n_rows, BATCH)
        drawn = indices.draw(1, 0, [0], 0, args.iters)  # [T, D, K, n]
        block = rows.take(drawn)
        xb = tf.constant(block["X"][:, 0, 0])
        yb = tf.constant(block["y"][:, 0, 0])
        beta = tf.zeros([x_all.shape[1]], tf.float32)
        from_block, replace, distinct = loops(x_all, y_all, args.iters)
        results = {
            "block": timed(lambda: from_block(beta, xb, yb).numpy(), args.repeats, args.iters),
            "replace": timed(lambda: replace(beta).numpy(), args.repeats, args.iters),
            "distinct": timed(lambda: distinct(beta).numpy(), args.repeats, args.iters),
            "host draw + gather": timed(lambda: rows.take(indices.draw(1, 0, [0], 0, args.iters)), args.repeats, args.iters),
        }
        print(f"N={n_rows}: " + ", ".join(f"{k} {v:.1f} µs/it" for k, v in results.items()), flush=True)


if __name__ == "__main__":
    main()
