"""Extra anonymous memory (RssAnon) of ``sgld`` on a large dataset (SPEC §11: no copy of the data).

Each case runs in a fresh process: a 10^7 × 55 float32 dataset (2.2 GB) — in memory and NOT
64-byte aligned (numpy's usual buffer; before §11 this was copied whole), or a ``.npy`` file
opened with ``np.load(mmap_mode="r")`` (its pages are page cache, RssFile, not RssAnon) — then
``sgmcmc.sgld`` on the logistic-regression model for ``--iters`` iterations. A thread samples
RssAnon every 20 ms; printed: RssAnon before the call, the peak during it, the extra peak in GB
and as a fraction of the data, and the target (≤ 0.15 × data + 0.4 GB).

Usage: python benchmarks/bench_data_memory.py [--rows 10000000] [--iters 2000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def case(kind: str, rows: int, iters: int, directory: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, HERE)
    import numpy as np

    import sgmcmc
    from logreg_model import log_lik, log_prior, start
    from memory_probe import peak_rss_anon, rss_bytes

    d = 55
    rng = np.random.default_rng(0)
    if kind == "unaligned":
        base = np.empty(rows * d + 1, np.float32)
        data = base[1:].reshape(rows, d)  # 4 bytes past numpy's start: never 64-byte aligned
        for a in range(0, rows, 1_000_000):
            b = min(rows, a + 1_000_000)
            data[a:b] = rng.random((b - a, d), dtype=np.float32)
        data[:, 0] = data[:, 0] < 0.5
    else:
        path = os.path.join(directory, f"sgmcmc_bench_{rows}.npy")
        if not os.path.exists(path):
            out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, d))
            for a in range(0, rows, 1_000_000):
                b = min(rows, a + 1_000_000)
                out[a:b] = rng.random((b - a, d), dtype=np.float32)
            out[:, 0] = out[:, 0] < 0.5
            out.flush()
            del out
        data = np.load(path, mmap_mode="r")
    dataset = {"X": data[:, 1:], "y": data[:, 0]}
    seconds, before, peak = peak_rss_anon(
        lambda: sgmcmc.sgld(log_lik, dataset, start(), 5e-6, log_prior, 500, iters, verbose=False, seed=1), every=0.02
    )
    data_gb = rows * d * 4 / 1e9
    extra = (peak - before) / 1e9
    print(
        f"{kind:>9}: data {data_gb:.2f} GB, RssAnon before {before / 1e9:.2f} GB, peak {peak / 1e9:.2f} GB, "
        f"extra {extra:.2f} GB = {extra / data_gb:.3f} × data (target ≤ 0.15 × data + 0.4 GB = "
        f"{0.15 * data_gb + 0.4:.2f} GB); RssFile now {rss_bytes('RssFile') / 1e9:.2f} GB; {seconds:.1f} s"
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--case", choices=["unaligned", "memmap"])
    args = p.parse_args(argv)
    if args.case:
        case(args.case, args.rows, args.iters, args.dir)
        return
    for kind in ("unaligned", "memmap"):
        cmd = [sys.executable, __file__, "--case", kind, "--rows", str(args.rows), "--iters", str(args.iters), "--dir", args.dir]
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
