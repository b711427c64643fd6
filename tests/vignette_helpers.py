"""Helpers of the vignette tests (tests/test_vignettes*.py): run a vignette's ``--quick``
version in-process and check the figures it wrote.

The vignette tests are split over several files only so that ``pytest -n 2 --dist loadfile``
can put the slow ones on different workers (a file runs on one worker).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

VIGNETTES = Path(__file__).resolve().parents[1] / "vignettes"
sys.path.insert(0, str(VIGNETTES))


def run_quick(name: str, tmp_path: Path, *extra: str) -> dict:
    module = importlib.import_module(name)
    result = module.main(["--quick", "--out", str(tmp_path), *extra])
    assert isinstance(result, dict)
    return result


def assert_pngs(tmp_path: Path, *names: str) -> None:
    for name in names:
        path = tmp_path / name
        assert path.is_file(), f"{name} was not written"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
