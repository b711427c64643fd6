"""What the improper-posterior check costs inside the CV set-up (issue 43.3).

Cases: scikit-learn's breast-cancer data (569 rows, 30 standardised columns + intercept; flat
prior: improper, separable), and a synthetic logistic regression with N rows (default 10^6),
d = 3 predictors + intercept, n = 100: a Normal(0, 10²) prior (the check is skipped after one
product of the prior's Hessian), a flat prior with labels drawn from the model (proper: the check
runs on the mode search's 20,000-row subsample), and a flat prior with separable labels (improper:
the subsample's verdict is confirmed on the full data). For each: the whole set-up's time
(``init_sess``: mode search, Newton steps, checks), the check's time, its log-posterior
evaluations and Hessian-vector products on the subsample, and its full-data passes; one full-data
pass timed alone for scale.
usage: python benchmarks/bench_improper.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.run import improper  # noqa: E402

COST: dict[str, float] = {}


class Counted(improper._FlatLogPosterior):
    """The check's evaluator, its counters kept after an error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        COST["exact"] = self.exact
        COST["subsample_rows"] = len(next(iter(self.hess._batches[0].values()))) * len(self.hess._batches)

    def value_grad(self, x):
        COST["evaluations"] = COST.get("evaluations", 0) + 1
        return super().value_grad(x)

    def hvp(self, x, v):
        COST["products"] = COST.get("products", 0) + 1
        return super().hvp(x, v)

    def full_value(self, x):
        COST["passes"] = COST.get("passes", 0) + 1
        return super().full_value(x)


def timed_check():
    inner = improper.check_proper

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            COST["seconds"] = time.perf_counter() - t0

    return wrapper


def log_lik(params, data):
    logits = tf.linalg.matvec(data["X"], params["beta"])
    return tf.reduce_sum(data["y"] * logits - tf.math.softplus(logits))


def normal_prior(params):
    return -0.5 * tf.reduce_sum(params["beta"] ** 2) / 100


def case(name: str, data: dict, d: int, log_prior, minibatch_size=None) -> None:
    COST.clear()
    kwargs = {} if minibatch_size is None else {"minibatch_size": minibatch_size}
    sampler = sgmcmc.sgldcv_setup(log_lik, data, {"beta": np.zeros(d, np.float32)}, 1e-6, log_prior=log_prior,
                                  verbose=False, seed=1, **kwargs)
    t0 = time.perf_counter()
    try:
        sgmcmc.init_sess(sampler)
        verdict = "proper"
    except sgmcmc.ImproperPosteriorError as e:
        verdict = f"ImproperPosteriorError {e.parameters}"
    setup = time.perf_counter() - t0
    mode = {k: v.read_value() for k, v in sampler.estimator.mode.items()}
    t0 = time.perf_counter()
    sampler.one_chain_estimator.full_data_log_post_and_gradient(mode)
    one_pass = time.perf_counter() - t0
    print(f"{name}: {verdict}; set-up {setup:.2f} s, of which the check {COST.get('seconds', 0):.2f} s "
          f"({100 * COST.get('seconds', 0) / setup:.1f} %); subsample {COST.get('subsample_rows', 0)} rows "
          f"(all rows: {COST.get('exact')}): {COST.get('evaluations', 0)} log-posterior evaluations, "
          f"{COST.get('products', 0)} Hessian-vector products; {COST.get('passes', 0)} full-data passes "
          f"(one pass {one_pass:.3f} s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    improper._FlatLogPosterior = Counted
    improper.check_proper = timed_check()

    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    bc = {"X": np.column_stack([np.ones(len(X)), X]).astype(np.float32), "y": y.astype(np.float32)}
    case("breast cancer, flat prior", bc, 31, None)

    rng = np.random.default_rng(7)
    n = args.rows
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 3))]).astype(np.float32)
    logits = X.astype(np.float64) @ np.array([-1.0, 0.8, -0.5, 0.3])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logits))).astype(np.float32)
    data = {"X": X, "y": y}
    case(f"N = {n:.0e}, Normal(0, 10²) prior", data, 4, normal_prior, 100)
    case(f"N = {n:.0e}, flat prior (proper)", data, 4, None, 100)
    case(f"N = {n:.0e}, flat prior, separable labels", {"X": X, "y": (logits > 0).astype(np.float32)}, 4, None, 100)


if __name__ == "__main__":
    main()
