"""Cyclical SG-MCMC (Zhang et al. 2020; SPEC §13): csgld and csghmc, each a set-up (``*_setup``,
the step-by-step API) and a whole-chain function. The kernels and the schedule are
:mod:`sgmcmc.step.dynamics.cyclical`.
"""

from __future__ import annotations

import os

import tensorflow as tf

from ..step.dynamics import CSGHMC, CSGLD
from ..step.estimators import SAGA, SVRG, ControlVariate, EstimatorSpec, resolve_estimator
from ..run.sampler import Sampler
from ..analysis.samples import Samples
from .build import build_sampler
from .docs import CHAIN_OPTIONS, DISTRIBUTE_OPTIONS, ESTIMATOR_OPTIONS, SETUP_PARAMETERS, shared_sections
from ..step.methods import METHODS
from .options import Chain, Dataset, LogLik, LogPrior, PerParameter, Starts, Model, Setup
from .runs import run_whole_chain

_SCHEDULE = r"""
    Iteration k (1-based) of K = ``n_iters`` with M = ``n_cycles`` cycles of C = ⌈K/M⌉
    iterations uses :math:`\epsilon_k = \frac{\epsilon}{2}[\cos(\pi r_k) + 1]`,
    :math:`r_k = \mathrm{mod}(k - 1, C)/C` (Zhang et al. 2020, eq. 1; ε = ``stepsize``, a number
    or a dict of numbers by parameter — a schedule is refused: this is the schedule). While
    :math:`r_k <` ``exploration`` the step has no injected noise (the exploration stage), after it
    the sampler's own update at :math:`\epsilon_k` (the sampling stage). With K not divisible by M
    the last cycle is shorter; when ⌈K/C⌉ < M fewer than M cycles fit (K = 10, M = 6: five). The
    stepsize check before sampling judges the largest stepsize, ε. See
    :mod:`sgmcmc.step.dynamics.cyclical`.
"""

_STEP_BY_STEP = """
    The step-by-step API (:func:`~sgmcmc.init_sess`, :func:`~sgmcmc.sgmcmc_step`) follows the same
    schedule by the global iteration counter (past ``n_iters`` the cycles continue);
    :func:`~sgmcmc.sample_chain` on this sampler keeps by that counter like any sampler's
    (exploration iterations included), while the whole-chain function keeps sampling stages only.
"""

_KEPT = """
    Only sampling-stage iterations are kept: ``burn_in`` (default 0) and ``thin`` apply within
    each cycle's sampling stage (each cycle restarts from an exploration stage), so cycle c keeps
    its iterations e + burn_in + thin, e + burn_in + 2·thin, … (counted from the cycle's start,
    e its exploration iterations) up to the cycle's end. ``samples.cycle`` gives each kept draw's
    cycle (0-based); the kept draws of all cycles together are the ensemble. ``checkpoint_dir``
    is refused (not supported yet: the run is one segment per cycle).
"""

_N_ITERS = """    n_iters : int
        K, the iterations the cycles divide (a whole-chain run runs them).
"""

_CYCLES = """    n_cycles : int
        M, a whole number at most ``n_iters``.
    exploration : float
        β in [0, 1): the fraction of each cycle run without noise.
"""


@shared_sections(_SCHEDULE, _STEP_BY_STEP, SETUP_PARAMETERS, _N_ITERS, _CYCLES, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def csgld_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
    n_cycles: int = CSGLD.defaults["n_cycles"],
    exploration: float = CSGLD.defaults["exploration"],
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    estimator: str | EstimatorSpec = "plain",
    opt_stepsize: PerParameter | None = None,
    n_iters_opt: int = ControlVariate.n_iters_opt,
    svrg_period: int = SVRG.period,
    max_memory: float = SAGA.max_memory,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up cyclical SGLD, cSGLD (Zhang et al. 2020, ICLR; SPEC §13): SGD
    :math:`\theta \leftarrow \theta + \frac{\epsilon_k}{2}g(\theta)` in each cycle's exploration
    stage, SGLD :math:`\theta \leftarrow \theta + \frac{\epsilon_k}{2}g(\theta) + N(0, \epsilon_k)`
    (as :func:`sgld_setup`) in its sampling stage.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    arguments = dict(stepsize=stepsize, n_iters=n_iters, n_cycles=n_cycles, exploration=exploration)
    return build_sampler(METHODS["csgld"], arguments, model, setup, estimator)


@shared_sections(_SCHEDULE, _KEPT, SETUP_PARAMETERS, _CYCLES, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def csgld(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
    n_cycles: int = CSGLD.defaults["n_cycles"],
    exploration: float = CSGLD.defaults["exploration"],
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    burn_in: int = Chain.burn_in,
    thin: int = Chain.thin,
    store_gradients: bool = False,
    check_model: bool = True,
    check_stepsize: bool = True,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = Chain.checkpoint_every,
    estimator: str | EstimatorSpec = "plain",
    opt_stepsize: PerParameter | None = None,
    n_iters_opt: int = ControlVariate.n_iters_opt,
    svrg_period: int = SVRG.period,
    max_memory: float = SAGA.max_memory,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run cSGLD for ``n_iters`` iterations: the set-up and update of :func:`csgld_setup`, then
    the whole chain in compiled chunks, one cycle after another.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    arguments = dict(stepsize=stepsize, n_iters=n_iters, n_cycles=n_cycles, exploration=exploration)
    return run_whole_chain(METHODS["csgld"], arguments, model, setup, estimator, chain)


@shared_sections(_SCHEDULE, _STEP_BY_STEP, SETUP_PARAMETERS, _N_ITERS, _CYCLES, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def csghmc_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = CSGHMC.defaults["alpha"],
    L: int = CSGHMC.defaults["L"],
    n_iters: int = Chain.n_iters,
    n_cycles: int = CSGHMC.defaults["n_cycles"],
    exploration: float = CSGHMC.defaults["exploration"],
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    estimator: str | EstimatorSpec = "plain",
    opt_stepsize: PerParameter | None = None,
    n_iters_opt: int = ControlVariate.n_iters_opt,
    svrg_period: int = SVRG.period,
    max_memory: float = SAGA.max_memory,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up cyclical SGHMC, cSGHMC (Zhang et al. 2020, ICLR; SPEC §13). In each cycle's
    sampling stage an iteration is SGHMC's at :math:`\epsilon_k` (as :func:`sghmc_setup`:
    :math:`\nu \sim N(0, \epsilon_k)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon_k g(\theta) - \alpha\nu + N(0, 2\alpha\epsilon_k)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick); in its exploration
    stage the same with every normal draw set to zero: :math:`\nu = 0`, then ``L`` kicks
    :math:`\nu \leftarrow \nu + \epsilon_k g(\theta) - \alpha\nu` (SGD with momentum 1 − α).
    ``alpha`` is a number or a dict like ``stepsize``; an iteration costs about ``L`` SGLD
    iterations.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    arguments = dict(stepsize=stepsize, alpha=alpha, L=L, n_iters=n_iters, n_cycles=n_cycles, exploration=exploration)
    return build_sampler(METHODS["csghmc"], arguments, model, setup, estimator)


@shared_sections(_SCHEDULE, _KEPT, SETUP_PARAMETERS, _CYCLES, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def csghmc(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = CSGHMC.defaults["alpha"],
    L: int = CSGHMC.defaults["L"],
    n_iters: int = Chain.n_iters,
    n_cycles: int = CSGHMC.defaults["n_cycles"],
    exploration: float = CSGHMC.defaults["exploration"],
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    burn_in: int = Chain.burn_in,
    thin: int = Chain.thin,
    store_gradients: bool = False,
    check_model: bool = True,
    check_stepsize: bool = True,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = Chain.checkpoint_every,
    estimator: str | EstimatorSpec = "plain",
    opt_stepsize: PerParameter | None = None,
    n_iters_opt: int = ControlVariate.n_iters_opt,
    svrg_period: int = SVRG.period,
    max_memory: float = SAGA.max_memory,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run cSGHMC for ``n_iters`` iterations: the set-up and update of :func:`csghmc_setup`, then
    the whole chain in compiled chunks, one cycle after another.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    arguments = dict(stepsize=stepsize, alpha=alpha, L=L, n_iters=n_iters, n_cycles=n_cycles, exploration=exploration)
    return run_whole_chain(METHODS["csghmc"], arguments, model, setup, estimator, chain)
