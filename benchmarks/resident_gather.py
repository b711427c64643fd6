"""Issue 45.3 measured: gathering minibatch rows inside the compiled program from the dataset held
as a tensor ("resident rows"), against reading them from a block the host gathered ahead.

One process, the covertype shape (581,012 × 55 float32, n = 500, 294 iterations per call as
the pipeline sizes a block), µs per iteration of a compiled while loop that reads each
iteration's rows and sums them:
  gather            ``tf.gather(data, indices[i])`` under XLA (what resident rows would run)
  dynamic-slice     the same rows as 500 dynamic slices in an inner loop, under XLA
  graph gather      ``tf.gather`` in graph mode (TensorFlow's memcpy-per-row kernel)
  ready block       ``tf.gather(block, i)`` of a block the host filled (what the pipeline runs)
  host gather       the pipeline's numpy gather of one block on the host (``Rows.take``)

Usage: python benchmarks/resident_gather.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sgmcmc.data.rows import Rows, aligned_empty, as_tensor  # noqa: E402

N_ROWS, WIDTH, BATCH, ITERS = 581_012, 55, 500, 294


def loop(read, jit: bool):
    @tf.function(jit_compile=jit, autograph=False)
    def run(source, indices):
        def body(i, total):
            return i + 1, total + tf.reduce_sum(read(source, indices, i))

        return tf.while_loop(lambda i, total: i < ITERS, body, (0, 0.0))[1]

    return run


def rows_by_slices(data, indices, i):
    own = tf.gather(indices, i)

    def body(j, out):
        row = tf.slice(data, tf.stack([tf.gather(own, j), 0]), [1, WIDTH])
        return j + 1, out.write(j, tf.reshape(row, [WIDTH]))

    out = tf.TensorArray(tf.float32, BATCH, element_shape=[WIDTH])
    return tf.while_loop(lambda j, out: j < BATCH, body, (0, out))[1].stack()


def per_iteration(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / ITERS * 1e6


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    rng = np.random.default_rng(1)
    data = aligned_empty((N_ROWS, WIDTH), np.float32)
    data[:] = rng.random((N_ROWS, WIDTH), dtype=np.float32)
    resident = as_tensor(data)
    index_array = rng.integers(0, N_ROWS, (ITERS, BATCH))
    indices = tf.constant(index_array)
    rows = Rows({"x": data}, np.float32)
    block = tf.constant(rows.take(index_array)["x"])
    gather = loop(lambda d, idx, i: tf.gather(d, tf.gather(idx, i)), jit=True)
    graph_gather = loop(lambda d, idx, i: tf.gather(d, tf.gather(idx, i)), jit=False)
    slices = loop(rows_by_slices, jit=True)
    ready = loop(lambda b, idx, i: tf.gather(b, i), jit=True)
    results = {
        "gather (XLA, resident)": per_iteration(lambda: gather(resident, indices), args.repeats),
        "dynamic-slice (XLA, resident)": per_iteration(lambda: slices(resident, indices), args.repeats),
        "graph gather (resident)": per_iteration(lambda: graph_gather(resident, indices), args.repeats),
        "ready block (XLA)": per_iteration(lambda: ready(block, indices), args.repeats),
        "host gather (Rows.take)": per_iteration(lambda: rows.take(index_array), args.repeats),
    }
    for name, us in results.items():
        print(f"{name:32s} {us:7.1f} µs/it")


if __name__ == "__main__":
    main()
