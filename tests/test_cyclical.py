"""Cyclical SG-MCMC (csgld, csghmc; Zhang et al. 2020; SPEC §13): the schedule, the two stages
of each cycle, the kept-draw plan, the mode visits on a four-mode mixture, the refusals.

The exactness tests use x_i ~ N(θ, 1), i = 1..N, a flat prior and minibatch = all rows (the
gradient g(θ) = Σ(x_i − θ) is exact), float64, and recover the sampler's own normal draws from a
plain sgld / sghmc run with the same seed: the draws depend only on (seed, chain, iteration), so a
cyclical chain must equal a numpy recursion fed with them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc import schedules
from sgmcmc.step.dynamics.cyclical import cyclical_schedule, exploration_iterations

N_ROWS = 20
X = np.random.default_rng(3).normal(0.5, 1.0, size=N_ROWS)
DATA = {"x": X}
SET_UP = dict(check_stepsize=False, dtype=tf.float64, minibatch_size=N_ROWS)
QUIET = dict(SET_UP, verbose=False)


def log_lik(params, dataset):
    return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["theta"]))


def grad(theta):
    return N_ROWS * (X.mean() - theta)


def schedule_np(k, n_iters, n_cycles, h):
    """Zhang et al. (2020) eq. 1 and the position in the cycle, written from the paper."""
    period = math.ceil(n_iters / n_cycles)
    r = ((np.asarray(k) - 1) % period) / period
    return h / 2 * (np.cos(np.pi * r) + 1), r


def all_iterations(setup, steps, **kwargs):
    """Every iteration's state of a ``*_setup`` sampler, ``(chains, steps)`` (one chain:
    ``(steps,)``), read after each ``sgmcmc_step`` (sample_chain keeps no exploration iteration)."""
    sampler = setup(log_lik, DATA, {"theta": 0.0}, **SET_UP, **kwargs)
    sess = sgmcmc.init_sess(sampler, verbose=False)
    path = []
    for _ in range(steps):
        sgmcmc.sgmcmc_step(sampler, sess)
        path.append(sgmcmc.get_params(sampler, sess)["theta"])
    return np.stack(path, axis=-1)


@pytest.mark.parametrize("n_iters, n_cycles, beta", [(100, 4, 0.8), (50, 3, 0.6), (37, 5, 0.0), (10, 6, 0.5), (7, 7, 0.3)])
def test_the_schedule_is_eq_1(n_iters, n_cycles, beta):
    """The kernel's schedule function against numpy's eq. 1 at t = 1…K + 5 (past K the cycles
    continue), K divisible by M or not; the noise switch is r ≥ β, and the count of exploration
    iterations per cycle is the count of m/C < β. Fails with ⌊K/M⌋ for ⌈K/M⌉ ((37, 5): C = 7
    against 8), with r > β for r ≥ β ((10, 6, 0.5): r = 1/2 at k = 2), with ε cos(πr) for
    ε/2 (cos(πr) + 1) (each variant run: 3–5 of the 5 cases fail)."""
    t = np.arange(1, n_iters + 6)
    eps, noise_on = cyclical_schedule({"a": 0.3, "b": 2.0}, tf.constant(t, tf.int64), n_iters, n_cycles, beta,
                                      {"a": tf.float64, "b": tf.float32})
    for name, h, rtol in (("a", 0.3, 1e-15), ("b", 2.0, 1e-7)):
        expected, r = schedule_np(t, n_iters, n_cycles, h)
        np.testing.assert_allclose(eps[name].numpy(), expected, rtol=rtol, atol=1e-15)
    np.testing.assert_array_equal(noise_on.numpy(), (r >= beta).astype(float))
    period = math.ceil(n_iters / n_cycles)
    assert exploration_iterations(n_iters, n_cycles, beta) == int(np.sum(np.arange(period) / period < beta))
    # the public schedule object is the same function
    np.testing.assert_array_equal(schedules.cyclical(0.3, n_cycles, n_iters)(tf.constant(t, tf.int64)).numpy(), eps["a"].numpy())


#: The cSGLD chain of the exactness and bookkeeping tests: K = 50, M = 3 (C = 17: the last cycle
#: 16 iterations), β = 0.6, ε = 0.02, three chains, seed 7.
CSGLD_RUN = dict(n_iters=50, n_cycles=3, exploration=0.6, stepsize=0.02, seed=7, n_chains=3)


@pytest.fixture(scope="module")
def csgld_path():
    """Every iteration of :data:`CSGLD_RUN` (the step-by-step sampler through sample_chain)."""
    return all_iterations(sgmcmc.csgld_setup, CSGLD_RUN["n_iters"], **CSGLD_RUN)


def test_csgld_is_sgd_then_sgld_on_the_cyclical_schedule(csgld_path):
    """cSGLD (:data:`CSGLD_RUN`), every iteration, against
    θ_k = θ_{k−1} + (ε_k/2) g + 1[r_k ≥ β] √ε_k ξ_k in numpy, ξ_k recovered from sgld at a
    constant ε with the same seed. Largest difference seen 3.1e-9 (seed 7; 2.9e-9 at seed 1): the
    compiled float64 cos differs from numpy's in the 8th digit (eagerly the schedule agrees to
    1e-15, test_the_schedule_is_eq_1); tolerance 1e-7. Fails with the noise never switched off,
    with ⌊K/M⌋ for ⌈K/M⌉, with ε cos(πr) for the schedule (each variant run)."""
    n_iters, n_cycles, beta, h, chains = (CSGLD_RUN[k] for k in ("n_iters", "n_cycles", "exploration", "stepsize", "n_chains"))
    plain = all_iterations(sgmcmc.sgld_setup, n_iters, stepsize=h, seed=CSGLD_RUN["seed"], n_chains=chains)
    path = np.concatenate([np.zeros((chains, 1)), plain], axis=1)
    xi = (path[:, 1:] - path[:, :-1] - h / 2 * grad(path[:, :-1])) / np.sqrt(h)
    assert abs(xi.std() - 1) < 0.2  # they are the unit normals
    theta, expected = np.zeros(chains), np.empty((chains, n_iters))
    for k in range(1, n_iters + 1):
        eps, r = schedule_np(k, n_iters, n_cycles, h)
        theta = theta + eps / 2 * grad(theta) + (r >= beta) * np.sqrt(eps) * xi[:, k - 1]
        expected[:, k - 1] = theta
    np.testing.assert_allclose(csgld_path, expected, rtol=0, atol=1e-7)


def _sghmc_noise_free(theta, eps, alpha, L):
    """One SGHMC iteration (SPEC §3, half first kick) with every normal draw zero."""
    nu = np.zeros_like(theta)
    for step in range(L):
        nu = nu + (0.5 if step == 0 else 1.0) * eps * grad(theta) - alpha * nu
        theta = theta + nu
    return theta


def test_csghmc_is_momentum_sgd_then_sghmc():
    """cSGHMC, K = 40, M = 3 (C = 14), β = 0.5, L = 3, α = 0.2, three chains, every iteration.
    On this linear model an SGHMC iteration is f_ε(θ) (the noise-free iteration, numpy) plus a
    noise term n_k that depends on the seed, the chain, k and ε_k only; n_k is read off sghmc run
    with the schedules.cyclical stepsize (the same ε_k) and the same seed, n_k = θ_k − f(θ_{k−1}).
    Then cSGHMC must be θ_k = f_{ε_k}(θ_{k−1}) + 1[r_k ≥ β] n_k: momentum SGD without refresh in
    exploration, SGHMC's own update (its draws) after. Largest difference seen 3.3e-16 (seeds 5,
    3); tolerance 1e-7 (the compiled cos, above). Fails with the momentum refresh kept in
    exploration, with the noise never switched off, with r > β for r ≥ β (r = 7/14 = β here;
    each variant run)."""
    n_iters, n_cycles, beta, h, alpha, L, chains = 40, 3, 0.5, 0.002, 0.2, 3, 3
    sched = schedules.cyclical(h, n_cycles, n_iters)
    plain = all_iterations(sgmcmc.sghmc_setup, n_iters, stepsize=sched, alpha=alpha, L=L, seed=5, n_chains=chains)
    path = np.concatenate([np.zeros((chains, 1)), plain], axis=1)
    eps, r = schedule_np(np.arange(1, n_iters + 1), n_iters, n_cycles, h)
    noise = np.stack([path[:, k] - _sghmc_noise_free(path[:, k - 1], eps[k - 1], alpha, L) for k in range(1, n_iters + 1)], 1)
    assert np.all(np.abs(noise) > 0)
    cyc = all_iterations(sgmcmc.csghmc_setup, n_iters, stepsize=h, alpha=alpha, L=L, seed=5, n_chains=chains,
                         n_iters=n_iters, n_cycles=n_cycles, exploration=beta)
    theta, expected = np.zeros(chains), np.empty((chains, n_iters))
    for k in range(1, n_iters + 1):
        theta = _sghmc_noise_free(theta, eps[k - 1], alpha, L) + (r[k - 1] >= beta) * noise[:, k - 1]
        expected[:, k - 1] = theta
    np.testing.assert_allclose(cyc, expected, rtol=0, atol=1e-7)


def planned_iterations(n_iters, n_cycles, beta, burn_in, thin):
    """The kept iterations (1-based) and their cycles, enumerated from the rule: iteration k of
    cycle c = (k − 1) // C is kept when r_k ≥ β and its position j within the cycle's sampling
    stage (1-based) is j > burn_in with (j − burn_in) % thin == 0."""
    period = math.ceil(n_iters / n_cycles)
    kept, cycles = [], []
    for c in range(math.ceil(n_iters / period)):
        sampling = [k for k in range(c * period + 1, min((c + 1) * period, n_iters) + 1) if ((k - 1) % period) / period >= beta]
        for j, k in enumerate(sampling, start=1):
            if j > burn_in and (j - burn_in) % thin == 0:
                kept.append(k)
                cycles.append(c)
    return np.array(kept), np.array(cycles)


@pytest.mark.parametrize("burn_in, thin, chains", [(0, 1, 1), (2, 3, 2), (1, 2, 3)])
def test_kept_draws_are_the_planned_iterations(csgld_path, burn_in, thin, chains):
    """For each (burn_in, thin, n_chains), csgld's kept draws (:data:`CSGLD_RUN`) are exactly the
    states of the every-iteration run at the iterations enumerated from the rule in numpy
    (:func:`planned_iterations`), ``samples.cycle`` their cycles; the layout is R's for one chain;
    store_gradients keeps one finite gradient per kept draw. Fails with burn_in ignored (2 of the
    3 cases; the third has burn_in 0), with the short last cycle dropped (all 3; each variant
    run)."""
    n_iters, n_cycles, beta = CSGLD_RUN["n_iters"], CSGLD_RUN["n_cycles"], CSGLD_RUN["exploration"]
    kept, cycles = planned_iterations(n_iters, n_cycles, beta, burn_in, thin)
    assert len(kept) > 0 and cycles[-1] == 2
    run = dict(CSGLD_RUN, n_chains=chains)
    out = sgmcmc.csgld(log_lik, DATA, {"theta": 0.0}, burn_in=burn_in, thin=thin, store_gradients=chains == 2, **run, **QUIET)
    assert out.n_kept == len(kept) and out.n_chains == chains
    np.testing.assert_array_equal(out.cycle, cycles)
    np.testing.assert_array_equal(out.by_chain()["theta"], csgld_path[:chains, kept - 1])
    assert out["theta"].shape == ((len(kept),) if chains == 1 else (chains, len(kept)))
    if chains == 2:
        assert out.gradients["theta"].shape == out["theta"].shape and np.isfinite(out.gradients["theta"]).all()
    assert np.isfinite(out.log_posterior).all()
    assert out.settings["n_iters"] == n_iters and out.settings["burn_in"] == burn_in and out.settings["thin"] == thin


def test_sample_chain_on_a_setup_sampler_keeps_only_sampling_stage_iterations(csgld_path):
    """``sample_chain`` on ``csgld_setup``'s sampler (:data:`CSGLD_RUN`), in calls of 23, 19 and
    20 iterations (windows that start and end inside stages, the last past K = 50, where the
    cycles continue): the kept draws are exactly the every-iteration run's states at the
    sampling-stage iterations k (r_k ≥ β) with the global counter's burn_in = 5 and thin = 2
    (k > 5, (k − 5) % 2 = 0), ``samples.cycle`` their cycles (k − 1) // C. Fails when
    sample_chain keeps exploration iterations (the behaviour before: the first call kept 9 draws,
    not 3; run)."""
    n_iters, n_cycles, beta = CSGLD_RUN["n_iters"], CSGLD_RUN["n_cycles"], CSGLD_RUN["exploration"]
    period = math.ceil(n_iters / n_cycles)
    sampler = sgmcmc.csgld_setup(log_lik, DATA, {"theta": 0.0}, **SET_UP, **CSGLD_RUN)
    extra = all_iterations(sgmcmc.csgld_setup, 62, **CSGLD_RUN)  # past K too
    np.testing.assert_array_equal(extra[:, :n_iters], csgld_path)
    done = 0
    for n in (23, 19, 20):
        out = sgmcmc.sample_chain(sampler, n, verbose=False, burn_in=5, thin=2)
        window = np.arange(done + 1, done + n + 1)
        kept = window[(((window - 1) % period) / period >= beta) & (window > 5) & ((window - 5) % 2 == 0)]
        assert out.n_kept == len(kept), (n, out.n_kept, kept)
        np.testing.assert_array_equal(out["theta"], extra[:, kept - 1])
        np.testing.assert_array_equal(out.cycle, (kept - 1) // period)
        done += n
    assert sampler.iteration == 62


# -- four modes ------------------------------------------------------------------------------------
MODE = 3.5  # means (±MODE, ±MODE), sd 1: the barrier between neighbours is ~5.4 nats
MEANS = tf.constant([[MODE, MODE], [MODE, -MODE], [-MODE, MODE], [-MODE, -MODE]], tf.float64)


def mixture_lik(params, dataset):
    """The mixture's log density times each row's weight (one row, weight 1: the exact gradient)."""
    d = params["theta"][None, :] - MEANS
    return tf.reduce_sum(dataset["w"]) * tf.reduce_logsumexp(-0.5 * tf.reduce_sum(d * d, axis=1))


def shares(draws):
    """Per chain, the share of draws in each quadrant (one mode each): (chains, 4)."""
    quadrant = 2 * (draws[..., 0] > 0) + (draws[..., 1] > 0)
    return np.stack([(quadrant == q).mean(axis=-1) for q in range(4)], axis=-1)


MIXTURE = dict(dtype=tf.float64, minibatch_size=1, verbose=False, check_stepsize=False, n_chains=8)
START = {"theta": np.array([MODE, MODE])}


def test_csgld_visits_the_four_modes_where_sgld_stays_in_one():
    """Four equal modes, 8 chains from one mode, 4,000 iterations each, maximum stepsize 3.
    csgld (40 cycles of 100, β = 0.1): every chain visits all four modes, and the pooled shares
    are near 1/4. sgld with the same budget and maximum stepsize, decaying as the paper's SGLD
    (schedules.polynomial(3, 20, 1)): each chain's second half stays in one mode.

    Calibration (seeds 1–6, 8 chains each): csgld pooled shares 0.182–0.314 (largest deviation
    from 1/4 0.068), smallest per-chain share 0.079 0.097 0.079 0.132 0.082 0.107 (numpy cSGLD,
    seeds 1–3: 0.19–0.30); sgld's second halves: the share of each chain's main mode has median
    1.0 at every seed, the lowest chain 0.604. Tolerances: pooled shares within 0.25 ± 0.12 (1.8×
    the largest deviation), every chain ≥ 0.02 in every mode (4× below the smallest seen); sgld:
    the median chain ≥ 0.95 in one mode.
    Fails with the sampling stage's noise never switched on (every chain stays in its mode; run).
    It does not pin the cycles: one cycle of 4,000 (β = 0.1) also visits the four modes (pooled
    shares 0.13–0.36, seed 1), its sampling stage starting at a large stepsize; the cycles are
    pinned by the exactness tests above.
    """
    data = {"w": np.ones(1)}
    cyc = sgmcmc.csgld(mixture_lik, data, START, 3.0, n_iters=4_000, n_cycles=40, exploration=0.1, seed=1, **MIXTURE)
    assert cyc.n_kept == 40 * 90 and np.array_equal(np.unique(cyc.cycle), np.arange(40))
    per_chain = shares(cyc["theta"])
    pooled = per_chain.mean(axis=0)
    assert np.all(np.abs(pooled - 0.25) < 0.12), pooled
    assert per_chain.min() >= 0.02, per_chain
    plain = sgmcmc.sgld(mixture_lik, data, START, schedules.polynomial(3.0, 20.0, 1.0), n_iters=4_000, seed=1, **MIXTURE)
    stuck = shares(plain["theta"][:, 2_000:]).max(axis=1)
    assert np.median(stuck) >= 0.95, stuck


def test_csghmc_visits_the_four_modes():
    """The same mixture with csghmc (L = 3, α = 1; 2,000 iterations, 40 cycles of 50, β = 0.2,
    maximum stepsize 2): every chain visits all four modes, pooled shares near 1/4.
    Calibration (seeds 1–6, 8 chains each): pooled shares 0.221–0.286 (largest deviation 0.036;
    numpy cSGHMC, seeds 1–3: 0.21–0.30), smallest per-chain share 0.142 0.117 0.162 0.116 0.148
    0.118.
    Tolerances: pooled within 0.25 ± 0.12, every chain ≥ 0.02
    in every mode. Fails with the noise never switched on (run); one cycle also passes (pooled
    shares 0.21–0.30, seed 1), as for csgld.
    """
    data = {"w": np.ones(1)}
    out = sgmcmc.csghmc(mixture_lik, data, START, 2.0, L=3, alpha=1.0, n_iters=2_000, n_cycles=40, exploration=0.2,
                        seed=1, **MIXTURE)
    assert out.n_kept == 40 * 40
    per_chain = shares(out["theta"])
    pooled = per_chain.mean(axis=0)
    assert np.all(np.abs(pooled - 0.25) < 0.12), pooled
    assert per_chain.min() >= 0.02, per_chain


# -- refusals --------------------------------------------------------------------------------------
@pytest.mark.parametrize("changes, error, words", [
    (dict(n_cycles=11), ValueError, "n_cycles=11 is more than n_iters=10"),
    (dict(exploration=1.0), ValueError, "exploration must be a number in [0, 1)"),
    (dict(exploration=-0.1), ValueError, "exploration must be a number in [0, 1)"),
    (dict(n_cycles=2.5), TypeError, "n_cycles must be a whole number"),
    (dict(n_cycles="4"), TypeError, "n_cycles must be a whole number"),
    (dict(stepsize=schedules.polynomial(0.01, 10, 0.6)), TypeError, "takes no stepsize schedule"),
    (dict(stepsize={"theta": schedules.polynomial(0.01, 10, 0.6)}), TypeError, "takes no stepsize schedule"),
    (dict(burn_in=3), ValueError, "no iteration would be kept"),
    (dict(checkpoint_dir="unused"), ValueError, "checkpoint_dir is not supported with csgld"),
])
def test_bad_arguments_are_refused_before_compiling(changes, error, words, monkeypatch, tmp_path):
    """Each refusal names the argument; none compiles anything (the chunk functions are
    replaced by ones that fail) and the checkpoint directory is not made."""
    from sgmcmc.run.compiled import CompiledPrograms

    def compiled(*args, **kwargs):
        raise AssertionError("compiled before refusing")

    monkeypatch.setattr(CompiledPrograms, "call", compiled)
    monkeypatch.chdir(tmp_path)
    arguments = dict(stepsize=0.01, n_iters=10, n_cycles=2, exploration=0.8, **QUIET)
    arguments.update(changes)
    with pytest.raises(error, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        sgmcmc.csgld(log_lik, DATA, {"theta": 0.0}, **arguments)
    assert not (tmp_path / "unused").exists()
    if "burn_in" not in changes and "checkpoint_dir" not in changes:
        setup_arguments = {k: v for k, v in arguments.items() if k != "verbose"}
        with pytest.raises(error):
            sgmcmc.csghmc_setup(log_lik, DATA, {"theta": 0.0}, **setup_arguments)


@pytest.mark.parametrize("name", ["csgld", "csghmc"])
def test_a_plan_keeping_nothing_is_refused_before_the_model_is_evaluated(name):
    """A per-cycle burn_in that keeps no draw is refused before anything evaluates ``log_lik``
    (the set-up's model checks, seconds on a network; the stepsize check after them): with both
    checks on, ``log_lik`` must not have been called when the ValueError comes. When the plan came
    from the built sampler's kernel it had been called 5 times (the model checks' trial
    evaluations; 1 with check_model=False). A good burn_in then runs, calling it."""
    calls = []

    def counted(params, dataset):
        calls.append(1)
        return log_lik(params, dataset)

    run = getattr(sgmcmc, name)
    arguments = dict(n_iters=10, n_cycles=2, exploration=0.8, dtype=tf.float64, minibatch_size=N_ROWS, verbose=False)
    with pytest.raises(ValueError, match="no iteration would be kept"):
        run(counted, DATA, {"theta": 0.0}, 0.01, burn_in=1, check_model=True, check_stepsize=True, **arguments)
    assert not calls, f"log_lik was called {len(calls)} times before the refusal"
    out = run(counted, DATA, {"theta": 0.0}, 0.01, burn_in=0, check_model=True, check_stepsize=True, **arguments)
    assert calls and out.n_kept == 2


def test_samples_cycle_pickles_and_tune_stepsize_refuses():
    """``Samples.cycle`` survives pickling and shows in the repr; an old pickle without it reads
    as None; tune_stepsize (which tunes through a schedule) does not offer the cyclical samplers."""
    import pickle

    from sgmcmc.analysis.samples import Samples, _rebuild
    from sgmcmc.tuning.stepsize_search import TUNABLE

    s = Samples({"a": np.zeros((2, 3))}, n_chains=2, cycle=[0, 0, 1])
    back = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(back.cycle, [0, 0, 1])
    assert "cycle" in repr(s)
    old = {k: v for k, v in s.__dict__.items() if k != "cycle"}
    assert _rebuild(dict(s), old).cycle is None
    assert Samples({"a": np.zeros(3)}).cycle is None
    with pytest.raises(ValueError, match="cycle has shape"):
        Samples({"a": np.zeros((2, 3))}, n_chains=2, cycle=[0, 1])
    assert "csgld" not in TUNABLE and "csghmc" not in TUNABLE and "sgld" in TUNABLE
