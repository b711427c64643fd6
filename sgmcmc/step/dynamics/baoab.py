r"""BAOAB Langevin dynamics with stochastic gradients (Leimkuhler & Matthews 2013, §2; the
``baoab`` diffusion of SGMCMCJax).

Underdamped Langevin dynamics :math:`d\theta = v\,dt`,
:math:`dv = \nabla\log p(\theta|x)\,dt - \gamma v\,dt + \sqrt{2\gamma}\,dW` (unit mass, unit
temperature) split into kicks B, drifts A and an exact Ornstein–Uhlenbeck step O:

.. math::
    B:\ v \leftarrow v + \tfrac{h}{2} g(\theta), \quad
    A:\ \theta \leftarrow \theta + \tfrac{h}{2} v, \quad
    O:\ v \leftarrow e^{-\gamma h} v + \sqrt{1 - e^{-2\gamma h}}\,\xi,

one iteration being B A O A B. For a Gaussian target and the exact gradient, the positions'
stationary distribution is the target's exactly, at any stable h (h < 2σ_min; Leimkuhler &
Matthews 2013, §4.1) — the discretisation error is in the momenta only; SGLD's sampled variance
is biased at every h (by 1/(1 − h/(4σ²)) with its ε = h). With minibatches the gradient noise
adds its own variance (of order h·N²/n), as for every SG-MCMC method.

One gradient evaluation per iteration: the closing B of an iteration and the opening B of the
next use the same estimate at the same point, so they are merged; the momentum kept between
iterations is the one after the opening half kick. The chain starts with that momentum drawn as
N(0, I) (the start's half kick is not made: no gradient is evaluated at the start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import tensorflow as tf

from ... import checks
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions


def baoab_aoa(theta: tf.Tensor, v: tf.Tensor, noise: tf.Tensor, h, gamma) -> tuple[tf.Tensor, tf.Tensor]:
    r"""The A O A part of an iteration: drift h/2, the exact O step, drift h/2."""
    theta = theta + (0.5 * h) * v
    decay = tf.exp(-tf.cast(gamma * h, v.dtype))
    v = decay * v + tf.sqrt(1.0 - decay * decay) * noise
    return theta + (0.5 * h) * v, v


@dataclass(frozen=True)
class BAOAB(Dynamics):
    """The BAOAB kernel (module docstring); ``stepsize`` h and ``gamma`` (friction) per parameter."""

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="BAOAB",
        argument_types={"gamma": "PerParameter"},
        parameter_docs={"gamma": """    gamma : float or dict
        γ > 0, the friction: a number, or a dict like ``stepsize`` (the Ornstein–Uhlenbeck step
        is exact, so any γ is stable).
"""},
        setup_doc=r"""Set up BAOAB Langevin dynamics (Leimkuhler & Matthews 2013; SGMCMCJax's ``baoab``): with
    momentum v kept between iterations, each iteration is a half kick
    :math:`v \leftarrow v + \frac{h}{2}g(\theta)`, a half drift :math:`\theta \leftarrow \theta + \frac{h}{2}v`,
    the exact friction step :math:`v \leftarrow e^{-\gamma h}v + \sqrt{1 - e^{-2\gamma h}}\,N(0, I)`,
    a half drift and a half kick, one gradient evaluation per iteration (the closing kick and the
    next opening kick share it). For a Gaussian posterior and the exact gradient the positions'
    stationary distribution is exact at any stable h (h < 2σ_min), where SGLD's is biased; with
    minibatches the gradient noise adds variance as for every SG-MCMC method. ``stepsize`` is h
    (a number, a dict or a schedule). See :mod:`sgmcmc.step.dynamics.baoab`.
    """,
    )

    stepsize: dict
    gamma: dict
    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "gamma")
    #: h is a time step of the Hamiltonian part (stable for h√λ < 2): under log p / T, whose
    #: curvature is λ/T, h√T keeps h√λ.
    temperature_powers: ClassVar[dict[str, float]] = {"stepsize": 0.5}
    defaults: ClassVar[dict[str, Any]] = {"gamma": 1.0}

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "BAOAB":
        return cls(
            checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True),
            checks.per_parameter(arguments["gamma"], context.names, "gamma"),
        )

    def init_aux(self, params: Params, rng) -> dict:
        chains = tf.shape(next(iter(params.values())))[:1]
        return {
            "v": rng.normal(params),
            "log_post": tf.zeros(chains, next(iter(params.values())).dtype),
            "grads": {k: tf.zeros_like(p) for k, p in params.items()},
        }

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        noise = rng.normal(params)
        moved, v = {}, {}
        for k in params:
            h = stepsize_at(self.stepsize[k], t, params[k].dtype)
            moved[k], v[k] = baoab_aoa(params[k], aux["v"][k], noise[k], h, self.gamma[k])
        est = estimate(moved)
        for k in params:  # the closing half kick and the next iteration's opening one
            v[k] = v[k] + stepsize_at(self.stepsize[k], t, params[k].dtype) * est.grads[k]
        before = Estimate(aux["log_post"], aux["grads"])  # made at this iteration's start
        return moved, {"v": v, "log_post": est.log_post, "grads": est.grads}, before

