"""Host-side gathers of a chunk's minibatch rows: the variants measured for sgmcmc.data.rows.

N = 581,012 × 55 float32 (covertype's shape), n = 500 random rows per iteration, 256 iterations
a chunk; prints µs per iteration (500 rows), medians of 5 repeats, all in one process:

  take_axis0      np.take(X, idx, axis=0, out=buf)
  fancy           X[idx]
  void_fancy      one 220-byte item per row: X.view(void)[idx]   (adopted: sgmcmc.data.rows)
  void_take_out   np.take(void view, idx, out=void buf)
  sorted_take     np.take of the sorted indices (a disk-friendly order; the floor with locality)
  contiguous      np.take of 0..n·T−1 (no cache misses: the copy itself)
  tf_gather       tf.gather on a DLPack-shared tensor (the pre-§11 in-graph path, eager)
  draw_indices    MinibatchIndices.draw (first distinct, one chain): the index draw itself

Usage: python benchmarks/gather_host.py [--rows 581012]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def timed(fn, repeats: int = 5, inner: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=581_012)
    p.add_argument("--iters", type=int, default=256)
    args = p.parse_args(argv)
    n, d, its = 500, 55, args.iters
    x = np.random.default_rng(0).random((args.rows, d), dtype=np.float32)
    idx = np.random.default_rng(1).integers(0, args.rows, size=its * n)
    out = np.empty((its * n, d), np.float32)
    items = x.view(np.dtype((np.void, 4 * d)))[:, 0]
    out_items = np.empty(its * n, items.dtype)
    ordered = np.sort(idx)
    contiguous = np.arange(its * n)
    import tensorflow as tf

    from sgmcmc.checks import as_tensor
    from sgmcmc.data.minibatch import CHAIN_STREAM, MinibatchIndices

    tensor, tidx = as_tensor(x), tf.constant(idx)
    sampler = MinibatchIndices(args.rows, n)
    variants = {
        "take_axis0": lambda: np.take(x, idx, axis=0, out=out),
        "fancy": lambda: x[idx],
        "void_fancy": lambda: items[idx],
        "void_take_out": lambda: np.take(items, idx, out=out_items),
        "sorted_take": lambda: np.take(x, ordered, axis=0, out=out),
        "contiguous": lambda: np.take(x, contiguous, axis=0, out=out),
        "tf_gather": lambda: tf.gather(tensor, tidx),
        "draw_indices": lambda: sampler.draw(1, CHAIN_STREAM, [0], 0, its),
    }
    print(f"N = {args.rows}, n = {n}, d = {d}, {its} iterations per call; µs per iteration")
    for name, fn in variants.items():
        fn()
        print(f"{name:>14}: {timed(fn) / its * 1e6:7.1f}")


if __name__ == "__main__":
    main()
