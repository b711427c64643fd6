"""The README's main job (SGLD-CV logistic regression) on generated data with known
coefficients: its test log-loss must be that of the true model."""

import importlib.util
from pathlib import Path

import numpy as np

MAIN_JOB = Path(__file__).resolve().parents[1] / "vignettes" / "main_job.py"


def test_main_job_matches_the_true_model(tmp_path):
    spec = importlib.util.spec_from_file_location("main_job", MAIN_JOB)
    main_job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main_job)
    out = main_job.main(["--iters", "1000", "--iters-opt", "2000", "--synthetic", "--out", str(tmp_path)])
    assert Path(out["figure"]).is_file()
    # 571,012 training rows pin 55 coefficients to ~1e-3, so the posterior predictive's
    # log-loss is the true model's up to test-set noise of the same order.
    assert out["log_loss"] < np.log(2.0) - 0.1
    assert abs(out["log_loss"] - out["true_log_loss"]) < 0.005, out
