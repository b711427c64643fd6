"""Regenerates tests/data/keras_nuts_breast_cancer.npz, the full-data NUTS reference of
test_keras.py::test_sgldcv_on_a_keras_logistic_regression_matches_nuts (it was computed inside
the test, ~30 s of NUTS per run).

The logistic regression on scikit-learn's breast-cancer data (569 × 30, standardised in float32
as the test does), prior N(0, 1) on every coefficient and the intercept, written by hand: TFP
full-data NUTS, 4 chains × 500 draws after 300 adaptation steps (dual averaging over 240), float64,
seed (1, 2), under XLA. Stored: the posterior mean and sd of the 31 coefficients (weights, then
the intercept) over the 2,000 draws, and the draws' number (ESS ≥ 1,900 for every coefficient:
the reference's own error is ≤ 0.03 posterior sd).

Run from the repository root: ``python tests/make_keras_nuts_reference.py [out.npz]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "data" / "keras_nuts_breast_cancer.npz"


def breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """The test's data: standardised features (float32) and 0/1 labels."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y.astype(np.int64)


def nuts_draws(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Full-data NUTS on the hand-written log posterior: (2,000, 31) draws."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    Xt, yt = tf.constant(X, tf.float64), tf.constant(y, tf.float64)

    def target(w):
        z = tf.linalg.matvec(Xt, w[..., :-1]) + w[..., -1:]
        return tf.reduce_sum(yt * z - tf.nn.softplus(z), -1) - 0.5 * tf.reduce_sum(w * w, -1)

    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(tfp.mcmc.NoUTurnSampler(target, 0.1), 240)
    run = tf.function(lambda: tfp.mcmc.sample_chain(500, tf.zeros((4, X.shape[1] + 1), tf.float64), kernel=kernel,
                                                    num_burnin_steps=300, seed=(1, 2), trace_fn=None), jit_compile=True)
    return run().numpy().reshape(-1, X.shape[1] + 1)


def main(out: Path = OUT) -> None:
    draws = nuts_draws(*breast_cancer())
    np.savez(out, mean=draws.mean(0), sd=draws.std(0), n_draws=len(draws))
    print(f"wrote {out}: mean {np.round(draws.mean(0)[:3], 4)}..., sd {np.round(draws.std(0)[:3], 4)}...")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
