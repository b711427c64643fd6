"""Regenerates tests/data/preconditioned_reference_band.npz, the band of sd ratios that
test_preconditioned.py::test_moments_match_exact_posterior_and_reference judges the library's
pSGLD and HAMCMC against (it was recomputed at every run: 30 numpy reference chains × 2,000
iterations per method, ~15-40 s).

reference_preconditioned.reference_band for each method (seeds 0-2, K = 10 chains each, the
test's model and settings): the per-coordinate min and max of sampled sd / exact sd, stored as
``{method}_lo`` and ``{method}_hi``. Pure numpy with seeded generators: it reproduces the file.

Run from the repository root: ``python tests/make_preconditioned_reference.py [out.npz]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from reference_preconditioned import BAND_FILE, CASES, reference_band  # noqa: E402


def main(out: Path = BAND_FILE) -> None:
    arrays = {}
    for method in CASES:
        arrays[f"{method}_lo"], arrays[f"{method}_hi"] = reference_band(method)
        print(method, "band", arrays[f"{method}_lo"], arrays[f"{method}_hi"])
    np.savez(out, **arrays)
    print("wrote", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else BAND_FILE)
