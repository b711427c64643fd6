"""The ill_conditioned and distributed vignettes' ``--quick`` versions; split from
test_vignettes.py so that loadfile can run them beside it (tests/vignette_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from vignette_helpers import assert_pngs, run_quick  # noqa: E402


# == ill_conditioned (issue 9: preconditioned samplers, tune_stepsize) ========================
def test_ill_conditioned(tmp_path):
    out = run_quick("ill_conditioned", tmp_path)
    assert_pngs(tmp_path, "ill_conditioned_error_vs_time.png")
    assert out["condition"] > 1e3
    table = out["tune_table"]
    final = table[table["round"] == table["round"].max()]
    assert out["tuned_stepsize"] == final.loc[final["ksd"].idxmin(), "stepsize"]  # the last round's best
    assert out["tuned_stepsize"] < 4 / out["lambda_max"]  # inside SGLD's stability limit
    # C (issue 22): 26 correlated parameters, exact posterior. correlated_26(quick, seed) over seeds
    # 1, 11, 21, 31, 41: OSGLD (auto burn-in at 1,550-1,580) worst mean error 0.11-0.19 sd, sd error
    # 0.06-0.09; HAMCMC (default memory) 0.09-0.16, 0.12-0.14; SGLD-CV at the tuner's stepsize, the
    # cap (no warning), 5.5-6.4 sd: it cannot cross the flat directions in 8,000 iterations at
    # condition number 5e3. Since issue 29 its anchor and start are the exact mode (Newton steps
    # after the SGD search), so the same failure shows as a far too narrow sd along the flat
    # directions (seed 1: mean error 0.55, sd error 0.79) and the tuner's MixingWarning. The
    # vignette runs seed 1.
    c = out["case26"]
    for name in ("osgld", "hamcmc"):
        assert c[name]["mean_error"] < 0.5 and c[name]["sd_error"] < 0.3, (name, c[name])
    assert c["osgld"]["burn_in"] > 0
    assert c["sgldcv"]["stepsize"] <= c["sgldcv"]["cap"], c["sgldcv"]
    assert c["sgldcv"]["mean_error"] > 2 or c["sgldcv"]["sd_error"] > 0.5, c["sgldcv"]
    last = {r["method"]: r for r in out["rows"] if r["n_iters"] == max(x["n_iters"] for x in out["rows"])}
    assert set(last) == {"sgld", "psgld", "hamcmc", "osgld"}
    # what the vignette shows: OSGLD's preconditioner fixes what SGLD's capped stepsize cannot
    assert last["osgld"]["mean_error"] < 0.5 * last["sgld"]["mean_error"], last
    assert last["osgld"]["ksd"] < last["sgld"]["ksd"], last
    assert last["psgld"]["ksd"] < last["sgld"]["ksd"], last
# == end ill_conditioned ========================================================================


# == distributed (issue 21: rows sharded across workers) =====================================
@pytest.mark.multiworker
def test_distributed(tmp_path):
    """Two local workers with half the rows each against one process, SGLD-CV (different
    minibatch streams, so Monte Carlo agreement only). Calibration: one-process runs with seeds
    1–3 differ by at most 0.28 posterior sds over the 11 coefficients; the 2-worker run, 0.21.
    Bound 1.0. Broken variant run (no all-reduce in the estimator: each worker samples its own
    half's posterior): 8.09 sds."""
    out = run_quick("distributed", tmp_path)
    assert_pngs(tmp_path, "distributed_posterior.png", "distributed_timing.png")
    assert out["workers"] == [1, 2]
    assert out["max_mean_difference_sds"][2] < 1.0, out
    assert all(t > 0 for t in out["us_per_iteration"].values())
# == end distributed ==========================================================================
