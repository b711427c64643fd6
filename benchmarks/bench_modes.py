"""Graph mode against XLA for the block pipeline (SPEC §11), in one process, alternating.

SGLD on the covertype-shaped logistic regression (N rows × 54, n = 500), exact subsets (the
default) and ``minibatch_replace=True``, K = 1 and 4 chains. Marginal µs/iteration = (t(3·its) −
t(its)) / (2·its) of whole ``sample_chain`` calls on one compiled sampler, medians of --repeats.

Usage: python benchmarks/bench_modes.py [--n-rows 581012] [--iters 3000] [--repeats 3]
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


def marginal(sampler, iters: int, repeats: int) -> float:
    sgmcmc.sample_chain(sampler, iters, verbose=False)  # warm-up: trace and compile
    short, long_ = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        sgmcmc.sample_chain(sampler, iters, verbose=False)
        short.append(time.perf_counter() - t)
        t = time.perf_counter()
        sgmcmc.sample_chain(sampler, 3 * iters, verbose=False)
        long_.append(time.perf_counter() - t)
    return (statistics.median(long_) - statistics.median(short)) / (2 * iters) * 1e6


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-rows", type=int, default=581_012)
    p.add_argument("--iters", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chains", default="1,4")
    args = p.parse_args(argv)
    data = make_data(args.n_rows)
    for k in [int(c) for c in args.chains.split(",")]:
        for replace in (False, True):
            row = []
            for mode in ("0", "1"):
                os.environ["SGMCMC_XLA"] = mode
                s = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 500, seed=1, n_chains=k, minibatch_replace=replace)
                sgmcmc.init_sess(s)
                row.append(marginal(s, args.iters, args.repeats))
            print(
                f"N={args.n_rows} K={k} replace={replace}: graph {row[0]:.1f} µs/it, XLA {row[1]:.1f} µs/it "
                f"(per chain-iteration {row[0] / k:.1f} / {row[1] / k:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
