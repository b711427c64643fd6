"""The minibatch samplers alone (issue 11): µs per draw of n = 500 distinct rows, in a compiled
loop of draws, one process, medians of ``--repeats``.

* ``first-distinct`` — graph mode's sampler (``tf.unique`` of M i.i.d. draws);
* ``rejection`` / ``feistel`` — XLA mode's samplers (whichever ``sample_indices(xla=True)``
  picks at that N: rejection while n(n−1)/2N ≤ 1, else the Feistel permutation), run here in
  graph mode, as the package ran them before;
* ``replace`` — i.i.d. rows (``minibatch_replace=True``).

    python benchmarks/minibatch_samplers.py [--rows 10000,581012] [--chains 1] [--draws 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from sgmcmc.minibatch import MAX_EXPECTED_COLLISIONS, sample_indices  # noqa: E402


def timed_loop(draw):
    @tf.function
    def loop(n):
        total = tf.constant(0, tf.int64)
        for _ in tf.range(n):
            total += tf.reduce_sum(draw())
        return total

    return loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,581012")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, k = args.batch, args.chains
    print(f"n = {n}, K = {k}, {args.draws} draws a call, medians of {args.repeats}, load {os.getloadavg()[0]:.2f}")
    for n_rows in map(int, args.rows.split(",")):
        generator = tf.random.Generator.from_seed(1)
        xla_name = "rejection" if n * (n - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS else "feistel"
        variants = {
            "first-distinct": timed_loop(lambda: sample_indices(generator, n_rows, n, k)),
            xla_name: timed_loop(lambda: sample_indices(generator, n_rows, n, k, xla=True)),
            "replace": timed_loop(lambda: sample_indices(generator, n_rows, n, k, replace=True)),
        }
        times = {name: [] for name in variants}
        for loop in variants.values():
            loop(tf.constant(10))
        for _ in range(args.repeats):
            for name, loop in variants.items():
                t = time.perf_counter()
                loop(tf.constant(args.draws)).numpy()
                times[name].append((time.perf_counter() - t) / args.draws * 1e6)
        for name, ts in times.items():
            print(f"N = {n_rows:>8}  {name:<15} {statistics.median(ts):8.1f} µs/draw")


if __name__ == "__main__":
    main()
