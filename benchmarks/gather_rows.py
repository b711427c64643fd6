"""The gather of K·n random rows alone (issue 8/11): why K chains cost more than one.

HISTORICAL: measures the in-graph minibatch path that SPEC §11's host pipeline replaced (commit
6e55075); it imports names that are gone, so run it on the tree before that commit.

A compiled loop of draws of ``[K, 500]`` random rows of a 581,012 × 54 float32 array (2-D
indices, flattened 1-D indices, int32 indices) against the draw of the indices alone; µs per
iteration, medians of 5.

    python benchmarks/gather_rows.py
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N_ROWS, BATCH = 581_012, 500


def loop_of(draw):
    @tf.function
    def loop(n):
        total = tf.constant(0.0)
        for _ in tf.range(n):
            total += draw()
        return total

    return loop


def main() -> None:
    x = tf.constant(np.random.default_rng(0).random((N_ROWS, 54), dtype=np.float32))
    generator = tf.random.Generator.from_seed(1)

    def rows(k, dtype=tf.int64):
        return generator.uniform([k, BATCH], 0, N_ROWS, dtype)

    variants = {}
    for k in (1, 4, 16):
        variants[f"K={k} 2-D indices"] = loop_of(lambda k=k: tf.reduce_sum(tf.gather(x, rows(k))[:, 0, 0]))
        variants[f"K={k} 1-D indices"] = loop_of(
            lambda k=k: tf.reduce_sum(tf.gather(x, tf.reshape(rows(k), [-1]))[:k, 0]))
        variants[f"K={k} int32 1-D"] = loop_of(
            lambda k=k: tf.reduce_sum(tf.gather(x, tf.reshape(rows(k, tf.int32), [-1]))[:k, 0]))
        variants[f"K={k} no gather"] = loop_of(lambda k=k: tf.cast(tf.reduce_sum(rows(k)[:, 0]), tf.float32))
    for loop in variants.values():
        loop(tf.constant(10))
    times = {name: [] for name in variants}
    for _ in range(5):
        for name, loop in variants.items():
            t = time.perf_counter()
            loop(tf.constant(1000)).numpy()
            times[name].append((time.perf_counter() - t) * 1e3)
    print(f"load {os.getloadavg()[0]:.2f}")
    for name, ts in times.items():
        print(f"{name:<20} {statistics.median(ts):7.1f} µs/it")


if __name__ == "__main__":
    main()
