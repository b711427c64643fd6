"""Graph mode against XLA for the sampling chunk (issue 11), in one process.

SGLD on the covertype-shaped logistic regression (d = 54 + bias, n = 500, float32) at ``--rows``
rows, K chains, one process, variants alternating within each repeat:

* ``graph``: the package's chunk in graph mode (TensorFlow's executor);
* ``xla_loop``: the package's XLA mode, ``Sampler.jit_compile = True`` (the chunk function with
  ``jit_compile=True``, storage of fixed capacity so one program serves every chunk length, and
  the minibatch samplers with XLA kernels);
* ``xla_body``: the graph-mode loop calling one XLA-compiled iteration (``Sampler._step`` wrapped
  in ``tf.function(jit_compile=True)``; graph mode's minibatch sampler has no XLA kernel, so this
  variant needs ``--replace``).

Marginal = (median t(3n) − median t(n)) / 2n µs per iteration; also the first call (trace +
compile + n iterations) and the first call of a second length (3n).

    python benchmarks/xla_variants.py [--rows 581012] [--chains 1] [--iters 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def make_sampler(data, chains: int, variant: str, replace: bool):
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1,
                                n_chains=chains, minibatch_replace=replace)
    sampler.jit_compile = variant == "xla_loop"  # set explicitly: the default depends on `replace`
    if variant == "xla_body":
        sampler._step = tf.function(sampler._step, jit_compile=True)
    sgmcmc.init_sess(sampler, verbose=False)
    return sampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--iters", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--replace", action="store_true")
    parser.add_argument("--variants", default="graph,xla_loop,xla_body")
    args = parser.parse_args()
    data = make_data(args.rows)
    n = args.iters
    samplers, first, new_length = {}, {}, {}
    for name in args.variants.split(","):
        samplers[name] = make_sampler(data, args.chains, name, args.replace)
        t = time.perf_counter()
        samplers[name].sample_groups(n, 1)
        first[name] = time.perf_counter() - t
        t = time.perf_counter()
        samplers[name].sample_groups(3 * n, 1)
        new_length[name] = time.perf_counter() - t
    times = {(name, m): [] for name in samplers for m in (1, 3)}
    for _ in range(args.repeats):
        for name, sampler in samplers.items():
            for m in (1, 3):
                t = time.perf_counter()
                sampler.sample_groups(m * n, 1)
                times[name, m].append(time.perf_counter() - t)
    print(f"SGLD, N = {args.rows}, K = {args.chains}, n = {n}, replace = {args.replace}, medians of {args.repeats}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'variant':<10}{'first call s':>14}{'new length s':>14}{'marginal µs/it':>16}")
    for name in samplers:
        marginal = (statistics.median(times[name, 3]) - statistics.median(times[name, 1])) / (2 * n) * 1e6
        print(f"{name:<10}{first[name]:>14.2f}{new_length[name]:>14.2f}{marginal:>16.1f}")


if __name__ == "__main__":
    main()
