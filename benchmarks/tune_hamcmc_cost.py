"""HAMCMC's cost outside XLA and of its scaled-curvature operator (the tuner's post-run check).

Part 1: per-iteration time of HAMCMC (d = 26, default memory 27, n = 500, N = 5,000: the
issue-22 regression of tests/test_auto_tuning.py) in graph mode (``SGMCMC_XLA=0``, what SAGA
and SVRG over entries not shared in place get) and under XLA, each in a fresh process: the
first 10 iterations (tracing, compilation) and then ``--iters`` more.

Part 2: one product x -> eps H(Ax)'s L-BFGS half (``two_loop``) eagerly against the graph-mode
function the operator now calls (``hamcmc._two_loop_graph``), and whether they agree bit for bit.

Run from the repository root: ``PYTHONPATH=. python benchmarks/tune_hamcmc_cost.py [--iters 2000]``.
Compare before/after a change in the same session (the machine is shared: quote medians).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(mode: str, estimator: str, iters: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import numpy as np

    import sgmcmc
    from reference_regression import correlated_regression

    g = correlated_regression(5_000, 26, 0.9, 0.5)
    X, y, P = g["data"]["X"], g["data"]["y"], g["P"]
    t0 = time.perf_counter()
    sampler = sgmcmc.hamcmc_setup(
        g["log_lik"], {"X": X.astype(np.float32), "y": y.astype(np.float32)}, {"b": np.zeros(26, np.float32)}, 0.3,
        log_prior=g["log_prior"], minibatch_size=500, warmup_stepsize=0.6 / np.linalg.eigvalsh(P)[-1],
        estimator=estimator, seed=1,
    )
    sgmcmc.sample_chain(sampler, 10, False)
    t1 = time.perf_counter()
    sgmcmc.sample_chain(sampler, iters, False)
    t2 = time.perf_counter()
    print(f"{mode:5s} {estimator:5s} xla={sampler.jit_compile!s:5s} set-up + first 10: {t1 - t0:6.2f} s   "
          f"{iters} iterations: {t2 - t1:6.2f} s = {(t2 - t1) / iters * 1e3:.2f} ms each", flush=True)


def operator_products() -> None:
    import numpy as np
    import tensorflow as tf

    from sgmcmc.graph_options import package_call_options
    from sgmcmc.step.dynamics.hamcmc import _two_loop_graph, lbfgs_pairs, two_loop

    rng = np.random.default_rng(0)
    for d in (5, 26):
        a = rng.normal(size=(d, d))
        a = a @ a.T + np.eye(d)
        s = tf.constant(rng.normal(size=(1, d, d)))
        y = tf.constant(s.numpy() @ a + 0.1 * rng.normal(size=(1, d, d)))
        rho, _, gamma = lbfgs_pairs(s, y)
        g = tf.constant(rng.normal(size=(1, d)))
        t0 = time.perf_counter()
        eager = [two_loop(g, s, y, rho, gamma).numpy() for _ in range(5)]
        t1 = time.perf_counter()
        with package_call_options():
            _two_loop_graph(g, s, y, rho, gamma)  # trace
            t2 = time.perf_counter()
            graph = [_two_loop_graph(g, s, y, rho, gamma).numpy() for _ in range(50)]
            t3 = time.perf_counter()
        print(f"two_loop d = M - 1 = {d}: eager {(t1 - t0) / 5 * 1e3:.1f} ms, graph {(t3 - t2) / 50 * 1e3:.2f} ms a product; "
              f"same bits: {np.array_equal(eager[0], graph[0])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=2_000)
    parser.add_argument("--one", nargs=2, metavar=("MODE", "ESTIMATOR"))
    args = parser.parse_args()
    if args.one:
        one_run(*args.one, args.iters)
        return
    for mode, flag in (("graph", "0"), ("xla", "1")):
        for estimator in ("plain", "svrg"):
            env = dict(os.environ, SGMCMC_XLA=flag, TF_CPP_MIN_LOG_LEVEL="3")
            out = subprocess.run([sys.executable, __file__, "--one", mode, estimator, "--iters", str(args.iters)],
                                 env=env, capture_output=True, text=True)
            print(out.stdout.strip() or out.stderr.strip()[-2000:], flush=True)
    operator_products()


if __name__ == "__main__":
    main()
