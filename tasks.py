#!/usr/bin/env python3
"""The project's commands, needing nothing but Python 3.10+ and pip:

    python3 tasks.py demo   # the main job: sgmcmc.sample on a logistic regression, summary + plot
    python3 tasks.py test   # the test suite
    python3 tasks.py vignette NAME [--quick]   # vignettes/NAME.py (e.g. mv_gauss, main_job)

Each creates the virtualenv ``.venv`` from pyproject.toml when it is missing or older than
pyproject.toml, then runs inside it. Extra arguments are passed on (to pytest for ``test``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".installed"
PYTHON = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv() -> None:
    if STAMP.exists() and STAMP.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime:
        return
    if not PYTHON.exists():
        print(f"creating {VENV} ...", flush=True)
        venv.create(VENV, with_pip=True)
    print("installing sgmcmc and its dependencies into .venv (first run: a few minutes) ...", flush=True)
    subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([PYTHON, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"], check=True)
    STAMP.touch()


def main(argv: list[str]) -> int:
    commands = {
        "demo": [PYTHON, ROOT / "vignettes" / "main_job.py"],
        # Two worker processes (the suite's time is mostly single-threaded graph tracing); a
        # test file stays on one worker so its module-scoped fixtures are built once.
        # ``python3 tasks.py test -n 0`` runs serially.
        "test": [PYTHON, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
                 "--durations=15", ROOT / "tests"],
    }
    if argv and argv[0] == "vignette":
        names = sorted(p.stem for p in (ROOT / "vignettes").glob("*.py") if not p.stem.startswith("_"))
        if len(argv) < 2 or argv[1] not in names:
            print(f"usage: python3 tasks.py vignette NAME [--quick] [--out DIR]; NAME is one of {', '.join(names)}")
            return 2
        commands["vignette"] = [PYTHON, ROOT / "vignettes" / f"{argv[1]}.py"]
        argv = [argv[0], *argv[2:]]
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    ensure_venv()
    # TF_CPP_MIN_LOG_LEVEL is left as the user has it: when it is unset, ``import sgmcmc`` sets it
    # and also drops TensorFlow's absl start-up lines, which no environment variable reaches
    # (sgmcmc/_quiet.py); setting it here made the demo print them. The tests set it in conftest.
    return subprocess.run([*commands[argv[0]], *argv[1:]], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
