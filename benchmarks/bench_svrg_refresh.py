"""SVRG's in-graph refresh reading rows in place against through a host callback.

The covertype-shaped logistic regression (N = 581,012, d = 54, n = 500, float32), SGLD with
``estimator="svrg"`` (a full-data pass every ``svrg_period`` = 100 iterations), 2,000 iterations
on an already compiled sampler, medians of --repeats, three storages in one process:

* ``aligned``: an aligned in-memory array, sliced as a tensor (no copy), XLA (the default);
* ``aligned, graph``: the same in graph mode (``jit_compile=False``): what XLA is worth here;
* ``memmap``: a read-only memmap of an .npy file (what ``open_npy`` gives), its refresh blocks
  read by ``tf.numpy_function`` (so graph mode; no copy of the rows).

Also each case's refresh alone: one ``full_data_gradient_in_graph`` call (one full pass, K = 1).

Usage: python benchmarks/bench_svrg_refresh.py [--repeats 3] [--n-rows 581012]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.data.rows import aligned_empty  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402

ITERS = 2_000


def sampler_for(data: dict, xla: bool | None):
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 500, seed=1, estimator="svrg", svrg_period=100)
    if xla is not None:
        sampler.jit_compile = xla
    sgmcmc.init_sess(sampler, verbose=False)
    sgmcmc.sample_chain(sampler, 200, verbose=False)  # compiles, and a refresh ran
    return sampler


def per_iteration_us(sampler, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sgmcmc.sample_chain(sampler, ITERS, verbose=False)
        times.append((time.perf_counter() - t) / ITERS * 1e6)
    return statistics.median(times)


def refresh_ms(sampler, repeats: int) -> float:
    plain = sampler.estimator.plain
    params = {k: tf.constant(v[None]) for k, v in start().items()}
    fn = tf.function(plain.full_data_gradient_in_graph, jit_compile=sampler.jit_compile)
    fn(params)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(params)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-rows", type=int, default=581_012)
    args = parser.parse_args(argv)
    data = make_data(args.n_rows)
    aligned = {}
    for k, v in data.items():
        aligned[k] = aligned_empty(v.shape, np.float32)
        aligned[k][:] = v
    with tempfile.TemporaryDirectory() as directory:
        memmap = {}
        for k, v in aligned.items():
            np.save(os.path.join(directory, f"{k}.npy"), v)
            memmap[k] = np.load(os.path.join(directory, f"{k}.npy"), mmap_mode="r")
        cases = {"aligned (XLA)": (aligned, None), "aligned, graph": (aligned, False), "memmap (callback)": (memmap, None)}
        print(f"N = {args.n_rows:,}, SGLD + SVRG (period 100), {ITERS} iterations, medians of {args.repeats}; "
              f"load {os.getloadavg()[0]:.2f}")
        for name, (dataset, xla) in cases.items():
            sampler = sampler_for(dataset, xla)
            print(f"  {name:20s} jit_compile={sampler.jit_compile!s:5s}  {per_iteration_us(sampler, args.repeats):7.1f} µs/it"
                  f"   one refresh (full pass): {refresh_ms(sampler, args.repeats):7.1f} ms")


if __name__ == "__main__":
    main()
