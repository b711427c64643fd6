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


@dataclass(frozen=True)
class SGLD(Dynamics):
    stepsize: dict
    stepsize_stability: ClassVar[str | None] = "sgld"

    def init_aux(self, params: Params, rng) -> dict:
        return {}

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        est = estimate(params)
        noise = rng.normal(params)
        new = {
            k: sgld_update(params[k], est.grads[k], noise[k], stepsize_at(self.stepsize[k], t, params[k].dtype))
            for k in params
        }
        return new, aux, est
