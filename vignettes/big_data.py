"""Data larger than memory: SGLD-CV on a logistic regression read from disk (SPEC §11).

The full version generates 10^8 rows × 75 float32 columns (a label and 74 features: 30 GB, more
than this machine's 24 GB of RAM) in Parquet parts, converts them with
``sgmcmc.datasets.write_npy`` into one ``.npy`` file per entry (the Parquet parts are deleted
after conversion unless ``--keep-parquet``: the disk then holds the data once), opens them with
``open_npy`` as memmaps and runs ``sgmcmc.sgldcv`` on them. Figures:

1. ``big_data_posterior.png``: posterior means and 90 % intervals against the generating
   coefficients;
2. ``big_data_memory.png``: resident memory during the run — anonymous (RssAnon: what the
   process allocated) and file-backed (RssFile: the data's pages the kernel keeps in its cache);
3. ``big_data_speed.png``: iterations per second on the memmapped data against the same sampler
   on an in-memory slice (10^7 rows in the full version).

How long the full version takes here has NOT been measured: from the quick run's throughput
(write_npy ~100–200 MB/s, the sampler tens of µs per iteration in memory) it is dominated by
generating and writing 2 × 30 GB (an estimate of 10–20 minutes) and by the mode search's and
control variate's passes over all rows (one streamed full-data gradient: reading 30 GB from disk,
minutes); the sampler's own iterations read only n rows each, at the disk's random-read rate once
the data no longer fit the page cache. ``--quick`` (2·10^5 rows × 10 columns, seconds) runs in CI.
"""

from __future__ import annotations

from _common import parse_args, savefig  # first: selects the Agg backend

import shutil
import threading
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

import sgmcmc
from sgmcmc.datasets import open_npy, write_npy


def log_lik(params, dataset):
    logits = tf.linalg.matvec(dataset["X"], params["beta"])
    return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=dataset["y"], logits=logits))


def log_prior(params):
    return -0.5 * tf.reduce_sum(tf.square(params["beta"])) / 25.0  # N(0, 5^2)


def generate_parquet(directory: Path, rows: int, features: int, part_rows: int, seed: int = 0) -> np.ndarray:
    """Write ``rows`` rows in Parquet parts of ``part_rows``; returns the generating coefficients."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    beta = rng.normal(0.0, 1.0, features) / np.sqrt(features)
    directory.mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, rows, part_rows)):
        m = min(part_rows, rows - start)
        x = rng.standard_normal((m, features), dtype=np.float32)
        y = (rng.random(m) < 1 / (1 + np.exp(-(x @ beta)))).astype(np.float32)
        columns = {"label": y, **{f"f{j}": x[:, j] for j in range(features)}}
        pq.write_table(pa.table(columns), directory / f"part-{i:05d}.parquet")
    return beta


class MemoryWatch:
    """RssAnon and RssFile of this process every ``interval`` seconds, in a thread."""

    def __init__(self, interval: float = 0.2):
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> tuple[float, float]:
        values = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:")):
                    values[line.split(":")[0]] = int(line.split()[1]) / 2**20  # GB
        return values.get("RssAnon", 0.0), values.get("RssFile", 0.0)

    def _run(self):
        start = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - start, *self._read()))
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_sgldcv(dataset, features: int, n_iters: int, n_rows: int, minibatch: int, seed: int):
    start = {"beta": np.zeros(features, np.float32)}
    t = time.perf_counter()
    out = sgmcmc.sgldcv(
        log_lik, dataset, start, 1.0 / n_rows, opt_stepsize=1.0 / n_rows, log_prior=log_prior,
        minibatch_size=minibatch, n_iters=n_iters, n_iters_opt=1_000, verbose=False, seed=seed,
    )
    return out, time.perf_counter() - t


def main(argv: list[str] | None = None) -> dict:
    args = parse_args("big_data", __doc__.splitlines()[0], argv, lambda p: (
        p.add_argument("--rows", type=int, default=None, help="rows to generate (full: 10^8)"),
        p.add_argument("--columns", type=int, default=None, help="columns, the label included (full: 75)"),
        p.add_argument("--data", type=Path, default=None, help="where the Parquet parts and .npy files go"),
        p.add_argument("--keep-parquet", action="store_true", help="keep the Parquet parts after conversion"),
    ))
    rows = args.rows or (200_000 if args.quick else 100_000_000)
    features = (args.columns or (10 if args.quick else 75)) - 1
    slice_rows = min(rows, 50_000 if args.quick else 10_000_000)
    n_iters = 2_000 if args.quick else 20_000
    minibatch = 1_000
    data_dir = args.data or (args.out / "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    t = time.perf_counter()
    beta = generate_parquet(data_dir / "parquet", rows, features, part_rows=min(rows, 1_000_000))
    generate_s = time.perf_counter() - t
    t = time.perf_counter()
    write_npy(
        data_dir / "parquet", data_dir / "npy", columns={"X": [f"f{j}" for j in range(features)], "y": "label"},
        verbose=not args.quick,
    )
    convert_s = time.perf_counter() - t
    if not args.keep_parquet:
        shutil.rmtree(data_dir / "parquet")
    dataset = open_npy(data_dir / "npy")
    with MemoryWatch() as memory:
        out, disk_s = run_sgldcv(dataset, features, n_iters, rows, minibatch, seed=1)
    in_memory = {k: np.array(v[:slice_rows]) for k, v in dataset.items()}
    _, memory_s = run_sgldcv(in_memory, features, n_iters, slice_rows, minibatch, seed=1)

    draws = out["beta"][n_iters // 5 :]
    mean, sd = draws.mean(0), draws.std(0)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    fig, ax = plt.subplots(figsize=(8, 4))
    order = np.arange(features)
    ax.errorbar(order, mean, yerr=[mean - lo, hi - mean], fmt="o", ms=3, label="SGLD-CV: mean, 90 % interval")
    ax.plot(order, beta, "x", color="C3", label="generating coefficient")
    ax.set(xlabel="coefficient", ylabel="value", title=f"logistic regression on {rows:,} rows read from disk")
    ax.legend()
    savefig(fig, args.out / "big_data_posterior.png")
    trace = np.array(memory.samples) if memory.samples else np.zeros((1, 3))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(trace[:, 0], trace[:, 1], label="RssAnon (allocated)")
    ax.plot(trace[:, 0], trace[:, 2], label="RssFile (page cache of the data)")
    ax.set(xlabel="seconds into sgldcv", ylabel="GB", title=f"resident memory; the data are {rows * (features + 1) * 4 / 1e9:.2f} GB")
    ax.legend()
    savefig(fig, args.out / "big_data_memory.png")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(["memmapped, all rows", f"in memory, {slice_rows:,} rows"], [n_iters / disk_s, n_iters / memory_s])
    ax.set(ylabel="iterations per second (whole call)")
    savefig(fig, args.out / "big_data_speed.png")
    z = np.abs(mean - beta) / np.maximum(sd, 1e-6)
    print(
        f"{rows:,} rows x {features + 1} columns: generated in {generate_s:.1f} s, converted in {convert_s:.1f} s; "
        f"sgldcv {disk_s:.1f} s on disk, {memory_s:.1f} s in memory ({slice_rows:,} rows); "
        f"largest |mean - truth| = {z.max():.2f} posterior sd; peak RssAnon {trace[:, 1].max():.2f} GB"
    )
    return {"z": z, "peak_anon_gb": float(trace[:, 1].max()), "disk_s": disk_s, "memory_s": memory_s, "rows": rows}


if __name__ == "__main__":
    main()
