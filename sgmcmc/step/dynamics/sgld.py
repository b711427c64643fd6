"""Stochastic gradient Langevin dynamics (Welling & Teh 2011)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import tensorflow as tf

from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, PublicFunctions


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
    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SGLD",
        cv_setup_doc=r"""Set up SGLD with control variates (Baker et al. 2018): the gradient is
    :math:`\nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta)`, :math:`\hat\theta` the
    mode found by ``n_iters_opt`` SGD steps of size ``opt_stepsize`` in :func:`init_sess` (from
    the first start; one mode search and one full-data gradient shared by all chains). Other
    arguments as :func:`sgld_setup`.
    """,
        setup_doc=r"""Set up SGLD (Welling & Teh 2011; SPEC §3):
    :math:`\theta \leftarrow \theta + \frac{\epsilon}{2}g(\theta) + N(0, \epsilon)`, g the gradient
    estimate (``estimator``).
    """,
    )

    stepsize: dict
    stepsize_stability: ClassVar[str | None] = "sgld"

    @classmethod
    def sd_ratio(cls, mu: float, noise: float = 0.0, **hyper: float) -> float:
        r""":math:`\rho^2 = (1 + q/4)/(1 - \mu/4)` (exact on a Gaussian), ``inf`` from μ = 4."""
        if mu <= 0:
            return 1.0
        q = max(float(noise), 0.0)
        return float(np.sqrt((1.0 + q / 4.0) / (1.0 - mu / 4.0))) if mu < 4.0 else np.inf

    @classmethod
    def stability_limit(cls, **hyper: float) -> float:
        return 4.0

    @classmethod
    def safe_factor(cls, mu: float, noise: float = 0.0, distortion: float = 0.1, **hyper: float) -> float:
        r"""Closed form: :math:`c = 4((1+\delta)^2 - 1)/(q + \mu(1+\delta)^2)`."""
        if mu <= 0 and noise <= 0:
            return np.inf
        grow = (1.0 + distortion) ** 2
        return 4.0 * (grow - 1.0) / (max(noise, 0.0) + max(mu, 0.0) * grow)

    @classmethod
    def largest_safe_mu(cls, distortion: float = 0.1, **hyper: float) -> float:
        r"""Closed form: :math:`4(1 - (1+\delta)^{-2})`."""
        return 4.0 * (1.0 - (1.0 + distortion) ** -2)

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
