"""XLA compile cost of new samplers with XLA's CPU defaults (fusion emitters), with the classic
emitters (``--xla_cpu_use_fusion_emitters=false``), and with the package's flags (classic
emitters and ``--xla_cpu_max_isa=AVX``: what ``import sgmcmc`` sets, sgmcmc/_xla_flags.py).

Each variant runs in fresh processes, alternated, ``--repeats`` times: nine new samplers (sgld,
sghmc, sgldcv on three 1-d Gaussian models of tests/conftest.py, 500 iterations each, SGMCMC_XLA=1).
Printed per variant (medians): XLA's own compile time summed over the nine compilations (from
TensorFlow's ``device_compiler`` log), the process CPU of the nine runs (import excluded), and a
fingerprint of the draws (the emitters change no bit; the ISA cap, no FMA, does).

Usage: python benchmarks/bench_xla_compile.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = f"""
import hashlib, sys, time, warnings
sys.path.insert(0, {str(ROOT / "tests")!r})
warnings.simplefilter("ignore")
import numpy as np
from conftest import gaussian_1d
import sgmcmc
t0 = time.process_time()
draws = []
for seed in range(3):
    m = gaussian_1d(seed=seed + 10)
    for name in ["sgld", "sghmc", "sgldcv"]:
        kw = dict(stepsize=1e-5, n_iters=500, log_prior=m.log_prior, seed=2, verbose=False)
        if name.endswith("cv"):
            kw["opt_stepsize"] = 1e-5
        draws.append(np.asarray(getattr(sgmcmc, name)(m.log_lik, m.dataset, m.params, **kw)["theta"]))
print("CPU", time.process_time() - t0)
print("FINGERPRINT", hashlib.sha256(np.concatenate([d.ravel() for d in draws]).tobytes()).hexdigest()[:16])
"""

VARIANTS = {
    "XLA's defaults": "--xla_cpu_use_fusion_emitters=true --xla_cpu_max_isa=AVX512",
    "classic emitters": "--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX512",
    "classic emitters, AVX (sgmcmc's)": "--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX",
}


def run(xla_flags: str) -> tuple[float, float, str]:
    env = dict(os.environ, XLA_FLAGS=xla_flags, SGMCMC_XLA="1", TF_CPP_MIN_LOG_LEVEL="0",
               TF_CPP_VMODULE="device_compiler=1")
    done = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, check=True)
    compile_ms = [float(ms) for ms in re.findall(r"Compilation of XLA executable time: ([0-9.]+) ms", done.stderr)]
    cpu = float(re.search(r"^CPU (\S+)", done.stdout, re.M).group(1))
    fingerprint = re.search(r"^FINGERPRINT (\S+)", done.stdout, re.M).group(1)
    return sum(compile_ms) / 1000, cpu, f"{len(compile_ms)} compilations, draws {fingerprint}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, flags in VARIANTS.items():
            results[name].append(run(flags))
    for name, runs in results.items():
        compile_s = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:32s} XLA compile {compile_s:5.2f} s  run CPU {cpu:5.2f} s  "
              f"(runs: {', '.join(f'{r[0]:.2f}/{r[1]:.2f}' for r in runs)}; {runs[0][2]})")


if __name__ == "__main__":
    main()
