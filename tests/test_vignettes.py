"""The vignettes' ``--quick`` versions run, write their figures and give sane headline numbers.

Each script's ``main(argv)`` is called in-process (TensorFlow is imported once). The full
versions of the data-set vignettes must stop with a clear message and exit status 2 when the
data cannot be had; that is checked by making ``get_dataset`` fail, never by going online.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

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


def test_getting_started(tmp_path):
    out = run_quick("getting_started", tmp_path)
    assert_pngs(tmp_path, "getting_started_traces.png")
    assert out["identical"], "stepsize dict / minibatch count should give the same chain as number / proportion"
    for key in ("flat_mean", "prior_mean", "cv_mean"):
        assert np.all(np.abs(out[key] - out["sample_mean"]) < 0.03), key
    assert out["caught"] == {
        "float64 constant in log_lik": "TypeError",
        "stepsize dict with a wrong name": "ValueError",
        "minibatch larger than N": "ValueError",
    }


def test_mv_gauss(tmp_path):
    out = run_quick("mv_gauss", tmp_path)
    assert_pngs(tmp_path, "mv_gauss_density.png")
    assert np.all(np.abs(out["mean"] - out["exact_mean"]) < 2 * out["exact_sd"])
    # SGLD with a constant stepsize overstates the spread, but not wildly
    assert np.all((out["sd"] > 0.8 * out["exact_sd"]) & (out["sd"] < 4 * out["exact_sd"]))


def test_gauss_mixture(tmp_path):
    out = run_quick("gauss_mixture", tmp_path)
    assert_pngs(tmp_path, "gauss_mixture_sghmc.png", "gauss_mixture_methods.png")

    a = out["A"]  # SGHMC puts samples near both components (0, 0) and (0.1, 0.1)
    assert a["near_first"] > 0.2 and a["near_second"] > 0.2, a
    for key in ("theta1_mean", "theta2_mean"):
        assert np.linalg.norm(a[key] - [0.05, 0.05]) < 0.2, a[key]

    b = out["B"]
    assert set(b["table"]) == {"sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv"}
    assert np.linalg.norm(b["reference_mean"] - [0.05, 0.05]) < 0.15
    assert all(np.isfinite(row["mmd2"]) and row["mmd2"] < 1 for row in b["table"].values())
    # SGLD explores the whole posterior (thesis Fig. 4.6.1)
    assert b["table"]["sgld"]["mmd2"] < 0.15


def test_logistic_regression(tmp_path):
    out = run_quick("logistic_regression", tmp_path)
    assert_pngs(tmp_path, "logistic_regression_sgldcv.png", "logistic_regression_methods.png")
    baseline = np.log(2)  # predicting 1/2 everywhere
    assert out["sgldcv"]["mean_log_loss"] < out["true_coef_log_loss"] + 0.02
    assert len(out["sgldcv"]["log_loss"]) == 100  # every 10th of 1,000 kept iterations
    for method, res in out["methods"].items():
        assert np.all(np.isfinite(res["log_loss"])), method
        assert res["mean_log_loss"] < baseline - 0.1, (method, res["mean_log_loss"])


def test_bnn_mnist(tmp_path):
    out = run_quick("bnn_mnist", tmp_path)
    assert_pngs(tmp_path, "bnn_mnist_log_loss.png")
    assert set(out["methods"]) == {"sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv"}
    for method, res in out["methods"].items():
        assert res["accuracy"] > 0.5, (method, res["accuracy"])  # chance is 0.1
        assert res["mean_params_accuracy"] > 0.5, (method, res["mean_params_accuracy"])
        assert res["final_log_loss"] < np.log(10), method  # below the uniform predictor's


def test_diagnostics(tmp_path):
    out = run_quick("diagnostics", tmp_path)
    assert_pngs(tmp_path, "diagnostics_traces.png", "diagnostics_summary.png", "diagnostics_stein_thinning.png")
    sgld, cv = out["methods"]["sgld"], out["methods"]["sgldcv"]
    for res in (sgld, cv):
        table = res["summary"]
        assert len(table) == 55 and np.all(np.isfinite(table["r_hat"]))
        assert res["not_mixed"] == list(table.index[(table["r_hat"] > 1.01) | (table["ess_bulk"] < 400)])
        # what the vignette says: the intercept (identified with the one-hot blocks only
        # through the prior) has not mixed from dispersed starts in the quick run
        assert "bias" in res["not_mixed"] and table.loc["bias", "r_hat"] > 1.1
    # exact-score KSD: SGLD-CV closer to the posterior than SGLD; Stein thinning beats equal spacing
    assert cv["ksd"] < sgld["ksd"], (cv["ksd"], sgld["ksd"])
    assert out["stein"]["ksd_stein"] < out["stein"]["ksd_equally_spaced"], out["stein"]
    # ZV: SGLD-CV's accurate gradients reduce the variance more than SGLD's noisy ones
    assert cv["zv_median_reduction"] > sgld["zv_median_reduction"] > 1.0


@pytest.mark.parametrize("name", ["logistic_regression", "bnn_mnist", "diagnostics"])
def test_full_version_without_data_exits_2(name, tmp_path, monkeypatch, capsys):
    import sgmcmc.datasets

    def unavailable(dataset_name, **kwargs):
        raise sgmcmc.datasets.DatasetUnavailableError(
            f"{dataset_name}: not in the cache directory /nowhere and no download possible"
        )

    monkeypatch.setattr(sgmcmc.datasets, "get_dataset", unavailable)
    module = importlib.import_module(name)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert not (tmp_path / "out").exists()  # nothing written
    message = capsys.readouterr().err
    assert "not available" in message and "/nowhere" in message and "--quick" in message


def test_readme_names_every_vignette_and_figure():
    readme = (VIGNETTES / "README.md").read_text()
    for script in ("getting_started.py", "mv_gauss.py", "gauss_mixture.py", "logistic_regression.py", "bnn_mnist.py",
                   "diagnostics.py", "ill_conditioned.py", "big_data.py", "distributed.py"):
        assert (VIGNETTES / script).is_file() and script in readme, script
    for figure in ("getting_started_traces.png", "mv_gauss_density.png", "gauss_mixture_sghmc.png",
                   "gauss_mixture_methods.png", "logistic_regression_methods.png", "bnn_mnist_log_loss.png",
                   "diagnostics_summary.png", "ill_conditioned_error_vs_time.png", "big_data_posterior.png",
                   "distributed_posterior.png"):
        assert figure in readme, figure


# == simplex samplers (scir / sgrld) vignettes ===========================================

def test_sparse_dirichlet(tmp_path):
    out = run_quick("sparse_dirichlet", tmp_path)
    assert_pngs(tmp_path, "sparse_dirichlet_boxplot.png", "sparse_dirichlet_ks.png")
    med = out["medians"]  # a sparse component: exact posterior median ~1e-6; SGRLD's far too large
    assert med["sgrld"] > 100 * med["exact"] and med["scir"] < 100 * med["exact"]
    assert np.all(out["ks"]["sparse_scir"] < out["ks"]["sparse_sgrld"])


def test_lda(tmp_path):
    out = run_quick("lda", tmp_path)
    assert_pngs(tmp_path, "lda_perplexity.png")
    p = out["perplexity"]
    assert p["scir"][-1] <= p["scir"][0]
    assert p["scir"][-1] < 1.1 * out["true_perplexity"]
    assert out["topic_tv"]["scir"] < 0.1 and out["topic_tv"]["scir"] < out["topic_tv"]["sgrld"]


# == regression_constraints (issue 13: constraints) ==========================================
def test_regression_constraints(tmp_path):
    out = run_quick("regression_constraints", tmp_path)
    assert_pngs(tmp_path, "regression_constraints_sigma.png", "regression_constraints_tau.png")
    a, b = out["A"], out["B"]
    # noise sd: SGLD-CV's quantiles within a few posterior sds of the exact ones
    assert np.all(np.abs(a["sigma_q"] - a["exact_sigma_q"]) < 3 * a["exact_sd"]), (a["sigma_q"], a["exact_sigma_q"])
    # group-level sd: positive, and the median near the full-batch reference's
    assert b["tau_min"] > 0
    assert abs(b["tau_q"][1] - b["ref_tau_q"][1]) < 0.25 * b["ref_tau_q"][1], (b["tau_q"], b["ref_tau_q"])
    # a run saved half way and resumed by a new sampler is the uninterrupted run
    assert out["C"]["max_difference"] == 0.0
    assert_pngs(tmp_path, "regression_constraints_resume.png")
# == end regression_constraints ==============================================================


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


# == big_data (issue 20: datasets on disk, write_npy / open_npy) ==============================
def test_big_data(tmp_path):
    out = run_quick("big_data", tmp_path)
    assert_pngs(tmp_path, "big_data_posterior.png", "big_data_memory.png", "big_data_throughput.png")
    assert not (tmp_path / "data" / "parquet").exists()  # parts deleted after the conversion
    assert sorted(p.name for p in (tmp_path / "data" / "npy").iterdir()) == ["X.npy", "y.npy"]
    # the exact posterior's mean is ~N(truth, sd^2) per coefficient: 4.5 sds over 11 is a
    # 1-in-10^4 event for a correct chain, while a wrong one (rows shifted, y misaligned) is off by many
    assert np.all(np.abs(out["z_true"]) < 4.5), out["z_true"]
    # SGLD-CV's mean against the Laplace mode: Monte Carlo error (~0.1 sd for 800 draws of an
    # autocorrelation time ~15) plus the small stepsize bias
    assert np.all(np.abs(out["z_mode"]) < 0.6), out["z_mode"]
    assert np.all((out["sd_ratio"] > 0.7) & (out["sd_ratio"] < 1.5)), out["sd_ratio"]
    assert all(rate > 0 for rate in out["its_per_s"].values())
# == end big_data =============================================================================


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


# == bnn_keras (issue 32: Keras models, posterior ensembles) =================================
def test_bnn_keras(tmp_path):
    """Digits, Adam with early stopping against an SGHMC and a cSGHMC ensemble of the same Keras
    MLP. Quick run (the vignette's default seed 1; --seed 2 and 3 by hand):

    ======== ======================= ======================= =======================
    seed     accuracy A / S / cS     H rotated A / S / cS    H noise A / S / cS
    ======== ======================= ======================= =======================
    1        0.973 / 0.973 / 0.973   0.032 / 0.943 / 0.236   0.499 / 1.345 / 1.157
    2        0.975 / 0.973 / 0.975   0.036 / 0.740 / 0.251   0.502 / 1.234 / 1.132
    3        0.973 / 0.966 / 0.976   0.064 / 0.789 / 0.312   0.568 / 1.332 / 1.151
    ======== ======================= ======================= =======================

    (nats; on the test digits 0.17-0.19 for every method and seed: cSGHMC 0.170, 0.165,
    0.165). Adam maps nearly every rotated digit to one class. Bounds: accuracy > 0.9 and
    finite NLL, ECE, Brier for all; each ensemble's entropy on noise above twice its
    in-distribution one and above Adam's; on rotated digits SGHMC's above twice its
    in-distribution one and above Adam's, cSGHMC's (1.39 / 1.52 / 1.89 × its in-distribution one)
    above 1.25 × that and above 3 × Adam's (7.4 / 7.0 / 4.9 × here). What they catch: a cSGHMC
    "ensemble" of one network (1 chain, 1 cycle, exploration 0.99, thin 1, seed 1: rotated 0.118,
    test 0.117, noise 0.840 — it fails the 1.25 ×; the bound 1 × let it pass). What they do not
    catch: a noise-free cSGHMC (exploration 0.99, thin 1, 2 chains × 2 cycles, i.e. 4 momentum-SGD
    networks: rotated 0.205 / 0.191 / 0.259 over seeds 1-3 against 0.145 / 0.148 / 0.145 in
    distribution, 1.29-1.79 ×): on digits the ensemble's OOD spread comes from its several end
    points, not from the sampling stages' noise."""
    out = run_quick("bnn_keras", tmp_path, "--mnist", "no")
    assert_pngs(tmp_path, "bnn_keras_digits_calibration.png", "bnn_keras_digits_entropy.png")
    table = out["digits"]["table"]
    assert {"Adam", "SGHMC", "cSGHMC"} <= set(table)
    for label, row in table.items():
        assert row["accuracy"] > 0.9, (label, row)
        assert all(np.isfinite(row[k]) for k in ("nll", "ece", "brier")), (label, row)
    adam = table["Adam"]
    for label, rotated in (("SGHMC", (2, 1)), ("cSGHMC", (1.25, 3))):
        ensemble = table[label]
        assert ensemble["entropy_noise"] > 2 * ensemble["entropy_test"], (label, ensemble)
        assert ensemble["entropy_noise"] > adam["entropy_noise"], (label, ensemble, adam)
        times_test, times_adam = rotated
        assert ensemble["entropy_rotated"] > times_test * ensemble["entropy_test"], (label, ensemble)
        assert ensemble["entropy_rotated"] > times_adam * adam["entropy_rotated"], (label, ensemble, adam)
# == end bnn_keras ===========================================================================
