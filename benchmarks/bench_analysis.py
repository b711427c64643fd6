"""Time and peak memory of the analysis functions at realistic sizes (SPEC §7).

- ``ksd`` on 10^4 pooled samples x d = 55 (the covertype logistic-regression size);
- ``summary`` on 4 chains x 10^4 draws x 55 components.

Peak memory is the process's peak resident set size growth over the call (``ru_maxrss``, so
TensorFlow's allocations count), measured once per function after a warm-up call on a
small input (tracing and imports excluded). Run: ``python benchmarks/bench_analysis.py``
from the repository root; ``--d100`` also runs ``ksd`` at d = 100.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from sgmcmc.analysis import ksd, summary  # noqa: E402
from sgmcmc.analysis.samples import Samples  # noqa: E402


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(label: str, fn) -> None:
    before = rss_mib()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.2f} s, peak RSS growth {rss_mib() - before:.0f} MiB (peak {rss_mib():.0f} MiB)  [{result}]")


def main() -> None:
    rng = np.random.default_rng(0)
    dims = [55, 100] if "--d100" in sys.argv else [55]
    ksd({"a": rng.normal(size=(200, 3))}, {"a": rng.normal(size=(200, 3))})  # warm-up
    summary(Samples({"a": rng.normal(size=(2, 100, 3))}, n_chains=2))
    draws = rng.normal(size=(4, 10_000, 55))
    s = Samples({"theta": draws}, n_chains=4)
    measure("summary 4 x 10^4 x 55", lambda: f"{len(s.summary())} rows")
    del s, draws
    for d in dims:
        x = rng.normal(size=(10_000, d))
        measure(f"ksd 10^4 x {d}", lambda: f"KSD {ksd({'x': x}, {'x': -x}):.4f}")


if __name__ == "__main__":
    main()
