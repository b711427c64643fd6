"""Every chain index has the stationary spread its dynamics give, in XLA and graph mode (issue 29.1).

The design is the one of ``shared/repro/xla_chain0`` (1,192 rows: intercept, standardised height,
male, height × male of a public earnings data set; the intercept's coefficient ≈ 9.7), where chain 0
under XLA looked ~0.78 too narrow for seeds 1–4. Measured while investigating (docs/DESIGN.md,
"Chain 0 under XLA"): the noise each chain receives is exactly the Philox stream it should be,
white at every lag (400 keys through the same filter: chain 0 and chain 1 alike within ±0.013), and
over 32 seeds of the repro chain 0's variance ratio in the slowest direction was 0.92 ± 0.05 against
0.97 ± 0.03 for chains 1–3: the repro's statistic — one chain's sd along a direction with ~26
effective draws in 30,000 iterations — has a per-seed sd of ~0.14, and seeds 1–4 were low by chance.

This test makes the same comparison with enough power: with the full-data gradient of a Gaussian
posterior, SGLD and SGHMC are linear recursions whose stationary covariance is exact
(``tests/reference_linear_chains.py``). Stepsizes near the stability limit make the slowest
direction mix in ~20 iterations, so 20,000 iterations give ~1,000 effective draws per chain, and
each of 8 chains (every chain index is checked: chain 0 is every single-chain run) is compared
with the exact covariance, in both compilation modes, float32 and float64, one stepsize or one per
parameter, and SGHMC (several noise draws per iteration).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from reference_linear_chains import sghmc_recursion, sgld_recursion, stationary_covariance, variance_ratios

X = np.load(Path(__file__).parent / "data" / "earnings_design.npy")
SIGMA2 = 0.81
Y = (X.astype(np.float64) @ np.array([9.6, -0.03, 0.57, -0.11]) + np.random.default_rng(0).normal(0, 0.9, len(X)))
PRECISION = X.T.astype(np.float64) @ X / SIGMA2
MODE = np.linalg.solve(X.T.astype(np.float64) @ X, X.T.astype(np.float64) @ Y)
# The same Gaussian log-likelihood (up to a constant) from 4 "rows": RᵀR = XᵀX/σ², Rᵀz = Xᵀy/σ²,
# so −½Σ(z − Rβ)² has the design's precision and mode, and a full-data gradient costs 4 rows, not
# 1,192 (8 chains × 20,000 iterations of the real rows took ~40 s a run).
R = np.linalg.cholesky(PRECISION).T
Z = np.linalg.solve(R.T, X.T.astype(np.float64) @ Y / SIGMA2)
LAMBDA_MAX = float(np.linalg.eigvalsh(PRECISION).max())
N_CHAINS, N_ITERS, BURN_IN = 8, 20_000, 500

# Bands: ±5 sd of the statistic over 400 numpy replicate chains of the same recursion and length
# (tests/reference_linear_chains.simulate, seed 0). Per chain, the mean of its 4 variance ratios:
# SGLD sd 0.016 (range 0.946–1.052), per-parameter SGLD 0.021 (0.932–1.060), SGHMC 0.010
# (0.974–1.031). Per direction, the mean over 8 chains: the slowest two directions sd 0.015/0.016,
# 0.019/0.020, 0.006/0.008 (the faster ones smaller).
CASES = {
    #  name: (method, stepsize (× 1/λ_max), dtype, per-chain band, per-direction band)
    "sgld-float32": ("sgld", 2.0, tf.float32, 0.08, 0.08),
    "sgld-float64-per-parameter": ("sgld", (2.0, 1.0), tf.float64, 0.105, 0.10),
    "sghmc-float32": ("sghmc", 1.0, tf.float32, 0.05, 0.05),
}


def log_lik(params, data):
    beta = tf.concat([params["a"], params["b"]], axis=-1)
    return -0.5 * tf.reduce_sum((data["z"] - tf.linalg.matvec(data["R"], beta)) ** 2)


def exact_covariance(method: str, step) -> np.ndarray:
    if method == "sghmc":
        return stationary_covariance(*sghmc_recursion(PRECISION, step / LAMBDA_MAX, 0.1, 3))
    per = np.repeat(np.atleast_1d(step), 4 // np.size(step)) / LAMBDA_MAX
    return stationary_covariance(*sgld_recursion(PRECISION, per))


def run(method: str, step, dtype, seed: int) -> np.ndarray:
    """``[N_CHAINS, N_ITERS − BURN_IN, 4]`` draws measured from the mode."""
    steps = np.atleast_1d(step) / LAMBDA_MAX
    stepsize = float(steps[0]) if len(steps) == 1 else {"a": float(steps[0]), "b": float(steps[1])}
    start = {"a": MODE[:2], "b": MODE[2:]}
    kwargs = dict(alpha=0.1, L=3) if method == "sghmc" else {}
    out = getattr(sgmcmc, method)(
        log_lik, {"R": R, "z": Z}, start, stepsize, minibatch_size=len(R), n_iters=N_ITERS, verbose=False,
        seed=seed, n_chains=N_CHAINS, burn_in=BURN_IN, dtype=dtype, **kwargs,
    )
    beta = np.concatenate([np.asarray(out["a"], np.float64), np.asarray(out["b"], np.float64)], axis=-1)
    return beta - MODE


@pytest.mark.parametrize("xla", [True, False], ids=["xla", "graph"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_chain_index_has_the_exact_stationary_spread(case, xla, monkeypatch):
    method, step, dtype, chain_band, direction_band = CASES[case]
    monkeypatch.setenv("SGMCMC_XLA", "1" if xla else "0")
    ratios = variance_ratios(run(method, step, dtype, seed=1), exact_covariance(method, step))  # [K, 4]
    per_chain = ratios.mean(axis=1)
    per_direction = ratios.mean(axis=0)
    table = "\n".join(f"chain {k}: {np.round(r, 3).tolist()}" for k, r in enumerate(ratios))
    assert np.all(np.abs(per_chain - 1.0) <= chain_band), f"per chain {np.round(per_chain, 3)}\n{table}"
    assert np.all(np.abs(per_direction - 1.0) <= direction_band), f"per direction {np.round(per_direction, 3)}\n{table}"


# ---------------------------------------------------------------- many chains: a loop, the same bits
# Above random.UNROLLED_CHAINS chains a draw is one Philox call per chain inside a loop over the
# chains (written out, 3,000 chains took 166 s to trace and 86 s to compile). Broken variants
# checked: the loop giving every chain the first chain's counter, or the second word of the
# counter without the call's position j, each fail both tests below.


@pytest.mark.parametrize("xla", [True, False], ids=["xla", "graph"])
def test_the_chain_loop_draws_the_bits_written_out_draws_do(xla):
    from sgmcmc.step import random as chain_random

    k = chain_random.UNROLLED_CHAINS + 4

    def draws(unrolled: int):
        source = chain_random.ChainRandom(seed=5, stream=0, dtype=tf.float32, n_chains=k)

        @tf.function(jit_compile=xla)
        def run(t):
            chain_random.UNROLLED_CHAINS = unrolled
            source.begin(t)
            normal = source.normal({"a": tf.zeros([k, 3]), "b": tf.zeros([k])})
            return normal["a"], normal["b"], source.uniform([2], -1.0, 1.0), source.chain_seeds(), source.seed()

        try:
            return [x.numpy() for x in run(tf.constant(7, tf.int64))]
        finally:
            chain_random.UNROLLED_CHAINS = 16

    looped, written_out = draws(0), draws(10 * k)
    for a, b in zip(looped, written_out):
        np.testing.assert_array_equal(a, b)
    assert len(np.unique(looped[2][:, 0])) == k  # every chain its own draw


def test_many_chains_are_the_chains_of_a_run_with_fewer():
    """Chain k's draws depend on (seed, chain, t) alone: chains 0-1 of a 20-chain run (the loop)
    are the 2-chain run's (written out), bit for bit."""
    data = {"R": R, "z": Z}
    args = dict(minibatch_size=4, n_iters=50, verbose=False, seed=3, check_stepsize=False)
    start = {"a": np.full(1, 9.0), "b": np.zeros(3)}
    many = sgmcmc.sgld(log_lik, data, start, 1e-4, n_chains=20, **args)
    two = sgmcmc.sgld(log_lik, data, start, 1e-4, n_chains=2, **args)
    np.testing.assert_array_equal(many["b"][:2], two["b"])
