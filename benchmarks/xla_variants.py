"""The package's sampling chunk with and without XLA (issue 11, item 1), in one process.

SGLD on the covertype-shaped logistic regression (d = 54 + bias, n = 500, float32) at ``--rows``
rows, K chains. Variant "graph" is the package as shipped; "xla" compiles the same chunk
function with ``jit_compile=True`` (the sampler's ``_compiled`` hook patched; the chunk's random
generator, rejection/permutation minibatch and TensorArrays all have XLA kernels). The variants
alternate within each repeat; marginal = (median t(3n) − median t(n)) / 2n µs per iteration.
Also printed: the first call (trace + compile + n iterations) and whether two runs of the
variant with one seed give identical samples.

    python benchmarks/xla_variants.py [--rows 581012] [--chains 1] [--iters 2000] [--repeats 3]
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


def make_sampler(data, chains: int, xla: bool):
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1,
                                n_chains=chains)
    if xla:
        def compiled(key, make, functions=sampler._functions):
            if key not in functions:
                functions[key] = tf.function(make, jit_compile=True)
            return functions[key]

        sampler._compiled = compiled
    sgmcmc.init_sess(sampler, verbose=False)
    return sampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--iters", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = make_data(args.rows)
    n = args.iters
    samplers, first, same = {}, {}, {}
    for name in ("graph", "xla"):
        samplers[name] = make_sampler(data, args.chains, name == "xla")
        t = time.perf_counter()
        a = samplers[name].sample_groups(n, 1).samples["beta"]
        first[name] = time.perf_counter() - t
        samplers[name].sample_groups(3 * n, 1)  # the second length's warm-up
        again = make_sampler(data, args.chains, name == "xla")
        same[name] = bool(np.array_equal(a, again.sample_groups(n, 1).samples["beta"]))
    times = {(name, m): [] for name in samplers for m in (1, 3)}
    for _ in range(args.repeats):
        for name, sampler in samplers.items():
            for m in (1, 3):
                t = time.perf_counter()
                sampler.sample_groups(m * n, 1)
                times[name, m].append(time.perf_counter() - t)
    print(f"SGLD, N = {args.rows}, K = {args.chains}, n = {n}, medians of {args.repeats}")
    print(f"{'variant':<8}{'first call s':>14}{'marginal µs/it':>16}{'same seed same chain':>22}")
    for name in samplers:
        marginal = (statistics.median(times[name, 3]) - statistics.median(times[name, 1])) / (2 * n) * 1e6
        print(f"{name:<8}{first[name]:>14.2f}{marginal:>16.1f}{str(same[name]):>22}")


if __name__ == "__main__":
    main()
