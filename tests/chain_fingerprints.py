"""Short chains of every public sampler × estimator for fixed seeds: the refactoring record.

``python tests/chain_fingerprints.py write`` stores them in ``tests/data/chain_fingerprints.npz``;
``python tests/chain_fingerprints.py`` recomputes them and names any that changed (~100 s: a
record for refactoring, run by hand, not part of the suite). A refactoring
of the house (issue 30) must leave every one of them as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import sgmcmc

STORE = Path(__file__).parent / "data" / "chain_fingerprints.npz"
N, D = 120, 3
N_ITERS = 12


def regression():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, D))
    y = (rng.uniform(size=N) < 1 / (1 + np.exp(-x @ np.array([1.0, -1.5, 0.5])))).astype(np.float64)
    import tensorflow as tf

    def log_lik(params, data):
        logits = tf.linalg.matvec(data["x"], params["b"]) + params["c"]
        return tf.reduce_sum(data["y"] * logits - tf.math.softplus(logits))

    def log_prior(params):
        return -0.5 * tf.reduce_sum(params["b"] ** 2) - 0.5 * params["c"] ** 2

    return {"x": x, "y": y}, log_lik, log_prior


GRADIENT = {
    "sgld": dict(stepsize=2e-3),
    "sghmc": dict(stepsize=2e-4, L=3),
    "sgnht": dict(stepsize=2e-4),
    "psgld": dict(stepsize=2e-3),
    "hamcmc": dict(stepsize=2e-3),
    "osgld": dict(c=0.5),
    "baoab": dict(stepsize=2e-3),
    "sgldcv": dict(stepsize=2e-3),
    "sghmccv": dict(stepsize=2e-4, L=3),
    "sgnhtcv": dict(stepsize=2e-4),
}
ESTIMATORS = ("plain", "svrg", "saga", "cv")


def cases():
    for name, args in GRADIENT.items():
        for estimator in ESTIMATORS if not name.endswith("cv") else ("cv",):
            yield name, estimator, args


def sample(name: str, estimator: str, args: dict, model: tuple, seed: int = 11):
    """One case's run (raises what the dynamics raises for a pairing it refuses)."""
    dataset, log_lik, log_prior = model
    kw = dict(args)
    if not name.endswith("cv"):
        kw["estimator"] = estimator
        if estimator == "cv":
            kw["opt_stepsize"] = 1e-3
    else:
        kw["opt_stepsize"] = 1e-3
    return getattr(sgmcmc, name)(
        log_lik, dataset, {"b": np.zeros(D), "c": np.float64(0.0)}, log_prior=log_prior, minibatch_size=10,
        n_iters=N_ITERS, seed=seed, n_chains=2, dtype="float64", verbose=False, check_stepsize=False, **kw,
    )


def run_all() -> dict[str, np.ndarray]:
    model = regression()
    out = {}
    for name, estimator, args in cases():
        try:
            samples = sample(name, estimator, args, model)
        except (ValueError, TypeError) as err:  # a pairing the dynamics refuses
            out[f"{name}|{estimator}|refused"] = np.array(str(type(err).__name__))
            continue
        for k in ("b", "c"):
            out[f"{name}|{estimator}|{k}"] = np.asarray(samples[k])
    # Simplex samplers (SPEC §9): a categorical model whose counts are one-hot sums.
    import tensorflow as tf

    labels = {"z": np.random.default_rng(5).integers(0, 4, size=60).astype(np.int32)}

    def counts(params, minibatch, seed):
        return {"omega": tf.reduce_sum(tf.one_hot(minibatch["z"], 4, dtype=params["omega"].dtype), axis=0)}

    for name in ("scir", "sgrld"):
        samples = getattr(sgmcmc, name)(
            counts, labels, {"omega": np.full(4, 0.25)}, 0.05, 0.5, 8, n_iters=N_ITERS, verbose=False, seed=11,
            n_chains=2,
        )
        out[f"{name}|plain|omega"] = np.asarray(samples["omega"])
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        np.savez(STORE, **run_all())
        print("wrote", STORE)
    else:
        stored = np.load(STORE)
        now = run_all()
        bad = [k for k in stored.files if k not in now or not np.array_equal(stored[k], now[k])]
        print("changed:", bad or "none", f"({len(stored.files)} arrays)")
