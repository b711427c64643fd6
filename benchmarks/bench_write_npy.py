"""write_npy: throughput and peak extra anonymous memory, from Parquet parts and from arrays.

    python benchmarks/bench_write_npy.py [--rows 2000000] [--cols 75] [--dir DIR]

Generates ``--rows`` x ``--cols`` float32 features plus a label as Parquet parts of 500,000
rows (row groups of 250,000), then converts them with ``write_npy`` (X stacked as one (N, d)
entry, y as one entry) for several ``block_rows``, and converts a lazy float64 array source
(rows made when read: it takes no memory). For each: seconds, MB/s of ``.npy`` written and
the peak RssAnon above its value at the start of the call (sampled every 5 ms by a thread;
it includes pyarrow's memory pool, which keeps freed memory for reuse, so a run after a larger
one may show less). Page-cache effects: the Parquet parts were just written, so
they are read from memory; the MB/s are the converter's, not the disk's.
"""

from __future__ import annotations

import argparse
import os
import sys
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sgmcmc.datasets import write_npy
from sgmcmc.datasets.npy import BLOCK_BYTES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_probe import peak_rss_anon  # noqa: E402


def measured(fn) -> tuple[float, float]:
    """(seconds, peak RssAnon MB above the start) of ``fn()``."""
    seconds, before, peak = peak_rss_anon(fn, every=0.005)
    return seconds, (peak - before) / 2**20


class LazyArray:
    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape, self.dtype = shape, np.dtype(np.float64)

    def __getitem__(self, index: slice) -> np.ndarray:
        start, stop, _ = index.indices(self.shape[0])
        return np.arange(start, stop, dtype=np.float64)[:, None] + np.arange(self.shape[1]) / 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--cols", type=int, default=75)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--block-rows", type=int, nargs="+", default=[0, 200_000, 50_000, 10_000],
                        help="block_rows to try; 0 is write_npy's default")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        parts = work / "parquet"
        parts.mkdir()
        rng = np.random.default_rng(0)
        for i, start in enumerate(range(0, args.rows, 500_000)):
            n = min(500_000, args.rows - start)
            xt = rng.standard_normal((args.cols, n), dtype=np.float32)
            table = pa.table({**{f"f{j}": xt[j] for j in range(args.cols)}, "y": (xt[0] > 0).astype(np.float32)})
            pq.write_table(table, parts / f"part-{i:04d}.parquet", row_group_size=250_000, use_dictionary=False)
        data_mb = args.rows * (args.cols + 1) * 4 / 1e6
        print(f"{args.rows:,} rows x {args.cols} float32 features + label: {data_mb:,.0f} MB of .npy; "
              f"Parquet {sum(p.stat().st_size for p in parts.iterdir()) / 1e6:,.0f} MB")
        columns = {"X": [f"f{j}" for j in range(args.cols)], "y": "y"}
        print(f"{'source':>22} {'block_rows':>10} {'s':>6} {'MB/s':>7} {'peak RssAnon MB':>16}")
        for block_rows in args.block_rows:
            out = work / f"npy-{block_rows}"
            seconds, peak = measured(lambda: write_npy(parts, out, columns=columns, block_rows=block_rows or None,
                                                       verbose=False))
            label = f"{block_rows:,}" if block_rows else f"default ({BLOCK_BYTES // (4 * (args.cols + 1)):,})"
            print(f"{'Parquet parts':>22} {label:>10} {seconds:6.2f} {data_mb / seconds:7.0f} {peak:16.0f}")
            shutil.rmtree(out)
        lazy_mb = args.rows * args.cols * 4 / 1e6
        for block_rows in args.block_rows:
            out = work / "lazy"
            seconds, peak = measured(lambda: write_npy({"X": LazyArray((args.rows, args.cols))}, out,
                                                       block_rows=block_rows or None, verbose=False))
            label = f"{block_rows:,}" if block_rows else f"default ({BLOCK_BYTES // (4 * args.cols):,})"
            print(f"{'lazy float64 array':>22} {label:>10} {seconds:6.2f} {lazy_mb / seconds:7.0f} {peak:16.0f}")
            shutil.rmtree(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
