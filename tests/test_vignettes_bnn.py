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
    check_comparison_table(out["digits"])


#: Bounds on the quick run's T = 1 SG-MCMC rows against HMC run A (test_bnn_keras_comparison's
#: table: agreement 0.9697-0.9933, TV 0.033-0.074 over seeds 1-3).
AGREEMENT_BOUND, TV_BOUND = 0.95, 0.1

#: The comparison table's rows in the quick run (issue 46.5; the full run adds cSGHMC + NC and
#: cSGHMC (val. T), whose code is SGHMC's: the vignette's docstring says why quick leaves them out).
COMPARISON_ROWS = {"Adam", "Deep ensemble", "SGHMC", "cSGHMC", "SGHMC + NC", "SGHMC (val. T)"}


def check_comparison_table(digits: dict) -> None:
    """The comparison table of the quick run (issue 46.5): every row present with finite scores;
    the deep ensemble's NLL at most Adam's; the T = 1 SG-MCMC rows' agreement with HMC run A above
    :data:`AGREEMENT_BOUND` and TV below :data:`TV_BOUND`; the chosen temperature in the quick grid
    {1, 0.1} and the one with the lowest validation NLL. Quick run, seeds 1-3 (``--seed``):

    ====== ================= ============================= ============================= ======
    seed   NLL Adam / DE(2)  agreement S / S+NC / cS / cS+NC TV S / S+NC / cS / cS+NC      T S/cS
    ====== ================= ============================= ============================= ======
    1      0.1109 / 0.1096   .9865 / .9731 / .9916 / .9747  .044 / .063 / .033 / .071     .1/.1
    2      0.1121 / 0.1110   .9781 / .9798 / .9933 / .9781  .047 / .057 / .033 / .071     .1/.1
    3      0.1123 / 0.1090   .9815 / .9747 / .9933 / .9697  .049 / .068 / .033 / .074     .1/.1
    ====== ================= ============================= ============================= ======

    (HMC run B against run A: 0.9983, TV 0.0124; the quick noise-corrected rows run 60 iterations.
    The quick SGHMC + NC and T = 0.1 rows now run in graph mode (the vignette's ``graph_side_rows``,
    to spare XLA's compile): S+NC agreement / TV .9680 / .066, .9815 / .057, .9680 / .063 over
    seeds 1-3, T = 0.1 chosen at every seed, val.-T accuracy .968 / .970 / .970; the other rows are
    their XLA runs, unchanged, as in the table.
    Measured with cSGHMC's NC and validation-T rows, which the quick run no longer has: removing
    them changes no other row's numbers — each row is its own sampler and seed.)
    The deep-ensemble bound has small margins (0.0013 / 0.0011 / 0.0033): two networks' averaged
    probabilities; it is what the issue asks of the baseline. What they catch: agreement against a
    shuffled reference (rows of HMC run A permuted: see the commit message). What they do not:
    the targets' verdicts (printed, not asserted: the quick run is too short to judge them)."""
    table = digits["table"]
    assert COMPARISON_ROWS <= set(table), sorted(table)
    for label in COMPARISON_ROWS:
        row = table[label]
        assert all(np.isfinite(row[k]) for k in ("accuracy", "nll", "ece", "agreement", "tv", "seconds")), (label, row)
    assert table["Deep ensemble"]["nll"] <= table["Adam"]["nll"], (table["Deep ensemble"], table["Adam"])
    assert digits["hmc"]["floor_agreement"] > 0.99
    for label in ("SGHMC", "cSGHMC", "SGHMC + NC"):
        assert table[label]["temperature"] == 1.0 and table[label]["agreement"] > AGREEMENT_BOUND, (label, table[label])
        assert table[label]["tv"] < TV_BOUND, (label, table[label])
    for label, chosen in digits["temperature"].items():
        assert chosen["chosen"] in (1.0, 0.1) and table[f"{label} (val. T)"]["temperature"] == chosen["chosen"], chosen
        assert chosen["val_nll"][chosen["chosen"]] == min(chosen["val_nll"].values()), chosen
    assert table["SGHMC + NC"]["noise_correction"] and 0 <= table["SGHMC + NC"]["clipped"] <= 1
    assert set(digits["targets"]) == {"beats_adam", "near_floor"}
# == end bnn_keras ===========================================================================
