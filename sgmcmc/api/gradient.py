"""The gradient samplers (R: sgld, sghmc, sgnht; and psgld, hamcmc, baoab, osgld): each a set-up
(``*_setup``, the step-by-step API) and a whole-chain function.
"""

from __future__ import annotations

import os

import tensorflow as tf

from ..step.dynamics import BAOAB, HAMCMC, OSGLD, PSGLD, SGHMC, SGNHT
from ..step.estimators import SAGA, SVRG, ControlVariate, EstimatorSpec, resolve_estimator
from ..run.sampler import Sampler
from ..analysis.samples import Samples
from .build import build_sampler
from .docs import CHAIN_OPTIONS, DISTRIBUTE_OPTIONS, ESTIMATOR_OPTIONS, SETUP_PARAMETERS, shared_sections
from ..step.methods import METHODS
from .options import Chain, Dataset, LogLik, LogPrior, PerParameter, Starts, Model, Setup
from .runs import run_until_burned_in, run_whole_chain


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def sgld_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
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
    r"""Set up SGLD (Welling & Teh 2011; SPEC §3):
    :math:`\theta \leftarrow \theta + \frac{\epsilon}{2}g(\theta) + N(0, \epsilon)`, g the gradient
    estimate (``estimator``).
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["sgld"], dict(stepsize=stepsize), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sgld(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
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
    r"""Run SGLD for ``n_iters`` iterations: the set-up and update of :func:`sgld_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sgld"], dict(stepsize=stepsize), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def sghmc_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = SGHMC.defaults["alpha"],
    L: int = SGHMC.defaults["L"],
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
    r"""Set up SGHMC (Chen et al. 2014, :math:`\hat\beta = 0`): each iteration resamples
    :math:`\nu \sim N(0, \epsilon)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon g(\theta) - \alpha\nu + N(0, 2\alpha\epsilon)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick (leapfrog; SPEC §3).
    An iteration costs about ``L`` SGLD iterations. ``alpha`` is a number or a dict like
    ``stepsize``; other arguments as :func:`sgld_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["sghmc"], dict(stepsize=stepsize, alpha=alpha, L=L), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sghmc(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    alpha: PerParameter = SGHMC.defaults["alpha"],
    L: int = SGHMC.defaults["L"],
    n_iters: int = Chain.n_iters,
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
    r"""Run SGHMC for ``n_iters`` iterations: the set-up and update of :func:`sghmc_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sghmc"], dict(stepsize=stepsize, alpha=alpha, L=L), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def sgnht_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    a: PerParameter = SGNHT.defaults["a"],
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
    r"""Set up SGNHT (Ding et al. 2014): momentum :math:`u \sim N(0, \epsilon)` once,
    thermostat :math:`\alpha = a` per parameter; each iteration
    :math:`u \leftarrow u + \epsilon g(\theta) - \alpha u + N(0, 2a\epsilon)`,
    :math:`\theta \leftarrow \theta + u`, :math:`\alpha \leftarrow \alpha + \overline{u^2} - \epsilon`.
    Other arguments as :func:`sgld_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["sgnht"], dict(stepsize=stepsize, a=a), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def sgnht(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    a: PerParameter = SGNHT.defaults["a"],
    n_iters: int = Chain.n_iters,
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
    r"""Run SGNHT for ``n_iters`` iterations: the set-up and update of :func:`sgnht_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["sgnht"], dict(stepsize=stepsize, a=a), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def psgld_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    beta: float = PSGLD.defaults["beta"],
    lam: float = PSGLD.defaults["lam"],
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
    r"""Set up preconditioned SGLD (Li et al. 2016, Algorithm 1; SPEC §8). Per element, with
    g the full-scale gradient estimate (prior + N/n · minibatch sum, SPEC §3):
    :math:`V \leftarrow \beta V + (1-\beta) g\odot g`, :math:`G = 1/(\lambda + \sqrt V)`,
    :math:`\theta \leftarrow \theta + \frac{\epsilon}{2} G g + N(0, \epsilon G)`; V starts at 0
    and is updated before it is used. Deviations: Li et al. build V from the mean per-row
    gradient g/N, which only rescales ε and λ (their (ε, λ) are our (εN, λN)); the correction
    term Γ = ∇·G is omitted (as Li et al. do in their experiments), a bias that vanishes as
    ε → 0. ``beta`` in [0, 1), ``lam`` > 0. Other arguments as :func:`sgld_setup`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["psgld"], dict(stepsize=stepsize, beta=beta, lam=lam), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def psgld(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    beta: float = PSGLD.defaults["beta"],
    lam: float = PSGLD.defaults["lam"],
    n_iters: int = Chain.n_iters,
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
    r"""Run pSGLD for ``n_iters`` iterations: the set-up and update of :func:`psgld_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["psgld"], dict(stepsize=stepsize, beta=beta, lam=lam), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def hamcmc_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    memory: int | None = HAMCMC.defaults["memory"],
    damping: float = HAMCMC.defaults["damping"],
    warmup_stepsize: PerParameter | None = HAMCMC.defaults["warmup_stepsize"],
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
    r"""Set up Hessian-approximated MCMC (Şimşekli et al. 2016, Eq. 10, Algorithm 1; SPEC §8),
    on all parameters flattened into one vector per chain. With M = ``memory`` >= 2:
    :math:`\theta_t = \theta_{t-M} + \frac{\epsilon}{2} H_t g_{\Omega_t}(\theta_{t-M}) + \sqrt\epsilon S_t z`,
    :math:`H_t = S_t S_t^\top` the L-BFGS inverse Hessian (two-loop recursion) from all M − 1
    pairs :math:`s_\tau = \theta_\tau - \theta_{\tau-M}`,
    :math:`y_\tau = g_{\Omega_\tau}(\theta_{\tau-M}) - g_{\Omega_\tau}(\theta_\tau) + \lambda s_\tau`
    (τ = t−M+1..t−1, both gradients on the same minibatch: 2 gradient evaluations per
    iteration), so H_t never involves θ_{t−M} and Γ = 0 (Eq. 9); initial scale γ = sᵀy/yᵀy of
    the newest pair; λ = ``damping`` (§3.2: L-BFGS then approximates (∇²U + λI)⁻¹); S_t z by
    the square-root recursion of Eq. 11 with the seeds' erratum (q = √(sᵀy/sᵀBs)·Bs + y).
    The first 2M iterations are SGLD steps θ_t = θ_{t−M} + ε/2 g + N(0, ε) (θ_{t−M} = θ₀ for
    t ≤ M) providing Algorithm 1's θ₀..θ_2M, at ``warmup_stepsize`` (default ``stepsize``; not in
    the paper): HAMCMC's ε is on the standardised scale (ε/2·HA ≈ ε/2·I for a Gaussian of
    precision A, ε ≈ 0.1–1), whereas SGLD needs ε < 2/λ_max(A). Deviations: Eq. 6's indexing (which drops one
    pair) is not followed; a pair with sᵀy ≤ 1e-8‖s‖‖y‖ is skipped to keep H positive definite
    (not in the paper); a stepsize dict gives the preconditioner E^½HE^½ (E the per-coordinate
    stepsizes); the estimate stored with a kept sample is the one the next iteration's
    predecessor made at it on its own minibatch. Other arguments as :func:`sgld_setup`.

    Choosing (issue 22.3; :mod:`sgmcmc.step.dynamics.hamcmc`): ``memory=None`` (default) is
    min(d + 1, 50) for d parameters: d pairs can hold the whole inverse Hessian of a correlated
    posterior (memory 5 left mean errors of 2.4 sd on a correlated d = 26 regression, d + 1 gave
    0.12); its cost per chain is (2M − 1)·d stored numbers, O(M²·d) work per iteration and an
    M-fold burn-in (the chain is M interleaved chains). Give a smaller ``memory`` for large d or
    short runs. ``damping`` (λ ≥ 0): 0 on a log-concave posterior; on a non-convex one, or when
    pairs are skipped (sᵀy ≤ 0 on noisy minibatches), a λ of about the smallest curvature that
    matters keeps H bounded by 1/λ. ``estimator``: HAMCMC's ε is on the standardised scale in
    every direction, so the minibatch noise inflates every direction's variance, by
    (1 + ε(N/n − 1)/4)/(1 − ε/4) or more (ε = 0.15, N/n = 20: predicted sd ×1.33, measured
    ×1.45–1.66 on a d = 5 regression; ×1.03–1.10 with ``estimator="svrg"`` or N/n = 2): use ``"svrg"`` (or ``"cv"``) unless N/n is small.
    ``stepsize`` 0.1–0.5 (:func:`sgmcmc.tune_stepsize` tunes it on this scale) and a
    ``warmup_stepsize`` below the SGLD limit ~0.7/λ_max (:func:`sgmcmc.check_stepsize`).
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["hamcmc"], dict(stepsize=stepsize, memory=memory, damping=damping, warmup_stepsize=warmup_stepsize), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def hamcmc(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    memory: int | None = HAMCMC.defaults["memory"],
    damping: float = HAMCMC.defaults["damping"],
    warmup_stepsize: PerParameter | None = HAMCMC.defaults["warmup_stepsize"],
    n_iters: int = Chain.n_iters,
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
    r"""Run HAMCMC for ``n_iters`` iterations: the set-up and update of :func:`hamcmc_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["hamcmc"], dict(stepsize=stepsize, memory=memory, damping=damping, warmup_stepsize=warmup_stepsize), model, setup, estimator, chain)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, DISTRIBUTE_OPTIONS)
def baoab_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    gamma: PerParameter = BAOAB.defaults["gamma"],
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
    r"""Set up BAOAB Langevin dynamics (Leimkuhler & Matthews 2013; SGMCMCJax's ``baoab``): with
    momentum v kept between iterations, each iteration is a half kick
    :math:`v \leftarrow v + \frac{h}{2}g(\theta)`, a half drift :math:`\theta \leftarrow \theta + \frac{h}{2}v`,
    the exact friction step :math:`v \leftarrow e^{-\gamma h}v + \sqrt{1 - e^{-2\gamma h}}\,N(0, I)`,
    a half drift and a half kick, one gradient evaluation per iteration (the closing kick and the
    next opening kick share it). For a Gaussian posterior and the exact gradient the positions'
    stationary distribution is exact at any stable h (h < 2σ_min), where SGLD's is biased; with
    minibatches the gradient noise adds variance as for every SG-MCMC method. ``stepsize`` is h
    (a number, a dict or a schedule), ``gamma`` the friction (a number or a dict, > 0; the
    Ornstein–Uhlenbeck step is exact, so any γ is stable). See :mod:`sgmcmc.step.dynamics.baoab`.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    return build_sampler(METHODS["baoab"], dict(stepsize=stepsize, gamma=gamma), model, setup, estimator)


@shared_sections(SETUP_PARAMETERS, ESTIMATOR_OPTIONS, CHAIN_OPTIONS, DISTRIBUTE_OPTIONS)
def baoab(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    gamma: PerParameter = BAOAB.defaults["gamma"],
    n_iters: int = Chain.n_iters,
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
    r"""Run BAOAB for ``n_iters`` iterations: the set-up and update of :func:`baoab_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(
        estimator, opt_stepsize=opt_stepsize, n_iters_opt=n_iters_opt, svrg_period=svrg_period, max_memory=max_memory
    )
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    return run_whole_chain(METHODS["baoab"], dict(stepsize=stepsize, gamma=gamma), model, setup, estimator, chain)


@shared_sections(DISTRIBUTE_OPTIONS)
def osgld_setup(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    c: float = OSGLD.defaults["c"],
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    constraints: dict | None = None,
    check_model: bool = True,
    check_stepsize: bool = True,
    estimator: str | EstimatorSpec = "plain",
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up optimal preconditioned SGLD, OSGLD (El hanchi 2018 §2.3, Algorithm 1 "OSGFS";
    El hanchi 2019; SPEC §8) for near-Gaussian posteriors. No stepsize. All parameters are
    flattened into one vector θ ∈ R^d per chain; with g the plain minibatch estimate of the
    log-posterior gradient (SPEC §3; Eq. 3) each iteration is

    Δθ = D g + N(0, [2D − f (N²/n) D C D − D H D]₊)          (Eq. 8)
    D = (k/2) H⁻¹,  H = N C + G                               (Eqs. 9, 10)
    k = min{c, 4 max{n/(N + n), r/(r + N/n)}},  r = λ_min(H⁻¹)/λ_max(H⁻¹ N C H⁻¹)   (Eqs. 15, 16)

    C: the per-row log-likelihood gradient covariance, estimated from each minibatch (sample
    covariance of its n per-row gradients, n − 1 denominator) and averaged with weight
    max(1/t, 1/W), W = max(100, ⌈50p/(n − 1)⌉) (p = d, or 1 in the diagonal form): Algorithm 1's
    cumulative average for W iterations, then an exponential moving average, so that C(θ) of a
    distant start is forgotten. G = −∇² log p(θ) (the prior's
    negative Hessian; I/τ² for a N(0, τ²I) prior; 0 for ``log_prior=None``) by automatic
    differentiation at the current θ. [·]₊ projects onto the positive semi-definite cone
    (eigenvalues clipped at 0), since C is estimated. H's eigenvalues are floored at
    d·ε_dtype·λ_max(H).

    Deviations from the paper: f = 1 − n/N, the finite-population factor of minibatches drawn
    without replacement (SPEC §3; the paper's Eq. 4 has f = 1, as here with
    ``minibatch_replace=True``); the running average of C
    described above (the paper: a cumulative average); the first iterations only estimate C (θ
    does not move) until t·(n − 1) ≥ 4d (4 in the diagonal form) so that H is invertible;
    ``c`` may be 1 (the paper: c < 1).

    Dense d × d matrices for d ≤ 100 (three eigendecompositions per iteration, ~1.5 ms at d = 100);
    above that the diagonal form: C and G are replaced by their diagonals (G's by a one-probe
    Hutchinson estimate, exact for a prior with independent coordinates), so every formula holds
    per coordinate — optimal when the posterior's axes are the coordinate axes, a diagonal
    preconditioner otherwise.

    Parameters
    ----------
    log_lik, dataset, params, log_prior, seed, dtype, n_chains, constraints, check_model
        As for :func:`sgld_setup`. Only the plain minibatch estimator is supported: the noise
        correction assumes plain minibatch noise.
    c : float
        In (0, 1]: the cap on k (Eq. 16; 0.1 "works very well", El hanchi 2018). Larger c, faster
        mixing, larger discretisation error away from Gaussianity.
    minibatch_size : float or int
        As for :func:`sgld_setup`; at least 2 rows (C is a covariance over the minibatch).
    estimator : str, keyword-only
        ``"plain"`` only (accepted for a uniform signature; any other value is refused).
    minibatch_replace : bool, keyword-only
        Rows drawn i.i.d. with replacement (then f = 1 above).
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator(estimator)
    return build_sampler(METHODS["osgld"], dict(c=c), model, setup, estimator)


@shared_sections(DISTRIBUTE_OPTIONS)
def osgld(
    log_lik: LogLik,
    dataset: Dataset,
    params: Starts,
    c: float = OSGLD.defaults["c"],
    log_prior: LogPrior | None = None,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
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
    auto_burn_in: bool = False,
    max_burn_in: int | None = None,
    estimator: str | EstimatorSpec = "plain",
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run OSGLD (optimal preconditioned SGLD, El hanchi 2018 §2.3) for ``n_iters`` iterations:
    the update, its deviations from the paper and the arguments of :func:`osgld_setup`, then the
    whole chain in compiled chunks.

    Chain options as for :func:`sgld`, and:

    auto_burn_in : bool, keyword-only
        Find the burn-in with El hanchi's criterion (2018 Eq. 17) reworked so that its error rates
        do not depend on d (derivation in :mod:`sgmcmc.step.dynamics.osgld`): chain k is ready at the
        first iteration t at which, with ȳ the mean of the estimates g of the last w = ⌈1/k⌉
        iterations whitened by H^-½ and at least w iterations having moved θ, the components z of
        ȳ in the eigenbasis of its stationary covariance aI + b f(N²/n) H^-½CH^-½ (a, b from the
        chain's autocorrelation ρ = 1 − k/2 over the window), each scaled to unit variance, satisfy
        max |z_j| ≤ Φ⁻¹((1 + 0.8^{1/d})/2) and Σ z_j² ≤ χ²_d(0.8): at stationarity it holds with
        probability ≥ 0.6 at every d (the printed Eq. 17, every |mean Y_j| within one
        √diag[(N C + G)/w + f N²/(w n) C], held with probability falling exponentially in d: never
        within 10^4 iterations at d = 26, even from the mode). The criterion is
        evaluated in the compiled loop, which stops once it has held (at any iteration, once is
        enough) for every chain; that iteration is ``samples.burn_in_found``, and then
        ``n_iters`` iterations run and are kept (with ``thin``): draws are the states after
        iterations burn_in_found + thin, + 2·thin, …. The chain itself is the one
        :func:`osgld_setup` with the same seed gives step by step. Not with ``burn_in`` nor
        (yet) with ``checkpoint_dir``.
    max_burn_in : int, keyword-only
        With ``auto_burn_in``: the most iterations the search may run (default 10·n_iters);
        beyond it :class:`sgmcmc.errors.BurnInNotFound` names the chains and the fix.

    Returns
    -------
    Samples
        As for :func:`sgld`; with ``auto_burn_in``, ``burn_in_found`` is the iteration at which
        the criterion first held for all chains (also on the samples an exception carries).
    """
    model = Model(dataset, params, log_lik, log_prior, check_model=check_model, check_stepsize=check_stepsize, constraints=constraints)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator(estimator)
    chain = Chain(n_iters, burn_in, thin, store_gradients, verbose, checkpoint_dir, checkpoint_every)
    arguments = dict(c=c, auto_burn_in=auto_burn_in)
    if auto_burn_in:
        return run_until_burned_in(METHODS["osgld"], arguments, model, setup, estimator, chain, max_burn_in)
    if max_burn_in is not None:
        raise ValueError("max_burn_in bounds the search of auto_burn_in=True; without it give burn_in= (or drop max_burn_in)")
    return run_whole_chain(METHODS["osgld"], arguments, model, setup, estimator, chain)
