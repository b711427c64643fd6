"""The control-variate samplers (R: sgldcv, sghmccv, sgnhtcv; Baker et al. 2018): the dynamics of
:mod:`sgmcmc.api.gradient` with the control-variate estimator around the mode that their set-up finds.
"""

from __future__ import annotations

import os

import tensorflow as tf

from ..step.dynamics import SGHMC, SGNHT
from ..step.estimators import ControlVariate, resolve_estimator
from ..run.sampler import Sampler
from ..analysis.samples import Samples
from .build import build_sampler
from .docs import CHAIN_OPTIONS, DISTRIBUTE_OPTIONS, SETUP_PARAMETERS, shared_sections
from ..step.methods import METHODS
from .options import Chain, Dataset, LogLik, LogPrior, PerParameter, Starts, Model, Setup
from .runs import run_whole_chain


@shared_sections(SETUP_PARAMETERS, DISTRIBUTE_OPTIONS)
def sgldcv_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters_opt: int = ControlVariate.n_iters_opt,
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up SGLD with control variates (Baker et al. 2018): the gradient is
    :math:`\nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta)`, :math:`\hat\theta` the
    mode found by ``n_iters_opt`` SGD steps of size ``opt_stepsize`` in :func:`init_sess` (None:
    chosen from the curvature, :func:`sgmcmc.run.mode_search.auto_opt_stepsize`; from
    the first start; one mode search and one full-data gradient shared by all chains);
    ``n_iters_opt=0`` anchors the control variate at the first start (no mode search).
    ``verbose`` here is the default for :func:`init_sess`'s progress (R). Other arguments as
    :func:`sgld_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    return build_sampler(METHODS["sgldcv"], dict(stepsize=stepsize), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sgldcv(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
    n_iters_opt: int = ControlVariate.n_iters_opt,
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
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run SGLD-CV for ``n_iters`` iterations after the mode search: the set-up and update of :func:`sgldcv_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sgldcv"], dict(stepsize=stepsize), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, DISTRIBUTE_OPTIONS)
def sghmccv_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = SGHMC.defaults["alpha"],
    L: int = SGHMC.defaults["L"],
    n_iters_opt: int = ControlVariate.n_iters_opt,
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up SGHMC with control variates: :func:`sghmc_setup` dynamics with the gradient of
    :func:`sgldcv_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    return build_sampler(METHODS["sghmccv"], dict(stepsize=stepsize, alpha=alpha, L=L), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sghmccv(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = SGHMC.defaults["alpha"],
    L: int = SGHMC.defaults["L"],
    n_iters: int = Chain.n_iters,
    n_iters_opt: int = ControlVariate.n_iters_opt,
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
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run SGHMC-CV for ``n_iters`` iterations after the mode search: the set-up and update of :func:`sghmccv_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sghmccv"], dict(stepsize=stepsize, alpha=alpha, L=L), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, DISTRIBUTE_OPTIONS)
def sgnhtcv_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    a: PerParameter = SGNHT.defaults["a"],
    n_iters_opt: int = ControlVariate.n_iters_opt,
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up SGNHT with control variates: :func:`sgnht_setup` dynamics with the gradient of
    :func:`sgldcv_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    return build_sampler(METHODS["sgnhtcv"], dict(stepsize=stepsize, a=a), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sgnhtcv(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    opt_stepsize: PerParameter | None = None,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    a: PerParameter = SGNHT.defaults["a"],
    n_iters: int = Chain.n_iters,
    n_iters_opt: int = ControlVariate.n_iters_opt,
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
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run SGNHT-CV for ``n_iters`` iterations after the mode search: the set-up and update of :func:`sgnhtcv_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("cv", opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt)
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sgnhtcv"], dict(stepsize=stepsize, a=a), model, setup, estimator, chain)
