"""Step-by-step API cost on covertype-shaped logistic regression (N = 581,012, n = 500).

Prints the median per-call cost of ``sgmcmc_step`` and of ``get_params`` (blocks of 1,000
calls, medians over blocks), and resident memory (RSS) after 10^3 and after 10^5 steps.

``--replace``: ``minibatch_replace=True``. The step is ``StepCall.checked_step`` (sgmcmc/run/step_call.py) compiled on its
own (XLA by default; ``SGMCMC_XLA=0`` for graph mode).

Usage: python benchmarks/bench_step.py [--steps 100000] [--n-rows 581012] [--replace]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--n-rows", type=int, default=581_012)
    p.add_argument("--replace", action="store_true")
    args = p.parse_args(argv)
    sampler = sgmcmc.sgld_setup(log_lik, make_data(args.n_rows), start(), 5e-6, log_prior, 500, seed=1,
                                minibatch_replace=args.replace)
    sess = sgmcmc.init_sess(sampler, verbose=False)
    step_us, get_us = [], []
    rss_1e3 = None
    done = 0
    while done < args.steps:
        t = time.perf_counter()
        for _ in range(1000):
            sgmcmc.sgmcmc_step(sampler, sess)
        step_us.append((time.perf_counter() - t) / 1000 * 1e6)
        t = time.perf_counter()
        for _ in range(1000):
            sgmcmc.get_params(sampler, sess)
        get_us.append((time.perf_counter() - t) / 1000 * 1e6)
        done += 1000
        if done == 1000:
            rss_1e3 = rss_mb()
    print(
        f"{'XLA' if sampler.jit_compile else 'graph'}{', replace' if args.replace else ''}: "
        f"N={args.n_rows}: sgmcmc_step {statistics.median(step_us[1:] or step_us):.0f} µs/call, "
        f"get_params {statistics.median(get_us):.0f} µs/call (medians over blocks of 1,000); "
        f"RSS after 10^3 steps {rss_1e3:.0f} MB, after {done:,} steps {rss_mb():.0f} MB",
        flush=True,
    )
    # The floor, same process: one call of an empty compiled program given the step's arguments
    # (the block it reads, n, the offset) — through tf.function, and as the step calls its
    # program (graph_options.bound_once) — and a variable read as numpy (what get_params does
    # per parameter).
    import tensorflow as tf

    block, offset = sampler.step_call._block()
    one = tf.constant(1, tf.int64)
    empty = tf.function(lambda n, b, o: n + o, jit_compile=sampler.jit_compile or None)
    variable = next(iter(sampler.params.values()))
    import numpy as np

    from sgmcmc.graph_options import bound_once
    from sgmcmc.run.variables import read_now

    empty_bound = bound_once(empty.get_concrete_function(one, block, offset))
    floors = {
        "empty compiled call, same arguments": lambda: empty(one, block, offset),
        "empty compiled call, arguments bound once (what the step does)": lambda: empty_bound(one, block, offset),
        "one variable read to numpy": lambda: variable.numpy(),
        "one variable read by ReadVariableOp (sampler.read_now, what get_params does)": lambda: read_now(variable),
        "get_params as before 2026-11-29 (np.array(v.numpy()) per parameter)":
            lambda: {k: np.array(v.numpy()) for k, v in sampler.params.items()},
    }
    for name, fn in floors.items():
        fn()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(1000):
                fn()
            times.append((time.perf_counter() - t) / 1000 * 1e6)
        print(f"floor: {name}: {statistics.median(times):.0f} µs/call", flush=True)


if __name__ == "__main__":
    main()
