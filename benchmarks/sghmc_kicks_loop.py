"""CPU seconds of a fresh SGHMC sampler's first whole-chain call: the L kicks in a loop
(``BoundEstimator.repeat``, the package's) against the kicks written out in Python (the kernel
before the loop, patched in). Both give the same chain bit for bit (tests/test_inner_steps.py).

Usage: ``python benchmarks/sghmc_kicks_loop.py [--repeats 3]``. Process CPU time (user + system,
all threads) per call, the compiled-program cache cleared before each, the variants alternated
in one process; the first call of the process (TensorFlow's own warm-up) is dropped.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chain_fingerprints import regression, sample  # noqa: E402
from test_inner_steps import written_out  # noqa: E402

from sgmcmc.api.reuse import clear_compiled_cache  # noqa: E402
from sgmcmc.step.dynamics import sghmc  # noqa: E402


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = regression()
    looped = sghmc.SGHMC.update_at
    sample("sghmc", "plain", dict(stepsize=2e-4), model, seed=3)  # warm-up, dropped
    print("method    L  loop CPU s  written-out CPU s  (medians)")
    for method, estimator in (("sghmc", "plain"), ("sghmccv", "cv")):
        for L in (1, 5, 10):
            times = {"loop": [], "written out": []}
            for _ in range(args.repeats):
                for variant, update_at in (("loop", looped), ("written out", written_out)):
                    sghmc.SGHMC.update_at = update_at
                    clear_compiled_cache()
                    start = cpu()
                    sample(method, estimator, dict(stepsize=2e-4, L=L), model, seed=3)
                    times[variant].append(cpu() - start)
            sghmc.SGHMC.update_at = looped
            print(f"{method:8s} {L:2d}  {statistics.median(times['loop']):10.2f}  "
                  f"{statistics.median(times['written out']):17.2f}", flush=True)


if __name__ == "__main__":
    main()
