"""Stochastic gradient Nosé–Hoover thermostat (Ding et al. 2014)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from typing import Any, ClassVar, Mapping

from ... import checks
from ..contract import Estimate, Estimator, Params, reduce_per_chain, stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions


def sgnht_update(theta, u, thermostat, grad, noise, stepsize, a):
    r"""One SGNHT step (Ding et al. 2014, Algorithm 2), one thermostat per parameter and chain:

    .. math::
        u' = u + \epsilon g(\theta) - \alpha u + \sqrt{2a\epsilon}\,\xi, \qquad
        \theta' = \theta + u', \qquad
        \alpha' = \alpha + \overline{u'^2} - \epsilon

    :math:`\overline{u'^2}` is the mean over the parameter's elements (per chain; ``thermostat``
    is ``[K, 1, …]``). Returns ``(theta', u', alpha')``.
    """
    u = u + stepsize * grad - thermostat * u + tf.sqrt(tf.cast(2.0 * a * stepsize, u.dtype)) * noise
    thermostat = thermostat + reduce_per_chain(tf.reduce_mean, tf.square(u)) - stepsize
    return theta + u, u, thermostat


@dataclass(frozen=True)
class SGNHT(Dynamics):
    """SGNHT: momentum drawn once from N(0, ε), thermostats start at ``a``."""

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SGNHT",
        argument_types={"a": "PerParameter"},
        parameter_docs={"a": r"""    a : float or dict
        The diffusion a: the thermostats start at ``a`` and the injected noise is
        :math:`N(0, 2a\epsilon)`; a number, or a dict like ``stepsize``.
"""},
        cv_setup_doc=r"""Set up SGNHT with control variates: :func:`sgnht_setup` dynamics with the gradient of
    :func:`sgldcv_setup`.
    """,
        setup_doc=r"""Set up SGNHT (Ding et al. 2014): momentum :math:`u \sim N(0, \epsilon)` once,
    thermostat :math:`\alpha = a` per parameter; each iteration
    :math:`u \leftarrow u + \epsilon g(\theta) - \alpha u + N(0, 2a\epsilon)`,
    :math:`\theta \leftarrow \theta + u`, :math:`\alpha \leftarrow \alpha + \overline{u^2} - \epsilon`.
    Other arguments as :func:`sgld_setup`.
    """,
    )

    stepsize: dict
    a: dict
    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "a")
    stepsize_stability: ClassVar[str | None] = "sgnht"

    @classmethod
    def sd_ratio(cls, mu: float, noise: float = 0.0, a: float = 0.01, **hyper: float) -> float:
        """The thermostat frozen at ``a``: (u, w) -> (u + w', w'), w' = (1 - a) w - mu u +
        sqrt(2a) xi + sqrt(q) zeta, a 2-d recursion whose stationary covariance solves the discrete
        Lyapunov equation; NaN with ``a = 0`` (no stationary sd)."""
        if mu <= 0:
            return 1.0
        q = max(float(noise), 0.0)
        m = np.array([[1.0 - mu, 1.0 - a], [-mu, 1.0 - a]])
        radius = float(np.max(np.abs(np.linalg.eigvals(m))))
        if radius > 1.0 + 1e-9:
            return np.inf
        if radius >= 1.0 - 1e-9:  # a = 0: the frozen thermostat gives no friction, no stationary sd
            return np.nan
        drive = (2.0 * a + q) * np.ones((2, 2))
        cov = np.linalg.solve(np.eye(4) - np.kron(m, m), drive.reshape(-1)).reshape(2, 2)
        return float(np.sqrt(mu * cov[0, 0]))

    @classmethod
    def distortion_hyperparameters(cls, names: list[str], values: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        a_s = checks.per_parameter(values["a"], names, "a")
        return {k: {"a": float(a_s[k])} for k in names}
    defaults: ClassVar[dict[str, Any]] = {"a": 0.01}

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "SGNHT":
        return cls(
            checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True),
            checks.per_parameter(arguments["a"], context.names, "a"),
        )

    def init_aux(self, params: Params, rng) -> dict:
        noise = rng.normal(params)
        t0 = tf.constant(1, tf.int64)
        return {
            "momentum": {
                k: tf.sqrt(tf.cast(stepsize_at(self.stepsize[k], t0, p.dtype), p.dtype)) * noise[k]
                for k, p in params.items()
            },
            "thermostat": {
                k: tf.fill([p.shape[0]] + [1] * (p.shape.rank - 1), tf.constant(self.a[k], p.dtype))
                for k, p in params.items()
            },
        }

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        est = estimate(params)
        u, thermostat = dict(aux["momentum"]), dict(aux["thermostat"])
        noise = rng.normal(params)
        new = {}
        for k in params:
            new[k], u[k], thermostat[k] = sgnht_update(
                params[k], u[k], thermostat[k], est.grads[k], noise[k],
                stepsize_at(self.stepsize[k], t, params[k].dtype), self.a[k],
            )
        return new, {"momentum": u, "thermostat": thermostat}, est
