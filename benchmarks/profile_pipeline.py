"""Where one iteration's time goes in the block pipeline (SPEC §11), one process.

SGLD on the covertype-shaped logistic regression, n = 500: per iteration, (a) drawing the
indices of a block, (b) gathering its rows, (c) the compiled call on a ready block (no host
work), and (d) a whole ``sample_chain`` (host and compiled work overlapped by the prefetch
thread). (a)+(b) is the host's share, (c) the compiled loop's; (d) ≈ max of the two when the
overlap works.

Usage: python benchmarks/profile_pipeline.py [--n-rows 581012] [--replace] [--chains 1]
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

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def median_time(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-rows", type=int, default=581_012)
    p.add_argument("--replace", action="store_true")
    p.add_argument("--chains", type=int, default=1)
    args = p.parse_args(argv)
    data = make_data(args.n_rows)
    s = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 500, seed=1, minibatch_replace=args.replace, n_chains=args.chains)
    sgmcmc.init_sess(s)
    sgmcmc.sample_chain(s, 1000, verbose=False)
    s.calls.advance_loop(10)  # compiles the advance loop (graph mode's burn-in; no storage)
    feed = s.feeds.get("chain")
    cap = feed.capacity
    draw = median_time(lambda: feed.indices.draw(feed.seed, feed.stream, feed.chains, 0, cap)) / cap
    idx = feed.indices.draw(feed.seed, feed.stream, feed.chains, 0, cap)
    gather = median_time(lambda: s.rows.take(idx)) / cap
    block = feed.block(s.iteration, cap)
    fn = s.programs.function("advance", None)
    n = tf.constant(cap, tf.int64)
    call = median_time(lambda: fn(n, block)) / cap
    whole = median_time(lambda: sgmcmc.sample_chain(s, 10 * cap, verbose=False), 3) / (10 * cap)
    print(
        f"N={args.n_rows} K={args.chains} replace={args.replace} capacity={cap} mode={'XLA' if s.jit_compile else 'graph'}: "
        f"draw {draw * 1e6:.1f} + gather {gather * 1e6:.1f} µs/it on the host; compiled call {call * 1e6:.1f} µs/it; "
        f"whole chain {whole * 1e6:.1f} µs/it"
    )


if __name__ == "__main__":
    main()
