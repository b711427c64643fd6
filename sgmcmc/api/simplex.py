"""The samplers for parameters on the probability simplex (SPEC §9; thesis ch. 5): SCIR and SGRLD.
The user gives ``counts`` and a Dirichlet ``alpha`` instead of ``log_lik``/``log_prior``.
"""

from __future__ import annotations

import tensorflow as tf

from ..step.estimators import resolve_estimator
from ..run.sampler import Sampler
from ..analysis.samples import Samples
from .build import build_sampler
from .docs import DISTRIBUTE_OPTIONS, SIMPLEX_CHAIN, SIMPLEX_PARAMETERS, shared_sections
from ..step.methods import METHODS
from .options import Chain, Counts, Dataset, PerParameter, Starts, Model, Setup
from .runs import run_whole_chain


@shared_sections(SIMPLEX_PARAMETERS, DISTRIBUTE_OPTIONS)
def scir_setup(
    counts: Counts,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    alpha: PerParameter,
    minibatch_size: float = Setup.minibatch_size,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up SCIR, the stochastic Cox–Ingersoll–Ross sampler (thesis §5.3, Algorithm 3).

    Each θⱼ moves by the exact CIR transition over time h (eq. 5.3.2 with â, eq. 5.3.3):
    θ' = (1 − e^(−h))/2 · W, W ~ χ²(2â, 2θe^(−h)/(1 − e^(−h))), drawn as
    θ' = (1 − e^(−h)) · Gamma(â + P, 1), P ~ Poisson(θe^(−h)/(1 − e^(−h))) — no discretisation error;
    the only error is the minibatch's (Corollary 5.4.2: E[θ̂_M] is the exact process's mean, the
    variance grows by (1 − e^(−2Mh))(1 − e^(−h))/(1 + e^(−h)) Var[â]). The gamma draw is made in log
    space, so tiny components are right down to small α; in float32 values of ω below 1.2e-38 may
    round to 0 (use ``dtype=tf.float64`` when they matter).
    """
    model = Model(dataset, params, counts=counts)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator("plain")
    return build_sampler(METHODS["scir"], dict(stepsize=stepsize, alpha=alpha), model, setup, estimator)


@shared_sections(SIMPLEX_PARAMETERS, SIMPLEX_CHAIN, DISTRIBUTE_OPTIONS)
def scir(
    counts: Counts,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    alpha: PerParameter,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    burn_in: int = Chain.burn_in,
    thin: int = Chain.thin,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run SCIR for ``n_iters`` iterations: the set-up and update of :func:`scir_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, counts=counts)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("plain")
    chain = Chain(n_iters, burn_in, thin, False, verbose)
    return run_whole_chain(METHODS["scir"], dict(stepsize=stepsize, alpha=alpha), model, setup, estimator, chain)


@shared_sections(SIMPLEX_PARAMETERS, DISTRIBUTE_OPTIONS)
def sgrld_setup(
    counts: Counts,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    alpha: PerParameter,
    minibatch_size: float = Setup.minibatch_size,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Sampler:
    r"""Set up SGRLD with the expanded-mean parametrisation (Patterson & Teh 2013; thesis
    §5.2.2), the baseline SCIR is compared with: the Euler–Maruyama step of the same CIR diffusion
    (5.3.1), mirrored at 0,

    θ' = |θ + h(â − θ) + √(2hθ) ξ|, ξ ~ N(0, 1),

    which has a discretisation error: for sparse posteriors (components near 0) it is badly biased
    unless h is small (thesis §5.2.3, Fig. 5.2.1).
    """
    model = Model(dataset, params, counts=counts)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows)
    estimator = resolve_estimator("plain")
    return build_sampler(METHODS["sgrld"], dict(stepsize=stepsize, alpha=alpha), model, setup, estimator)


@shared_sections(SIMPLEX_PARAMETERS, SIMPLEX_CHAIN, DISTRIBUTE_OPTIONS)
def sgrld(
    counts: Counts,
    dataset: Dataset,
    params: Starts,
    stepsize: PerParameter,
    alpha: PerParameter,
    minibatch_size: float = Setup.minibatch_size,
    n_iters: int = Chain.n_iters,
    verbose: bool = True,
    seed: int | None = None,
    *,
    dtype: tf.DType = Setup.dtype,
    n_chains: int = Setup.n_chains,
    burn_in: int = Chain.burn_in,
    thin: int = Chain.thin,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> Samples:
    r"""Run SGRLD for ``n_iters`` iterations: the set-up and update of :func:`sgrld_setup`, then
    the whole chain in compiled chunks.
    """
    model = Model(dataset, params, counts=counts)
    setup = Setup(minibatch_size, seed, dtype, n_chains, minibatch_replace, strategy, shard_rows, verbose)
    estimator = resolve_estimator("plain")
    chain = Chain(n_iters, burn_in, thin, False, verbose)
    return run_whole_chain(METHODS["sgrld"], dict(stepsize=stepsize, alpha=alpha), model, setup, estimator, chain)
