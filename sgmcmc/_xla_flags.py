"""XLA's CPU code generation for the package's programs: classic emitters, no FMA contraction.

Two flags join ``XLA_FLAGS`` at ``import sgmcmc`` on x86-64 (``sgmcmc/__init__.py``):

* ``--xla_cpu_use_fusion_emitters=false``. TensorFlow 2.21's XLA lowers each CPU fusion through
  its newer MLIR "fusion emitters" by default. For the package's chunk programs (a ``while`` loop
  of ~40 small elementwise fusions: the update, the counter-based random numbers, the checks)
  that lowering is most of the compile time, and every new sampler compiles once. XLA's classic
  elemental emitters compile the same programs ~40% faster.
* ``--xla_cpu_max_isa=AVX``. With the classic emitters, the generated loops contract a·b + c into
  one fused multiply-add (AVX2/AVX-512 FMA) in their vectorised bodies but not in their scalar
  tails, so whether an element is rounded once or twice depended on the array's length: chain 1
  of 2 differed from chain 1 of 4 in the last bit (tests/test_data_path.py), against SPEC §4
  (chain k does not depend on K). Capping XLA's generated code at AVX (no FMA) rounds every
  element alike. TensorFlow's own kernels (Eigen matrix products) are built for AVX anyway.

Measured (benchmarks/bench_xla_compile.py, benchmarks/RESULTS.md "Round 6, session 6"): nine fresh
samplers' XLA compile 6.2 s → 3.6 s with the classic emitters, with or without the AVX cap
(medians of 3; the same bits without the cap); covertype-shaped SGLD's compiled loop as fast
(81–108 µs/it against 84–96, noise); the suite 1,202 → 958–1,035 s (CPU 2,271 → 1,807–1,940 s).
The capped ISA changes bits (no FMA): 32 of the 61 recorded chains of tests/chain_fingerprints.py
were re-recorded.

XLA reads ``XLA_FLAGS`` once, at the process's first XLA compilation: the flags have no effect if
something compiled with XLA before ``import sgmcmc``. They apply to the whole process (a user's
own ``jit_compile=True`` functions too, and the processes it starts, which inherit the
environment). A user who names a flag in ``XLA_FLAGS`` keeps their value (e.g.
``XLA_FLAGS=--xla_cpu_use_fusion_emitters=true`` restores XLA's default emitters).
Other machines (aarch64) keep XLA's defaults: the ISA cap is x86's.
"""

from __future__ import annotations

import os
import platform
from typing import MutableMapping

#: Flag name → value, added unless ``XLA_FLAGS`` already names the flag.
FLAGS = {"xla_cpu_use_fusion_emitters": "false", "xla_cpu_max_isa": "AVX"}


def with_package_flags(xla_flags: str) -> str:
    """``xla_flags`` with each of :data:`FLAGS` appended that it does not already name."""
    added = [f"--{name}={value}" for name, value in FLAGS.items() if name not in xla_flags]
    return " ".join([xla_flags.strip(), *added]).strip()


def set_package_flags(environ: MutableMapping[str, str] = os.environ, machine: str | None = None) -> None:
    """Set ``environ["XLA_FLAGS"]`` to :func:`with_package_flags` of its value, on x86-64 only."""
    if (machine or platform.machine()).lower() not in ("x86_64", "amd64"):
        return
    environ["XLA_FLAGS"] = with_package_flags(environ.get("XLA_FLAGS", ""))
