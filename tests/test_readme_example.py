"""The README's first example, run as written: no StepsizeWarning (the issue found the README's
stepsize gave a posterior far too wide without a word), and the posterior it prints is right.

Exact posterior of mu: N(sum(x) / (N + 1/100), 1 / (N + 1/100)) with N = 10^5 (sd 0.00316).
The example's seed 1 gives mean 0.4951 and sd ratio 1.09 (1.07 expected from the stepsize's
discretisation, the rest minibatch noise); with the former stepsize 1e-5 the CV sampler warns
(sd 1.15x along the only direction) and this test fails (checked).
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import sgmcmc

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_without_warning_and_is_right(capsys):
    block = re.search(r"## Example\s+```python\n(.*?)```", README.read_text(), re.S).group(1)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", sgmcmc.StepsizeWarning)
        exec(compile(block.replace("seed=1)", "seed=1, verbose=False)"), "README example", "exec"), namespace)
    draws = namespace["out"]["mu"][500:]
    x = namespace["x"]
    precision = len(x) + 1 / 100
    exact_mean, exact_sd = x.sum() / precision, precision**-0.5
    assert abs(draws.mean() - exact_mean) < 3 * exact_sd, (draws.mean(), exact_mean, exact_sd)
    assert 0.8 < draws.std() / exact_sd < 1.3, draws.std() / exact_sd


def _hierarchical_block(seed: int = 1) -> dict:
    block = re.search(r"### Parameters on different scales.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    namespace: dict = {}
    code = block.replace("seed=1)", f"seed={seed}, verbose=False)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sgmcmc.StepsizeWarning)
        exec(compile(code, "README hierarchical example", "exec"), namespace)
    namespace["warnings"] = [str(w.message) for w in caught if issubclass(w.category, sgmcmc.StepsizeWarning)]
    return namespace


def test_readme_hierarchical_example_warns_and_its_dict_mixes_mu():
    """Issue 23.5's hierarchical case (README, "Parameters on different scales"), run as written.
    check_stepsize with one stepsize says mu mixes 25x slower than theta (block curvatures
    J + 1/100 = 20.01 and n + 1 = 501, exact), and sgld with the suggested dict recovers mu's
    exact posterior: marginally ybar_j ~ N(mu, 1 + 1/n), so mu | y ~ N(sum(ybar)/(1 + 1/n)/P,
    1/P), P = J/(1 + 1/n) + 1/100 (sd 0.224). Seeds 1-3 of the run: mean errors -0.011, +0.022,
    +0.009 posterior sd, sd ratios 1.098, 1.096, 1.099, bulk ESS 7,935, 8,184, 7,833 of 40,000
    (bounds: 0.5 sd, 0.9-1.3, 2,000). With stepsize 1e-3 for both (the old way) mu's bulk ESS
    was 215 (seed 1). Against the pre-change curvature.py (a patched copy) this test fails: no
    warning, no safe_stepsize_per_parameter."""
    ns = _hierarchical_block()
    assert len(ns["warnings"]) == 1, ns["warnings"]
    ratio = float(re.search(r"leaves 'mu' mixing about ([\d.]+)× slower than 'theta'", ns["warnings"][0]).group(1))
    assert ratio == pytest.approx(501.0 / 20.01, rel=0.01)
    J, n, y = ns["J"], ns["n"], ns["y"]
    ybar = y.astype(np.float64).reshape(J, n).mean(axis=1)
    precision = J / (1 + 1 / n) + 1 / 100
    exact_mean, exact_sd = ybar.sum() / (1 + 1 / n) / precision, precision**-0.5
    table = sgmcmc.summary(ns["out"]).loc["mu"]
    assert abs(table["mean"] - exact_mean) < 0.5 * exact_sd, (table["mean"], exact_mean)
    assert 0.9 < table["sd"] / exact_sd < 1.3, table["sd"] / exact_sd
    assert table["ess_bulk"] > 2000, table["ess_bulk"]


def test_readme_example_imports_print_no_tensorflow_startup_lines():
    """Issue 29.7: the README's first example imported TensorFlow before sgmcmc, so TensorFlow's
    start-up lines (absl's notice, cpu_feature_guard, cudart_stub) reached the user's terminal
    before sgmcmc could quiet them. Its import lines, run as a fresh process with the user's
    environment (no TF_CPP_MIN_LOG_LEVEL), print none of them. Fails on the former order
    (checked: "import numpy as np, tensorflow as tf, tensorflow_probability as tfp, sgmcmc")."""
    import os
    import subprocess
    import sys

    block = re.search(r"## Example\s+```python\n(.*?)```", README.read_text(), re.S).group(1)
    imports = "\n".join(line for line in block.splitlines() if line.startswith("import "))
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", imports + "\nprint('imported')"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr
    assert not [line for line in done.stderr.splitlines() if sgmcmc._quiet.is_startup_line(line)], done.stderr
