"""Variants of the rejection sampler's repeat check (issue 11, item 1): does a row of ``[K, n]``
int64 indices hold a repeat? Timed in one process, the variants alternating, as a compiled loop
of 10^4 checks on fresh draws (N = 581,012, n = 500): medians of ``--repeats`` rounds.

* sort: ``tf.sort`` along the row and compare neighbours (the package's check; TopKV2 on CPU);
* unique: ``tf.unique`` of the flattened, chain-offset indices (a hash table, O(Kn)) and a
  per-row any over ``counts[idx] > 1``.

    python benchmarks/repeat_check_variants.py [--chains 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

N_ROWS, BATCH, ITERS = 581_012, 500, 10_000


def repeats_by_sort(indices: tf.Tensor) -> tf.Tensor:
    ordered = tf.sort(indices, axis=-1)
    return tf.reduce_any(tf.equal(ordered[:, 1:], ordered[:, :-1]), axis=-1)


def repeats_by_unique(indices: tf.Tensor) -> tf.Tensor:
    k = tf.shape(indices, out_type=tf.int64)[0]
    flat = tf.reshape(indices + N_ROWS * tf.range(k)[:, None], [-1])
    _, idx, counts = tf.unique_with_counts(flat)
    return tf.reduce_any(tf.reshape(tf.gather(counts, idx) > 1, tf.shape(indices)), axis=-1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    generator = tf.random.Generator.from_seed(1)

    def loop(check):
        @tf.function
        def run():
            hits = tf.constant(0, tf.int64)
            for _ in tf.range(ITERS):
                draw = generator.uniform([args.chains, BATCH], 0, N_ROWS, dtype=tf.int64)
                hits += tf.reduce_sum(tf.cast(check(draw), tf.int64))
            return hits
        return run

    variants = {"none (draw only)": loop(lambda d: tf.zeros([args.chains], tf.bool)),
                "sort": loop(repeats_by_sort), "unique": loop(repeats_by_unique)}
    # both checks must agree on which draws repeat
    probe = generator.uniform([64, BATCH], 0, 2_000, dtype=tf.int64)
    assert bool(tf.reduce_all(repeats_by_sort(probe) == repeats_by_unique(probe)))
    times = {name: [] for name in variants}
    rate = {}
    for name, run in variants.items():
        run()  # compile
    for _ in range(args.repeats):
        for name, run in variants.items():
            t = time.perf_counter()
            hits = int(run())
            times[name].append((time.perf_counter() - t) / ITERS * 1e6)
            rate[name] = hits / (ITERS * args.chains)
    print(f"K = {args.chains}, N = {N_ROWS}, n = {BATCH}: µs per draw + check (median of {args.repeats}; range)")
    for name, ts in times.items():
        print(f"  {name:<18} {statistics.median(ts):8.1f}  [{min(ts):.1f}, {max(ts):.1f}]   repeat rate {rate[name]:.3f}")


if __name__ == "__main__":
    main()
