"""Is the chain the same from both APIs? (SPEC §4; a check, not a timing.)

The step API's step (``StepCall.checked_step``, compiled on its own) and the whole chain (the
chunk program's ``while`` loop) are different XLA programs. For every sampler family (sgld with
the plain, SVRG and SAGA estimators, sghmc, sgldcv, psgld, hamcmc, baoab), one and three chains,
float32 and float64, on a 5-parameter logistic regression (N = 1,000, n = 50): 120 calls of
``sgmcmc_step`` against ``sampler(..., n_iters=120)`` of the same seed. Prints whether the
arrays are bit-identical and, if not, the largest difference. (tests/test_step_api.py asserts
the same for six samplers on a Gaussian model.)

    python benchmarks/xla_step_identity.py
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import sgmcmc  # noqa: E402

N, D, ITERATIONS = 1000, 5, 120
SAMPLERS = {"sgld": ("plain", "svrg", "saga"), "sghmc": ("plain",), "sgldcv": ("plain",),
            "psgld": ("plain",), "hamcmc": ("plain",), "baoab": ("plain",)}


def log_lik(params, data):
    logits = tf.linalg.matvec(data["X"], params["beta"])
    return tf.reduce_sum(tfp.distributions.Bernoulli(logits=logits).log_prob(data["y"]))


def log_prior(params):
    beta = params["beta"]
    return tf.reduce_sum(tfp.distributions.Normal(tf.cast(0.0, beta.dtype), 5.0).log_prob(beta))


def main() -> int:
    warnings.simplefilter("ignore")  # the stepsize and model checks are not what this checks
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D))
    y = (rng.random(N) < 1 / (1 + np.exp(-x @ np.ones(D)))).astype(float)
    differing = 0
    for dtype in (tf.float32, tf.float64):
        data = {"X": x.astype(dtype.as_numpy_dtype), "y": y.astype(dtype.as_numpy_dtype)}
        for name, estimators in SAMPLERS.items():
            for estimator in estimators:
                for n_chains in (1, 3):
                    options = dict(log_prior=log_prior, minibatch_size=0.05, dtype=dtype, n_chains=n_chains, seed=7,
                                   check_stepsize=False)
                    if estimator != "plain":
                        options.update(estimator=estimator)
                    if name.endswith("cv"):
                        options.update(n_iters_opt=200, opt_stepsize=1e-4)
                    start = {"beta": np.zeros(D)}
                    whole = getattr(sgmcmc, name)(log_lik, data, start, 1e-4, n_iters=ITERATIONS, verbose=False,
                                                  **options)["beta"]
                    sampler = getattr(sgmcmc, name + "_setup")(log_lik, data, start, 1e-4, **options)
                    sess = sgmcmc.init_sess(sampler, verbose=False)
                    stepped = []
                    for _ in range(ITERATIONS):
                        sgmcmc.sgmcmc_step(sampler, sess)
                        stepped.append(sgmcmc.get_params(sampler, sess)["beta"])
                    stepped = np.array(stepped)
                    if n_chains > 1:
                        stepped = stepped.transpose(1, 0, 2)  # [chain, iteration, D], as the whole chain
                    same = np.array_equal(stepped, whole)
                    differing += not same
                    verdict = "bit-identical" if same else f"DIFFER: max {np.max(np.abs(stepped - whole)):.3g}"
                    print(f"{dtype.name} {name} {estimator} K={n_chains}: {verdict}", flush=True)
    print(f"differing: {differing}")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
