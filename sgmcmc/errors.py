"""Exceptions raised by the samplers."""

from __future__ import annotations

import numpy as np


class DivergenceError(RuntimeError):
    """The chain (or the control-variate optimisation) produced NaN or Inf.

    Attributes
    ----------
    iteration : int
        The 1-based iteration at which the first non-finite value appeared.
    samples : dict[str, numpy.ndarray]
        Every sample drawn before that iteration, shape ``(iteration - 1, *param_shape)``
        (empty arrays for a divergence during the optimisation or in a step-by-step run).
    """

    def __init__(self, message: str, iteration: int, samples: dict[str, np.ndarray] | None = None):
        super().__init__(message)
        self.iteration = iteration
        self.samples = samples if samples is not None else {}


class NotInitialisedError(RuntimeError):
    """``sgmcmc_step`` or ``get_params`` was called before ``init_sess``."""
