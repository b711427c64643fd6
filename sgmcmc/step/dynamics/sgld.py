"""Stochastic gradient Langevin dynamics (Welling & Teh 2011)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import tensorflow as tf

from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics


def sgld_update(theta: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize) -> tf.Tensor:
    r"""One SGLD step (SPEC §3; thesis eq. 2.2.4 in the ε/2 convention of ch.4):

    .. math:: \theta' = \theta + \tfrac{\epsilon}{2} g(\theta) + \sqrt{\epsilon}\,\xi
    """
    return theta + (0.5 * stepsize) * grad + tf.sqrt(tf.cast(stepsize, theta.dtype)) * noise


def switch_noise(noise: dict, noise_on) -> dict:
    """A normal draw (by parameter) times ``noise_on`` (a scalar tensor; None: as drawn)."""
    return noise if noise_on is None else {k: tf.cast(noise_on, v.dtype) * v for k, v in noise.items()}


@dataclass(frozen=True)
class SGLD(Dynamics):
    stepsize: dict
    stepsize_stability: ClassVar[str | None] = "sgld"

    def init_aux(self, params: Params, rng) -> dict:
        return {}

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        return self.update_at(params, aux, estimate, rng, {k: stepsize_at(self.stepsize[k], t, params[k].dtype) for k in params})

    def update_at(self, params: Params, aux: dict, estimate: Estimator, rng, eps: dict, noise_on=None):
        """One iteration with the stepsizes ``eps`` (by parameter); ``noise_on``, a scalar tensor
        (1: SGLD, 0: the noise-free step θ + (ε/2) g) or None (SGLD), scales the injected noise."""
        est = estimate(params)
        noise = switch_noise(rng.normal(params), noise_on)
        return {k: sgld_update(params[k], est.grads[k], noise[k], eps[k]) for k in params}, aux, est
