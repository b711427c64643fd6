"""Exceptions raised by the samplers. Each one raised mid-run carries what was computed."""

from __future__ import annotations


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
    """An operation failed mid-run (e.g. an index out of range in ``log_lik``); the original
    TensorFlow error is the ``__cause__``.

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
