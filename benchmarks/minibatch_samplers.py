"""The minibatch samplers alone (issue 11): µs per draw of n = 500 distinct rows, in a compiled

HISTORICAL: measures the in-graph minibatch path that SPEC §11's host pipeline replaced (commit
6e55075); it imports names that are gone, so run it on the tree before that commit.
loop of draws, one process, medians of ``--repeats``.

* ``first-distinct`` — graph mode's sampler (``tf.unique`` of M i.i.d. draws);
* ``rejection`` / ``feistel`` — XLA mode's samplers (whichever ``sample_indices(xla=True)``
  picks at that N: rejection while n(n−1)/2N ≤ 1, else the Feistel permutation), run here in
  graph mode, as the package ran them before;
* ``replace`` — i.i.d. rows (``minibatch_replace=True``);
* ``scatter-table`` — a measured variant, not in the package: the first n distinct of M draws
  found with a persistent ``[K·N]`` int32 table (scatter-min of each draw's position, gather,
  reset): O(M) work and no sort or ``tf.unique``, but K·N·4 bytes of memory.

``--xla`` compiles the loops with XLA (``tf.unique`` has none, so first-distinct is skipped).

    python benchmarks/minibatch_samplers.py [--rows 10000,581012] [--chains 1] [--draws 2000] [--xla]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from sgmcmc.data.minibatch import MAX_EXPECTED_COLLISIONS, draws_for_distinct, sample_indices  # noqa: E402


def scatter_table_sampler(generator, n_rows: int, batch: int, chains: int):
    big = tf.int32.max
    table = tf.Variable(tf.fill([chains * n_rows], tf.constant(big, tf.int32)))
    m = draws_for_distinct(n_rows, batch)
    offsets = tf.range(chains, dtype=tf.int64)[:, None] * n_rows

    def draw():  # the redraw on a shortfall (probability < 1e-4) is left out of this timing
        flat = tf.reshape(generator.uniform([chains, m], 0, n_rows, dtype=tf.int64) + offsets, [-1])
        position = tf.range(chains * m, dtype=tf.int32)
        table.scatter_min(tf.IndexedSlices(position, flat))
        first = tf.reshape(tf.gather(table, flat) == position, [chains, m])
        table.scatter_update(tf.IndexedSlices(tf.fill([chains * m], big), flat))
        rank = tf.cumsum(tf.cast(first, tf.int32), axis=1, exclusive=True)
        slot = tf.where(first & (rank < batch), tf.range(chains, dtype=tf.int32)[:, None] * batch + rank, chains * batch)
        out = tf.tensor_scatter_nd_update(tf.zeros([chains * batch + 1], tf.int64), tf.reshape(slot, [-1, 1]), flat)
        return tf.reshape(out[:-1], [chains, batch]) - offsets

    return draw


def timed_loop(draw, xla: bool = False):
    @tf.function(jit_compile=xla or None)
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
    parser.add_argument("--xla", action="store_true")
    args = parser.parse_args()
    n, k = args.batch, args.chains
    print(f"{'XLA' if args.xla else 'graph'}: n = {n}, K = {k}, {args.draws} draws a call, medians of {args.repeats}, load {os.getloadavg()[0]:.2f}")
    for n_rows in map(int, args.rows.split(",")):
        generator = tf.random.Generator.from_seed(1)
        xla_name = "rejection" if n * (n - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS else "feistel"
        variants = {
            "first-distinct": timed_loop(lambda: sample_indices(generator, n_rows, n, k)),
            xla_name: timed_loop(lambda: sample_indices(generator, n_rows, n, k, xla=True), args.xla),
            "replace": timed_loop(lambda: sample_indices(generator, n_rows, n, k, replace=True), args.xla),
            "scatter-table": timed_loop(scatter_table_sampler(generator, n_rows, n, k), args.xla),
        }
        if args.xla:
            del variants["first-distinct"]
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
