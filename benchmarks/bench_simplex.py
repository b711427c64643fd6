"""Per-iteration cost of SCIR and SGRLD on LDA-sized parameters (thesis §5.5.1).

Topics: K = 50 × V = 8,000 words (one (K, V) stack of simplices), minibatch of 50 documents of
100 words from a corpus of 5,000 random documents, float32, one chain. Two ``counts`` functions:

* ``cheap``: a fixed allocation (topic = word id mod K), so the time is the sampler's own —
  minibatch, â, the CIR / Euler update of 400,000 components, normalisation, log density;
* ``gibbs``: the LDA vignette's local step (Gibbs sweeps over the minibatch's allocations), the
  realistic cost.

Whole-chain API (``sample_chain`` in compiled chunks, thin = the chunk so storage is negligible);
compilation excluded by a warm-up chunk. Prints ms per iteration, the median of ``--repeats``.

Usage: python benchmarks/bench_simplex.py [--iters 200] [--repeats 3] [--sweeps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "vignettes"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402

K, V, DOCS, LENGTH, BATCH = 50, 8000, 5000, 100, 50


def cheap_counts(params, minibatch, seed):
    topics = params["topics"]
    w = tf.reshape(minibatch["words"], [-1])
    flat = tf.math.unsorted_segment_sum(tf.ones_like(w, topics.dtype), (w % K) * V + w, K * V)
    return {"topics": tf.reshape(flat, [K, V])}


def time_per_iteration(method: str, counts, iters: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    data = {"words": rng.integers(0, V, size=(DOCS, LENGTH), dtype=np.int32)}
    start = {"topics": rng.dirichlet(np.ones(V), size=K)}
    h = 0.5 if method == "scir" else 0.01
    s = getattr(sgmcmc, method + "_setup")(counts, data, start, h, 0.05, BATCH, seed=1)
    sgmcmc.sample_chain(s, 10, verbose=False, thin=10)  # compiles
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sgmcmc.sample_chain(s, iters, verbose=False, thin=iters)
        times.append((time.perf_counter() - t) / iters * 1e3)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sweeps", type=int, default=5)
    args = p.parse_args(argv)
    from lda import make_lda_counts

    print(f"K={K} topics x V={V} words, minibatch {BATCH} docs x {LENGTH} words, float32, "
          f"{os.cpu_count()} CPUs visible, TF {tf.__version__}")
    for name, counts in (("cheap", cheap_counts), (f"gibbs x{args.sweeps}", make_lda_counts(K, args.sweeps))):
        for method in ("scir", "sgrld"):
            ms = time_per_iteration(method, counts, args.iters, args.repeats)
            print(f"{method:5s} counts={name:9s}: {ms:8.2f} ms/iteration")


if __name__ == "__main__":
    main()
