"""Stochastic gradient Hamiltonian Monte Carlo with β̂ = 0 (Chen et al. 2014), leapfrog start."""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from typing import Any, ClassVar, Mapping

from ... import checks
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, KernelContext
from .sgld import switch_noise


def sghmc_kick(nu: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize, alpha, fraction: float = 1.0) -> tf.Tensor:
    r"""A (fractional) SGHMC momentum kick, Chen et al. (2014) eq. 15 with :math:`\hat\beta = 0`:

    .. math:: \nu' = \nu + f\epsilon\, g(\theta) - \alpha\nu + \sqrt{2 f \alpha\epsilon}\,\xi

    ``fraction`` f is 1 for a full kick and ½ for the first kick after a momentum refresh.
    """
    return nu + (fraction * stepsize) * grad - alpha * nu + tf.sqrt(tf.cast(2.0 * fraction * alpha * stepsize, nu.dtype)) * noise


@dataclass(frozen=True)
class SGHMC(Dynamics):
    r"""SGHMC (SPEC §3): each iteration resamples :math:`\nu \sim N(0, \epsilon)`, then ``L``
    times a kick with a fresh minibatch and a drift :math:`\theta \leftarrow \theta + \nu`. The
    first kick after the refresh is a half kick (leapfrog). The R package used a full first kick,
    which leaves the sampled variance at about L/(L + 1) of the target's whatever the stepsize
    (0.52 at L = 1, 0.84 at L = 5 on N(0, 1)); the half kick removes that bias
    (tests/test_sghmc_variance.py). The momentum does not outlive an iteration: no aux state.
    """

    stepsize: dict
    alpha: dict
    L: int

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "alpha", "L")
    stepsize_stability: ClassVar[str | None] = "sghmc"
    defaults: ClassVar[dict[str, Any]] = {"alpha": 0.01, "L": 5}

    @property
    def minibatches_per_iteration(self) -> int:
        """A fresh minibatch for each of the L kicks."""
        return self.L

    @property
    def gradient_evaluations(self) -> int:
        return self.L

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "SGHMC":
        return cls(
            checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True),
            checks.per_parameter(arguments["alpha"], context.names, "alpha"),
            checks.check_count(arguments["L"], "L"),
        )

    def init_aux(self, params: Params, rng) -> dict:
        return {}

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        return self.update_at(params, aux, estimate, rng, {k: stepsize_at(self.stepsize[k], t, params[k].dtype) for k in params})

    def update_at(self, params: Params, aux: dict, estimate: Estimator, rng, eps: dict, noise_on=None):
        """One iteration with the stepsizes ``eps`` (by parameter); ``noise_on``, a scalar tensor
        (1: SGHMC, 0: no momentum refresh and no noise in the kicks: SGD with momentum) or None
        (SGHMC), scales every normal draw."""
        params = dict(params)
        refresh = switch_noise(rng.normal(params), noise_on)
        nu = {k: tf.sqrt(tf.cast(eps[k], params[k].dtype)) * refresh[k] for k in params}
        first = None
        for step in range(self.L):
            est = estimate(params)
            first = est if first is None else first
            noise = switch_noise(rng.normal(params), noise_on)
            fraction = 0.5 if step == 0 else 1.0
            for k in params:
                nu[k] = sghmc_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], fraction)
                params[k] = params[k] + nu[k]
        return params, aux, first
