"""Peak memory of ``sgld_setup`` + a short run on a large dataset, above the memory in use
once the data exist (issue 12, item 3).

Each case runs in a fresh subprocess: it imports sgmcmc, builds the data (10^7 x 55 float32,
2.2 GB, by default) without temporaries, resets the peak-RSS counter (``/proc/self/clear_refs``;
where that is not allowed the baseline is the RSS after the data exist and the peak includes
building them), then runs ``sgld_setup`` + ``init_sess`` + ``sample_chain(200)`` and reads
VmHWM. The result is (peak - baseline) / dataset size; the target is <= 1.3.

Cases:
  arrays     {"X": (N, 54) float32, "y": (N,) float32}, each its own C-contiguous array
  columns    {"X": data[:, 1:], "y": data[:, 0]}, strided views of one (N, 55) matrix
  dataframe  a pandas DataFrame of 55 float32 columns
Modes:
  current    the sampler as it is (``tf.convert_to_tensor`` of every entry)
  zero_copy  simulates the proposed one-line change in sampler.py,
             ``data = checks.as_tensors(dataset)`` (DLPack, at most one aligned copy)

    python benchmarks/bench_memory.py [--rows 10000000] [--cases arrays,columns] [--modes current,zero_copy]
    python benchmarks/bench_memory.py --tree /tmp/old   # the sgmcmc package under /tmp/old

Measured (2 shared cores, 23 GB; 10^7 x 55 float32 = 2.20 GB; baseline 2.96 GB with TF loaded
and the data built), (peak - baseline) / data size:

  before (c9afe88: astype copy, whole-data tf.constant for the trial, full-size NaN mask,
          tf.convert_to_tensor in Sampler)          arrays 3.00   columns 3.00
  after, sampler unchanged (tf.convert_to_tensor)   arrays 2.00   columns 2.00
  after + checks.as_tensors in Sampler (proposed)   arrays 1.01   columns 1.01

tf.convert_to_tensor always copies a numpy array and peaks at twice its size on top of it;
the remaining 1.0 with as_tensors is its one aligned copy, made because numpy's large
allocations start 16 bytes past a page, not on the 64-byte boundary TF needs (an aligned,
contiguous, writeable array is shared with no copy at all).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = 55


def status(field: str) -> int:
    """A field of /proc/self/status in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def one_case(case: str, mode: str, rows: int, iters: int) -> dict:
    import time

    import numpy as np
    import tensorflow as tf

    import sgmcmc
    import sgmcmc.run.sampler
    from sgmcmc import checks

    tf.get_logger().setLevel("ERROR")
    # At 10^7 rows the chunk loop failed (before and after this change) with grappler's
    # AddOpsRewrite: "AlreadyExistsError: Resource __per_step_0/while/.../tmp_var/.../iter:100"
    # (reported to the lead); switching that rewrite off does not change memory use.
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    rng = np.random.default_rng(0)
    chunk = 1_000_000
    if case == "dataframe":
        import pandas as pd

        frame = {}
        for j in range(COLUMNS):
            column = np.empty(rows, np.float32)
            for s in range(0, rows, chunk):
                rng.random(out=column[s : s + chunk], dtype=np.float32)
            frame[f"c{j}"] = column if j else (column < 0.5).astype(np.float32)
        dataset = pd.DataFrame(frame, copy=False)
        del frame, column
        names = [f"c{j}" for j in range(1, COLUMNS)]

        def log_lik(params, data):
            z = params["bias"] + tf.add_n([params["beta"][j] * data[n] for j, n in enumerate(names)])
            return tf.reduce_sum(data["c0"] * z - tf.math.softplus(z))
    else:
        if case == "arrays":
            X, y = np.empty((rows, COLUMNS - 1), np.float32), np.empty(rows, np.float32)
            for s in range(0, rows, chunk):
                rng.random(out=X[s : s + chunk], dtype=np.float32)
                y[s : s + chunk] = rng.random(min(chunk, rows - s), dtype=np.float32) < 0.5
        else:
            data = np.empty((rows, COLUMNS), np.float32)
            for s in range(0, rows, chunk):
                rng.random(out=data[s : s + chunk], dtype=np.float32)
                data[s : s + chunk, 0] = data[s : s + chunk, 0] < 0.5
            X, y = data[:, 1:], data[:, 0]
        dataset = {"X": X, "y": y}

        def log_lik(params, data):
            z = params["bias"] + tf.linalg.matvec(data["X"], params["beta"])
            return tf.reduce_sum(data["y"] * z - tf.math.softplus(z))

    if mode == "zero_copy":
        if not hasattr(checks, "as_tensors"):
            raise SystemExit("this tree has no checks.as_tensors")

        class TF:  # tf, except that convert_to_tensor shares memory like the proposed change
            def __getattr__(self, name):
                return getattr(tf, name)

            @staticmethod
            def convert_to_tensor(value, *args, **kwargs):
                if isinstance(value, np.ndarray) and not args and not kwargs:
                    return checks.as_tensor(value)
                return tf.convert_to_tensor(value, *args, **kwargs)

        sgmcmc.run.sampler.tf = TF()
    data_bytes = rows * COLUMNS * 4
    exact = reset_peak()
    baseline = status("VmRSS")
    start = time.perf_counter()
    sampler = sgmcmc.sgld_setup(log_lik, dataset, {"bias": 0.0, "beta": np.zeros(COLUMNS - 1)}, 1e-6,
                                minibatch_size=500, seed=1)
    setup_seconds = time.perf_counter() - start
    sgmcmc.init_sess(sampler, verbose=False)
    out = sgmcmc.sample_chain(sampler, iters, verbose=False)
    assert np.all(np.isfinite(out["beta"]))
    peak = status("VmHWM")
    return dict(case=case, mode=mode, rows=rows, data_gb=data_bytes / 1e9, baseline_gb=baseline / 1e9,
                peak_gb=peak / 1e9, ratio=(peak - baseline) / data_bytes, exact_peak_reset=exact,
                setup_s=setup_seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--cases", default="arrays,columns,dataframe")
    parser.add_argument("--modes", default="current,zero_copy")
    parser.add_argument("--tree", type=Path, default=ROOT, help="directory holding the sgmcmc package to measure")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_case(*args.one, args.rows, args.iters)))
        return
    env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()), TF_CPP_MIN_LOG_LEVEL="2")
    print(f"sgmcmc from {args.tree.resolve()}; {args.rows:,} x {COLUMNS} float32; target ratio <= 1.3")
    print(f"{'case':10s} {'mode':10s} {'data GB':>8s} {'baseline GB':>12s} {'peak GB':>8s} {'peak-base / data':>17s} {'setup s':>8s}")
    for case in args.cases.split(","):
        for mode in args.modes.split(","):
            proc = subprocess.run(
                [sys.executable, __file__, "--one", case, mode, "--rows", str(args.rows), "--iters", str(args.iters)],
                env=env, capture_output=True, text=True, cwd=args.tree,
            )
            if proc.returncode:
                print(f"{case:10s} {mode:10s} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            note = "" if r["exact_peak_reset"] else "  (peak counter not reset: includes building the data)"
            print(f"{case:10s} {mode:10s} {r['data_gb']:8.2f} {r['baseline_gb']:12.2f} {r['peak_gb']:8.2f} "
                  f"{r['ratio']:17.2f} {r['setup_s']:8.1f}{note}")


if __name__ == "__main__":
    main()
