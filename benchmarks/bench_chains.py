"""Cost of several chains, and of the analysis functions (issue 8).

(a) Marginal µs per iteration of SGLD with K = 1, 4, 16 chains on the covertype-shaped logistic
    regression (N = 581,012, d = 54 + bias, n = 500, Laplace prior, float32): one sampler per K,
    prepared and warmed up (compiled, one call of each length), then ``sample_chain`` calls of
    n and 3n iterations, alternating over K and lengths within each repeat; marginal =
    (median t(3n) − median t(n)) / 2n. The ratios K / 1 come from the same run.
(b) ``ksd`` on 10^4 draws × 55 (stored-gradient layout) and ``summary`` on 4 chains × 10^4 draws
    × 55: wall time (median of repeats) and peak resident memory above the level before the
    call (VmHWM after resetting it through /proc/self/clear_refs).

``--replace``: ``minibatch_replace=True`` (one chain then runs under XLA by default; ``SGMCMC_XLA``
forces a mode for every K).

Usage: python benchmarks/bench_chains.py [--iters 2000] [--repeats 5] [--chains 1,4,16] [--replace]
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

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def peak_above_baseline(fn):
    """(seconds, bytes): wall time of ``fn()`` and its peak RSS above the RSS before it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    before = _status("VmRSS:")
    t = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t
    return seconds, max(0, _status("VmHWM:") - before)


def bench_chains(n_iters: int, repeats: int, chains: list[int], replace: bool = False) -> None:
    data = make_data(581_012)
    samplers = {}
    for k in chains:
        s = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 500, seed=1, n_chains=k, minibatch_replace=replace)
        sgmcmc.sample_chain(s, n_iters, verbose=False)  # compile + warm-up
        sgmcmc.sample_chain(s, 3 * n_iters, verbose=False)
        samplers[k] = s
    times = {(k, m): [] for k in chains for m in (1, 3)}
    for _ in range(repeats):
        for k in chains:
            for m in (1, 3):
                t = time.perf_counter()
                sgmcmc.sample_chain(samplers[k], m * n_iters, verbose=False)
                times[k, m].append(time.perf_counter() - t)
    marginal = {
        k: (statistics.median(times[k, 3]) - statistics.median(times[k, 1])) / (2 * n_iters) * 1e6 for k in chains
    }
    modes = "/".join(sorted({"XLA" if s.jit_compile else "graph" for s in samplers.values()}))
    print(f"(a) SGLD, N = 581,012, n = 500{', replace' if replace else ''} ({modes}): marginal µs/iteration, n = {n_iters}, medians of {repeats} alternating repeats")
    for k in chains:
        spread = [(b - a) / (2 * n_iters) * 1e6 for a, b in zip(times[k, 1], times[k, 3])]
        print(
            f"  K={k:>3}  {marginal[k]:7.1f} µs/it  ({marginal[k] / k:6.1f} per chain-iteration)  "
            f"ratio to K={chains[0]}: {marginal[k] / marginal[chains[0]]:.2f}  "
            f"[per-repeat {min(spread):.1f}–{max(spread):.1f}]",
            flush=True,
        )


def bench_analysis(repeats: int) -> None:
    rng = np.random.default_rng(0)
    d = 55
    one = sgmcmc.Samples(
        {"theta": rng.normal(size=(10_000, d)).astype(np.float32)},
        gradients={"theta": rng.normal(size=(10_000, d)).astype(np.float32)},
    )
    four = sgmcmc.Samples({"theta": rng.normal(size=(4, 10_000, d)).astype(np.float32)}, n_chains=4)
    sgmcmc.ksd(sgmcmc.Samples({"theta": one["theta"][:100]}, gradients={"theta": one.gradients["theta"][:100]}))
    sgmcmc.summary(sgmcmc.Samples({"theta": four["theta"][:, :100]}, n_chains=4))  # imports, tracing
    print(f"(b) analysis, medians of {repeats}:")
    for label, fn in (("ksd, 10^4 x 55", lambda: sgmcmc.ksd(one)), ("summary, 4 x 10^4 x 55", lambda: sgmcmc.summary(four))):
        runs = [peak_above_baseline(fn) for _ in range(repeats)]
        seconds = statistics.median(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        print(f"  {label:24s} {seconds:6.2f} s   peak RSS above baseline {peak / 2**20:6.0f} MB "
              f"(inputs {sum(v.nbytes for v in one.values()) * (2 if 'ksd' in label else 0) / 2**20 + (four['theta'].nbytes / 2**20 if 'summary' in label else 0):.0f} MB)",
              flush=True)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--chains", default="1,4,16")
    p.add_argument("--skip-chains", action="store_true")
    p.add_argument("--skip-analysis", action="store_true")
    p.add_argument("--replace", action="store_true", help="minibatch_replace=True")
    args = p.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs visible, load average {os.getloadavg()[0]:.2f} at start", flush=True)
    if not args.skip_chains:
        bench_chains(args.iters, args.repeats, [int(c) for c in args.chains.split(",")], args.replace)
    if not args.skip_analysis:
        bench_analysis(max(1, args.repeats // 2))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
