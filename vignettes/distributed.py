"""Rows sharded across workers: the covertype-shaped logistic regression on 1, 2 (and 4) workers.

The model is the benchmarks' Bayesian logistic regression (Laplace(0, 1) prior) on the 10
continuous columns of covertype-shaped generated data (``sgmcmc.datasets.synthetic_covertype``),
standardised, plus a bias. (With the 44 one-hot columns too, the rare categories' coefficients
mix so slowly that two one-process runs with different seeds differed by 5 posterior sds after
2,000 iterations at N = 20,000: no run could be compared with another. With the continuous
columns, seeds 1–3 agree within 0.28 sds and the stepsize 2/N passes ``check_stepsize``.) Each run
is a ``MultiWorkerMirroredStrategy`` cluster of W local worker processes started with
``sgmcmc.distribute.launcher.run_workers`` (what ``python -m sgmcmc.distribute --workers W``
does); worker w passes only its contiguous slice of the rows (``shard_rows=True``), SGLD-CV's
mode search, anchor gradient and every minibatch gradient are sums over the workers. W = 1 is
the ordinary one-process run.

Figures:

1. ``distributed_posterior.png``: posterior mean ± sd of every coefficient, each W's run against
   the one-process run's, in units of the one-process posterior sd (the runs draw different
   minibatches, so they agree to Monte Carlo error, not bit for bit).
2. ``distributed_timing.png``: µs per iteration and seconds per full-data gradient against W.

This machine has 2 cores: one process already uses both, so W = 2 adds no compute, and W = 4
oversubscribes them. What the figure shows here is the price of the per-iteration all-reduce
(and of splitting the full-data pass); on machines with a core budget each, the full-data
gradient divides by W and the per-iteration cost pays when a minibatch's gradient costs more
than the collective (``benchmarks/RESULTS.md``, "tf.distribute").

    python vignettes/distributed.py [--quick] [--out DIR] [--workers 1,2,4] [--rows N]

The full version (N = 581,012, 20,000 iterations, W = 1, 2, 4) takes about 5 minutes here;
``--quick`` (N = 20,000, 2,000 iterations, W = 1, 2) about 40 s; it runs W = 1 in the calling process
itself (no second TensorFlow start-up; the same seeded run as a launched worker's) and launches
only W = 2.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from _common import parse_args, savefig  # first: selects the Agg backend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.datasets import synthetic_covertype  # noqa: E402
from sgmcmc.run.mode_search import full_data_gradient_at_mode  # noqa: E402


def log_lik(params, dataset):
    z = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    return tf.reduce_sum(dataset["y"] * z - tf.math.softplus(z))


def log_prior(params):
    return -tf.reduce_sum(tf.abs(params["beta"])) - tf.abs(params["bias"])


def settings(quick: bool, rows: int | None) -> dict:
    """Stepsizes 2/N: ε·λ_max ≈ 0.5 (λ_max ≈ N/4 on standardised columns; check_stepsize: sd
    within 7 % of the posterior's)."""
    s = dict(rows=20_000, n=200, n_iters=2_000, n_iters_opt=1_000) if quick else dict(rows=581_012, n=500, n_iters=20_000, n_iters_opt=5_000)
    s["rows"] = rows or s["rows"]
    s["stepsize"] = s["opt_stepsize"] = 2.0 / s["rows"]
    return s


def covertype_continuous(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """X: the 10 continuous columns, standardised (float32); y in {0, 1}."""
    data = synthetic_covertype(n_rows=rows, seed=0)
    X = data[:, 1:11]
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), data[:, 0]


def worker(quick: bool, rows: int | None, out: Path) -> None:
    """One worker of a run (``SGMCMC_WORKERS`` workers): its rows, SGLD-CV, timings to ``out``."""
    n_workers = int(os.environ.get("SGMCMC_WORKERS", "1"))
    strategy, w = None, 0
    if n_workers > 1:
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.RING
            )
        )
        w = strategy.cluster_resolver.task_id
    s = settings(quick, rows)
    X, y = covertype_continuous(s["rows"])
    lo, hi = w * s["rows"] // n_workers, (w + 1) * s["rows"] // n_workers
    dataset = {"X": X[lo:hi], "y": y[lo:hi]}
    start = {"bias": np.float32(0.0), "beta": np.zeros(10, np.float32)}
    sampler = sgmcmc.sgldcv_setup(
        log_lik, dataset, start, s["stepsize"], opt_stepsize=s["opt_stepsize"], log_prior=log_prior,
        minibatch_size=s["n"], n_iters_opt=s["n_iters_opt"], seed=1, verbose=False, strategy=strategy,
    )
    t = time.perf_counter()
    sgmcmc.init_sess(sampler, verbose=False)
    init_s = time.perf_counter() - t
    grad_s = []
    for _ in range(3):
        t = time.perf_counter()
        full_data_gradient_at_mode(sampler)
        grad_s.append(time.perf_counter() - t)
    sgmcmc.sample_chain(sampler, 200, verbose=False)  # compiles the sampling call
    t = time.perf_counter()
    samples = sgmcmc.sample_chain(sampler, s["n_iters"], verbose=False)
    per_it = (time.perf_counter() - t) / s["n_iters"] * 1e6
    if w == 0:
        np.savez(out / f"w{n_workers}.npz", beta=samples["beta"], bias=samples["bias"])
        (out / f"w{n_workers}.json").write_text(json.dumps(
            {"workers": n_workers, "us_per_iteration": per_it, "full_gradient_s": float(np.median(grad_s)), "init_s": init_s}
        ))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(
        "distributed", __doc__.splitlines()[0], argv,
        lambda p: (
            p.add_argument("--workers", default=None, help="comma-separated worker counts (default 1,2; full: 1,2,4)"),
            p.add_argument("--rows", type=int, default=None),
            p.add_argument("--role", choices=["driver", "worker"], default="driver", help=argparse_hidden()),
        ),
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.role == "worker":
        worker(args.quick, args.rows, out)
        return {}
    from sgmcmc.distribute.launcher import run_workers

    counts = [int(c) for c in (args.workers or ("1,2" if args.quick else "1,2,4")).split(",")]
    here = str(Path(__file__).resolve())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(here).parents[1]), os.environ.get("PYTHONPATH", "")]))
    base = ["--out", str(out), "--role", "worker"] + (["--quick"] if args.quick else []) + (["--rows", str(args.rows)] if args.rows else [])
    log = out / "distributed_workers.log"
    with open(log, "w") as f:
        for w in counts:
            if w == 1 and args.quick and "SGMCMC_WORKERS" not in os.environ:
                worker(args.quick, args.rows, out)  # quick: the one-process run in this process (no TF start-up)
                continue
            codes = run_workers([here, *base], w, timeout=3600, grace=30, env=env, stdout=f, stderr=f)
            if list(codes) != [0] * w:
                sys.exit(f"the {w}-worker run failed (exit codes {list(codes)}); see {log}")
    runs = {w: (np.load(out / f"w{w}.npz"), json.loads((out / f"w{w}.json").read_text())) for w in counts}
    reference = runs[counts[0]][0]
    burn = len(reference["beta"]) // 5

    def summary(samples):
        x = np.column_stack([samples["bias"][burn:], samples["beta"][burn:]])
        return x.mean(0), x.std(0)

    ref_mean, ref_sd = summary(reference)
    differences = {w: (summary(r[0])[0] - ref_mean) / ref_sd for w, r in runs.items()}
    fig, ax = plt.subplots(figsize=(9, 4))
    for w, (samples, _) in runs.items():
        mean, sd = summary(samples)
        ax.errorbar(np.arange(11) + 0.15 * counts.index(w), (mean - ref_mean) / ref_sd, yerr=sd / ref_sd,
                    fmt="o", ms=3, label=f"{w} worker(s)")
    ax.set(xlabel="coefficient (0 = bias)", ylabel="(mean − one-process mean) / one-process sd",
           title="SGLD-CV, rows sharded: posterior mean ± sd")
    ax.legend()
    savefig(fig, out / "distributed_posterior.png")
    timing = [runs[w][1] for w in counts]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(counts, [t["us_per_iteration"] for t in timing], "o-", label="µs per iteration")
    ax.set(xlabel="workers", ylabel="µs per iteration", xticks=counts, title="Cost on this 2-core machine")
    twin = ax.twinx()
    twin.plot(counts, [t["full_gradient_s"] for t in timing], "s--", color="C1", label="full-data gradient")
    twin.set_ylabel("seconds per full-data gradient")
    ax.legend(loc="upper left")
    twin.legend(loc="upper right")
    savefig(fig, out / "distributed_timing.png")
    for w, t in zip(counts, timing):
        print(f"{w} worker(s): {t['us_per_iteration']:.0f} us/it, full-data gradient {t['full_gradient_s']:.3f} s, "
              f"largest mean difference {np.max(np.abs(differences[w])):.2f} one-process sds")
    return {
        "workers": counts,
        "max_mean_difference_sds": {w: float(np.max(np.abs(d))) for w, d in differences.items()},
        "us_per_iteration": {w: runs[w][1]["us_per_iteration"] for w in counts},
        "full_gradient_s": {w: runs[w][1]["full_gradient_s"] for w in counts},
    }


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
