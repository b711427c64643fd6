r"""``temperature=T``: sample the tempered posterior :math:`p(\theta \mid x)^{1/T}` (SPEC §15).

The chain runs on :math:`\log p(\theta \mid x) / T`: the user's log-likelihood and log prior are
each divided by T (before constraints add their log-Jacobian, which a change of variables of the
tempered density keeps as it is), so every sampler, estimator, mode search and stepsize check
works on the tempered posterior unchanged. The stepsize keeps its meaning: each hyperparameter in
the dynamics' ``temperature_powers`` is multiplied by :math:`T^{\text{power}}` —

* SGLD, SGHMC, SGNHT and their CV and cyclical forms: the stepsize by T. On
  :math:`\log p / T` with stepsize :math:`\epsilon T` the drift is that of ε on log p and the
  injected noise is scaled by √T — the usual cold-posterior dynamics (Wenzel et al. 2020). The
  stability check's :math:`\mu = \epsilon T \cdot \lambda/T = \epsilon\lambda` is unchanged, and
  the minibatch noise (which is not tempered) weighs 1/T as much against the injected noise: the
  check sees that by itself;
* pSGLD, HAMCMC, OSGLD: nothing (their preconditioners, built from the tempered gradients, scale
  by themselves); HAMCMC's SGLD warm-up stepsize by T;
* BAOAB: its time step by √T (h√λ is what its stability depends on).

The CV mode search's ``opt_stepsize`` is multiplied by T as well: SGD on log p / T with εT is SGD
on log p with ε, the same search to the same mode. What the stepsize check reports (stepsizes,
curvatures) is turned back into the user's units (:meth:`StepsizeCheck.at_temperature`). The
log posterior a run records, and stored gradients, are the tempered density's (what the chain
samples; KSD and ZV then judge the tempered target). T = 1 changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from .schedules import Scaled


def check_temperature(value: Any) -> float:
    """``temperature`` as a float, or a ValueError naming the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or not value > 0:
        raise ValueError(f"temperature={value!r} must be a positive number: 1 samples the posterior, "
                         f"T < 1 a colder (sharper) one, p(θ | x)^(1/T)")
    return float(value)


def tempered(log_lik: Callable, log_prior: Callable | None, temperature: float) -> tuple[Callable, Callable | None]:
    """``log_lik / T`` and ``log_prior / T`` (None stays None: flat)."""
    inverse = 1.0 / temperature

    def divided(function: Callable) -> Callable:
        def tempered_function(*args):
            value = tf.convert_to_tensor(function(*args))
            return value * tf.cast(inverse, value.dtype)

        return tempered_function

    return divided(log_lik), None if log_prior is None else divided(log_prior)


def scaled(value: Any, factor: float) -> Any:
    """A stepsize-like argument times ``factor``: a number, an array, a schedule, or a dict of
    those by parameter name."""
    if factor == 1.0 or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: scaled(v, factor) for k, v in value.items()}
    if callable(value):  # a schedule h(t)
        return Scaled(value, factor)
    return np.asarray(value, dtype=np.float64) * factor if np.ndim(value) else float(value) * factor


def tempered_arguments(arguments: dict[str, Any], powers: Mapping[str, float], temperature: float) -> dict[str, Any]:
    """The dynamics' arguments for the chain on log p / T (module docstring)."""
    if temperature == 1.0:
        return arguments
    return {k: scaled(v, temperature ** powers[k]) if k in powers else v for k, v in arguments.items()}
