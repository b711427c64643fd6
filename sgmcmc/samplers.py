"""The public samplers with the R package's names and argument order, in snake_case.

``*_setup`` validates input and builds a :class:`~sgmcmc.sampler.Sampler`; the whole-chain
functions are ``*_setup`` + ``init_sess`` + the chain run in compiled chunks.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from . import inputs
from .chain import run_chunked
from .kernels import SGHMC, SGLD, SGNHT
from .sampler import ControlVariateSettings, Sampler
from .session import init_sess

DEFAULT_DTYPE = tf.float32


def _setup(
    method: str,
    make_kernel: Callable[[list[str]], Any],
    log_lik,
    dataset,
    params,
    log_prior,
    minibatch_size,
    seed,
    dtype,
    opt_stepsize=None,
    n_iters_opt: int | None = None,
    verbose: bool = True,
    check_model: bool = True,
) -> Sampler:
    dtype = inputs.as_dtype(dtype)
    params = inputs.check_params(params, dtype)
    names = list(params)
    kernel = make_kernel(names)
    cv = None
    if method.endswith("cv"):
        if opt_stepsize is None:
            raise TypeError(
                f"{method} needs opt_stepsize, the stepsize of the SGD mode search, e.g. "
                f"{method}(log_lik, dataset, params, stepsize, opt_stepsize=1e-5)"
            )
        cv = ControlVariateSettings(
            inputs.per_parameter(opt_stepsize, names, "opt_stepsize"),
            inputs.check_count(n_iters_opt, "n_iters_opt"),
            bool(verbose),
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    data = inputs.check_dataset(dataset, dtype)
    n = inputs.batch_size(minibatch_size, len(next(iter(data.values()))))
    inputs.trial_evaluation(log_lik, log_prior, data, params, dtype, check_model)
    return Sampler(method, kernel, log_lik, log_prior, data, params, n, seed, dtype, cv)


def _sgld(stepsize):
    return lambda names: SGLD(inputs.per_parameter(stepsize, names, "stepsize"))


def _sghmc(stepsize, alpha, L):
    return lambda names: SGHMC(
        inputs.per_parameter(stepsize, names, "stepsize"),
        inputs.per_parameter(alpha, names, "alpha"),
        inputs.check_count(L, "L"),
    )


def _sgnht(stepsize, a):
    return lambda names: SGNHT(inputs.per_parameter(stepsize, names, "stepsize"), inputs.per_parameter(a, names, "a"))


def sample_chain(sampler: Sampler, n_iters: int, verbose: bool = True) -> dict[str, np.ndarray]:
    """Prepare ``sampler`` (:func:`init_sess`) and run ``n_iters`` iterations in compiled chunks.

    Returns name -> array ``(n_iters, *param_shape)``; row i is the state after iteration
    i + 1. On Ctrl-C the completed iterations are returned with a ``RuntimeWarning``; on
    divergence a :class:`~sgmcmc.DivergenceError` carries them.
    """
    n_iters = inputs.check_count(n_iters, "n_iters")
    init_sess(sampler, verbose)
    return run_chunked(
        sampler.run_chunk,
        n_iters,
        {k: tuple(v.shape) for k, v in sampler.params.items()},
        np.dtype(sampler.dtype.as_numpy_dtype),
        desc=sampler.method,
        verbose=verbose,
        hint="try a smaller stepsize",
        keep_on_interrupt=True,
    )


# -- step-by-step set-up (R: sgldSetup, ...) ------------------------------------------------


def sgld_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    r"""Set up SGLD: :math:`\theta \leftarrow \theta + \frac{\epsilon}{2}g(\theta) + N(0, \epsilon)`.

    Parameters
    ----------
    log_lik : callable
        ``log_lik(params, dataset)``: the SUM of the log-likelihood over the rows of
        ``dataset`` it is given, a scalar tensor, written with TF/TFP ops.
    dataset : dict
        Name -> array-like, observations on the first axis (all the same length N).
        Floating entries are cast to ``dtype``; integer entries stay integers.
    params : dict
        Name -> starting value (scalar or array); its shape is the parameter's.
    stepsize : float or dict
        ε: one number for all parameters, or a dict with exactly the names of ``params``.
    log_prior : callable, optional
        ``log_prior(params)``, a scalar tensor; None is a flat prior.
    minibatch_size : float or int
        A proportion of N in (0, 1), or a count of rows.
    seed : int, optional
        Makes the run reproducible; None draws fresh randomness.
    dtype : tf.DType, keyword-only
        ``tf.float32`` (default) or ``tf.float64``.
    check_model : bool, keyword-only
        True (default) stops with an error on a parameter no function uses and on a
        ``log_lik`` that is not a sum over the rows it is given; False skips those checks.
    """
    return _setup("sgld", _sgld(stepsize), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, check_model=check_model)


def sghmc_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    r"""Set up SGHMC (Chen et al. 2014, :math:`\hat\beta = 0`): each iteration resamples
    :math:`\nu \sim N(0, \epsilon)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon g(\theta) - \alpha\nu + N(0, 2\alpha\epsilon)`,
    :math:`\theta \leftarrow \theta + \nu`. ``alpha`` is a number or a dict like ``stepsize``;
    other arguments as :func:`sgld_setup`."""
    return _setup("sghmc", _sghmc(stepsize, alpha, L), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, check_model=check_model)


def sgnht_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, a=0.01, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    r"""Set up SGNHT (Ding et al. 2014): momentum :math:`u \sim N(0, \epsilon)` once,
    thermostat :math:`\alpha = a` per parameter; each iteration
    :math:`u \leftarrow u + \epsilon g(\theta) - \alpha u + N(0, 2a\epsilon)`,
    :math:`\theta \leftarrow \theta + u`, :math:`\alpha \leftarrow \alpha + \overline{u^2} - \epsilon`.
    Other arguments as :func:`sgld_setup`."""
    return _setup("sgnht", _sgnht(stepsize, a), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, check_model=check_model)


def sgldcv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    r"""Set up SGLD with control variates (Baker et al. 2018): the gradient is
    :math:`\nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta)`, :math:`\hat\theta` the
    mode found by ``n_iters_opt`` SGD steps of size ``opt_stepsize`` in :func:`init_sess`.
    ``verbose`` is kept for R compatibility; :func:`init_sess`'s own ``verbose`` governs its
    progress. Other arguments as :func:`sgld_setup`."""
    return _setup("sgldcv", _sgld(stepsize), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, opt_stepsize, n_iters_opt, verbose, check_model=check_model)


def sghmccv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    """Set up SGHMC with control variates: :func:`sghmc_setup` dynamics with the gradient of
    :func:`sgldcv_setup`."""
    return _setup("sghmccv", _sghmc(stepsize, alpha, L), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, opt_stepsize, n_iters_opt, verbose, check_model=check_model)


def sgnhtcv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, a=0.01, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> Sampler:
    """Set up SGNHT with control variates: :func:`sgnht_setup` dynamics with the gradient of
    :func:`sgldcv_setup`."""
    return _setup("sgnhtcv", _sgnht(stepsize, a), log_lik, dataset, params, log_prior, minibatch_size, seed, dtype, opt_stepsize, n_iters_opt, verbose, check_model=check_model)


# -- whole chains (R: sgld, ...) --------------------------------------------------------------


def sgld(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGLD for ``n_iters`` iterations; returns name -> array ``(n_iters, *param_shape)``.
    Arguments as :func:`sgld_setup`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sgld_setup(log_lik, dataset, params, stepsize, log_prior, minibatch_size, seed, dtype=dtype, check_model=check_model), n_iters, verbose)


def sghmc(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGHMC; arguments as :func:`sghmc_setup`, output as :func:`sgld`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sghmc_setup(log_lik, dataset, params, stepsize, log_prior, minibatch_size, alpha, L, seed, dtype=dtype, check_model=check_model), n_iters, verbose)


def sgnht(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, a=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGNHT; arguments as :func:`sgnht_setup`, output as :func:`sgld`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sgnht_setup(log_lik, dataset, params, stepsize, log_prior, minibatch_size, a, seed, dtype=dtype, check_model=check_model), n_iters, verbose)


def sgldcv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGLD-CV: the mode search, then ``n_iters`` iterations from the mode. Arguments as
    :func:`sgldcv_setup`, output as :func:`sgld`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sgldcv_setup(log_lik, dataset, params, stepsize, opt_stepsize, log_prior, minibatch_size, n_iters_opt, verbose, seed, dtype=dtype, check_model=check_model), n_iters, verbose)


def sghmccv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGHMC-CV; arguments as :func:`sghmccv_setup`, output as :func:`sgld`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sghmccv_setup(log_lik, dataset, params, stepsize, opt_stepsize, log_prior, minibatch_size, alpha, L, n_iters_opt, verbose, seed, dtype=dtype, check_model=check_model), n_iters, verbose)


def sgnhtcv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, a=0.01, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, check_model=True) -> dict[str, np.ndarray]:
    """Run SGNHT-CV; arguments as :func:`sgnhtcv_setup`, output as :func:`sgld`."""
    inputs.check_count(n_iters, "n_iters")
    return sample_chain(sgnhtcv_setup(log_lik, dataset, params, stepsize, opt_stepsize, log_prior, minibatch_size, a, n_iters_opt, verbose, seed, dtype=dtype, check_model=check_model), n_iters, verbose)
