"""How fast can TensorFlow's XLA run this iteration at all? (issue 11)

A minimal hand-written SGLD loop on the covertype-shaped logistic regression (N = ``--rows``,
n = 500, i.i.d. rows, float32), ``tf.function(jit_compile=True)``, nothing else: the same
``tf.random.Generator`` draws, gather, ``GradientTape`` gradient and update as the package, but
no storage, no divergence check, no chunk bookkeeping. Against the package's own XLA chunk on the
same model in the same process (``sgld_setup(..., minibatch_replace=True)``, XLA by default), and
variants of the minimal loop that drop one piece each. Marginal µs/it, medians of 5.

    python benchmarks/xla_floor.py [--rows 581012]
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


def minimal_loop(data, n_rows: int, variant: str):
    x, y = tf.constant(data["X"]), tf.constant(data["y"])
    generator = tf.random.Generator.from_seed(1)
    scale, eps = n_rows / 500, 1e-5

    @tf.function(jit_compile=True)
    def loop(n, beta, bias):
        for _ in tf.range(n):
            if variant == "fixed rows":
                idx = tf.range(500, dtype=tf.int64)
            elif variant == "int32 rows":
                idx = generator.uniform([500], 0, n_rows, dtype=tf.int32)
            elif variant == "sorted rows":
                idx = tf.sort(generator.uniform([500], 0, n_rows, dtype=tf.int32))
            else:
                idx = generator.uniform([500], 0, n_rows, dtype=tf.int64)
            batch = {"X": tf.gather(x, idx), "y": tf.gather(y, idx)}
            with tf.GradientTape() as tape:
                tape.watch([beta, bias])
                params = {"beta": beta, "bias": bias}
                lp = scale * log_lik(params, batch) + log_prior(params)
            g_beta, g_bias = tape.gradient(lp, [beta, bias])
            if variant == "no noise":
                beta, bias = beta + eps / 2 * g_beta, bias + eps / 2 * g_bias
            else:
                noise = generator.normal([55])
                beta = beta + eps / 2 * g_beta + eps**0.5 * noise[:54]
                bias = bias + eps / 2 * g_bias + eps**0.5 * noise[54]
        return beta, bias

    beta, bias = tf.zeros([54]), tf.constant(0.0)
    return lambda n: loop(tf.constant(n), beta, bias)[0].numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--iters", type=int, default=2_000)
    args = parser.parse_args()
    data = make_data(args.rows)
    sampler = sgmcmc.sgld_setup(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1,
                                minibatch_replace=True)
    assert sampler.jit_compile
    sgmcmc.init_sess(sampler, verbose=False)
    variants = {"package (XLA chunk)": lambda n: sampler.sample_groups(n, 1)}
    for name in ("minimal", "fixed rows", "int32 rows", "sorted rows", "no noise"):
        variants[name] = minimal_loop(data, args.rows, name)
    n = args.iters
    for run in variants.values():
        run(n)
        run(2 * n)
    times = {(name, m): [] for name in variants for m in (1, 2)}
    for _ in range(5):
        for name, run in variants.items():
            for m in (1, 2):
                t = time.perf_counter()
                run(m * n)
                times[name, m].append(time.perf_counter() - t)
    print(f"N = {args.rows}, n = 500, i.i.d. rows, XLA, load {os.getloadavg()[0]:.2f}")
    for name in variants:
        marginal = (statistics.median(times[name, 2]) - statistics.median(times[name, 1])) / n * 1e6
        print(f"{name:<22}{marginal:8.1f} µs/it")


if __name__ == "__main__":
    main()
