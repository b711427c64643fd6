"""Exceptions raised by the samplers. Each one raised mid-run carries what was computed."""

from __future__ import annotations

import os
import sys


class DivergenceError(RuntimeError):
    """The chain (or the control-variate mode search) produced NaN or Inf.

    Attributes
    ----------
    iteration : int
        The 1-based iteration at which the first non-finite value appeared.
    samples : sgmcmc.Samples or dict
        Every sample kept before that iteration (empty for a divergence in the mode search or
        in a step-by-step run).
    """

    def __init__(self, message: str, iteration: int, samples=None):
        super().__init__(message)
        self.iteration = iteration
        self.samples = samples if samples is not None else {}


class SamplingError(RuntimeError):
    """An operation failed mid-run (e.g. an index out of range in ``log_lik``), or before
    sampling (the CV mode search, the curvature and full-data passes; e.g. a worker that died,
    with rows sharded: then ``samples`` is empty); the original TensorFlow error is the
    ``__cause__``.

    Attributes
    ----------
    iteration : int
        Iterations completed before the failing chunk.
    samples : sgmcmc.Samples
        Every sample kept until then.
    """

    def __init__(self, message: str, iteration: int, samples):
        super().__init__(message)
        self.iteration = iteration
        self.samples = samples


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a whole-chain run. It stops the script like any ``KeyboardInterrupt`` but
    carries the work done: ``samples`` (every kept sample, including the chunk that was running
    when Ctrl-C arrived) and ``iteration`` (iterations completed). The sampler's state is that
    of ``iteration``, so ``sample_chain`` can continue from it."""

    def __init__(self, message: str, iteration: int, samples):
        super().__init__(message)
        self.iteration = iteration
        self.samples = samples


class NotInitialisedError(RuntimeError):
    """``sgmcmc_step`` or ``get_params`` was called before ``init_sess``."""


class StepsizeWarning(UserWarning):
    """The stepsize is large for the posterior's curvature: the discretised chain's stationary
    sd along the stiffest direction is distorted by more than the stated proportion (see
    :func:`sgmcmc.check_stepsize`). Silence it with
    ``warnings.filterwarnings("ignore", category=sgmcmc.StepsizeWarning)``."""


class StepsizeError(ValueError):
    """The stepsize is beyond the stability limit of the dynamics for the posterior's curvature
    where sampling starts: the chain would diverge or oscillate, not sample. Raised before
    sampling by every gradient sampler whose dynamics has a stability model (SGLD, SGHMC, SGNHT
    and their CV and SVRG/SAGA versions); the message gives a safe stepsize.
    ``check_stepsize=False`` on the sampler skips the check.

    Attributes
    ----------
    check : sgmcmc.StepsizeCheck
        What the check measured (``safe_stepsize``, ``scaled_curvature``, ``stability_limit``, …).
    """

    def __init__(self, message: str, check=None):
        super().__init__(message)
        self.check = check


class ModeSearchError(RuntimeError):
    """The control variate's mode search ended far from the mode even after its extra steps, so
    the control variate would be anchored at the wrong place and the samples would be too wide
    (SPEC §3; :mod:`sgmcmc.run.mode_search`). Nothing was sampled.

    Attributes
    ----------
    distance : float
        The mode estimate's distance from the mode, in posterior sds (Mahalanobis).
    threshold : float
        The distance the search had to reach.
    """

    def __init__(self, message: str, distance: float, threshold: float):
        super().__init__(message)
        self.distance = distance
        self.threshold = threshold


class MixingWarning(UserWarning):
    """The chosen stepsize suits the posterior's stiffest direction but leaves its softest one
    mixing too slowly for the intended run (:func:`sgmcmc.tune_stepsize`): the numbers say how
    many iterations it needs, and what would help (per-parameter stepsizes, reparametrising,
    ``osgld``/``psgld``)."""


class ImproperPosteriorError(ValueError):
    """The log posterior keeps rising, or stays flat, while some parameters run away: it has no
    mode and no finite integral, so there is no posterior to sample (e.g. linearly separable
    classes, or parameters the likelihood sees only through their sum, under the flat default
    prior). Raised before anything is sampled by the control-variate samplers' mode search (the
    four-argument ``sgldcv`` included) and by :func:`sgmcmc.sample`, through
    :func:`sgmcmc.run.improper.check_proper` (its docstring has the test). The fix is a proper
    ``log_prior`` on the parameters named (e.g. ``tfp.distributions.Normal(0, 10).log_prob``
    summed, with a scale you believe the parameters can take).

    Attributes
    ----------
    parameters : list[str]
        The parameter elements (``"beta[3]"``; a scalar parameter by its name) that move most
        along the runaway direction, largest share first (at most five).
    log_posterior : list[float]
        The log posterior along the runaway ray, nearest first (the ray's start first); on the
        full data, or on all rows of the mode search's subsample when that is every row.
    """

    def __init__(self, message: str, parameters=(), log_posterior=()):
        super().__init__(message)
        self.parameters = list(parameters)
        self.log_posterior = list(log_posterior)


class ConvergenceWarning(UserWarning):
    """:func:`sgmcmc.sample` reached its budget (``max_iters`` or ``max_time``) before every
    parameter met the ESS and R-hat targets: the samples are returned, and the message names the
    worst parameters, their figures and what to do (a larger budget, a reparametrisation)."""


class BurnInNotFound(RuntimeError):
    """``auto_burn_in=True``: the burn-in criterion did not hold for every chain within
    ``max_burn_in`` iterations. ``iteration`` is the iterations run; ``chains`` the chains (0-based)
    for which it never held; ``samples`` is empty (nothing is kept before the criterion holds)."""

    def __init__(self, message: str, iteration: int, chains: list[int]):
        super().__init__(message)
        self.iteration = iteration
        self.chains = chains
        self.samples = {}


class CompilationWarning(UserWarning):
    """The model could not be compiled by XLA, so the chain runs in TensorFlow's graph mode (the
    same algorithm and results up to rounding, slower per iteration). Silence it with
    ``warnings.filterwarnings("ignore", category=sgmcmc.CompilationWarning)`` or start in graph
    mode with ``SGMCMC_XLA=0``."""


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside the sgmcmc package, for ``warnings.warn``
    called by the caller of this function (so a warning names the user's line)."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
