"""The neural-network vignettes' ``--quick`` versions (bnn_mnist, bnn_keras); split from
test_vignettes.py so that loadfile can run them beside it (tests/vignette_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vignette_helpers import assert_pngs, run_quick  # noqa: E402


def test_bnn_mnist(tmp_path):
    out = run_quick("bnn_mnist", tmp_path)
    assert_pngs(tmp_path, "bnn_mnist_log_loss.png")
    assert set(out["methods"]) == {"sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv"}
    for method, res in out["methods"].items():
        assert res["accuracy"] > 0.5, (method, res["accuracy"])  # chance is 0.1
        assert res["mean_params_accuracy"] > 0.5, (method, res["mean_params_accuracy"])
        assert res["final_log_loss"] < np.log(10), method  # below the uniform predictor's


# == bnn_keras (issue 32: Keras models, posterior ensembles) =================================
def test_bnn_keras(tmp_path):
    """Digits, Adam with early stopping against an SGHMC ensemble of the same Keras MLP. Quick
    run (seed fixed): accuracy 0.973 both; mean predictive entropy on rotated digits Adam 0.03
    nats (it maps every rotated digit to one class), SGHMC 0.94; on uniform noise 0.50 and 1.35;
    on the test digits 0.18 both. Bounds: accuracy > 0.9, the ensemble's OOD entropies above
    twice its in-distribution one and above Adam's."""
    out = run_quick("bnn_keras", tmp_path, "--mnist", "no")
    assert_pngs(tmp_path, "bnn_keras_digits_calibration.png", "bnn_keras_digits_entropy.png")
    table = out["digits"]["table"]
    assert {"Adam", "SGHMC"} <= set(table)
    for label, row in table.items():
        assert row["accuracy"] > 0.9, (label, row)
        assert all(np.isfinite(row[k]) for k in ("nll", "ece", "brier")), (label, row)
    ensemble, adam = table["SGHMC"], table["Adam"]
    for ood in ("entropy_rotated", "entropy_noise"):
        assert ensemble[ood] > 2 * ensemble["entropy_test"] and ensemble[ood] > adam[ood], (ood, ensemble, adam)
# == end bnn_keras ===========================================================================
