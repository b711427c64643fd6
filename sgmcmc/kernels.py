"""Transition kernels: one iteration of each sampler, built from a dynamics and an estimator.

A kernel is stateless apart from its hyperparameters. ``init_aux`` makes the auxiliary
state (momenta, thermostats) and ``one_step`` maps ``(params, aux)`` to the next
``(params, aux)``; the estimator (plain or control variate, :mod:`sgmcmc.gradients`) and the
normal draws are passed in, so every dynamics works with every estimator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tensorflow as tf

from . import dynamics

Params = dict[str, tf.Tensor]
Aux = dict[str, dict[str, tf.Tensor]]
Estimator = Callable[[Params], tuple[tf.Tensor, Params]]
#: ``normal(params)``: standard normal noise shaped like each parameter (one draw for all).
Normal = Callable[[Params], Params]


@dataclass(frozen=True)
class SGLD:
    stepsize: dict[str, float]

    def init_aux(self, params: Params, normal: Normal) -> Aux:
        return {}

    def one_step(self, params: Params, aux: Aux, estimate: Estimator, normal: Normal):
        log_post, grads = estimate(params)
        noise = normal(params)
        new = {k: dynamics.sgld_update(params[k], grads[k], noise[k], self.stepsize[k]) for k in params}
        return new, aux, log_post


@dataclass(frozen=True)
class SGHMC:
    """SGHMC: momentum resampled every iteration, then ``L`` inner steps, each with a fresh
    minibatch. The momentum does not outlive an iteration, so there is no auxiliary state."""

    stepsize: dict[str, float]
    alpha: dict[str, float]
    L: int

    def init_aux(self, params: Params, normal: Normal) -> Aux:
        return {}

    def one_step(self, params: Params, aux: Aux, estimate: Estimator, normal: Normal):
        params = dict(params)
        refresh = normal(params)
        nu = {k: dynamics.momentum_refresh(refresh[k], self.stepsize[k]) for k in params}
        first_log_post = None
        for _ in range(self.L):
            log_post, grads = estimate(params)
            if first_log_post is None:
                first_log_post = log_post
            noise = normal(params)
            for k in params:
                params[k], nu[k] = dynamics.sghmc_update(
                    params[k], nu[k], grads[k], noise[k], self.stepsize[k], self.alpha[k]
                )
        return params, aux, first_log_post


@dataclass(frozen=True)
class SGNHT:
    """SGNHT: momentum drawn once from N(0, ε), thermostats start at ``a``."""

    stepsize: dict[str, float]
    a: dict[str, float]

    def init_aux(self, params: Params, normal: Normal) -> Aux:
        return {
            "momentum": {k: dynamics.momentum_refresh(xi, self.stepsize[k]) for k, xi in normal(params).items()},
            "thermostat": {k: tf.constant(self.a[k], p.dtype) for k, p in params.items()},
        }

    def one_step(self, params: Params, aux: Aux, estimate: Estimator, normal: Normal):
        log_post, grads = estimate(params)
        u, thermostat = dict(aux["momentum"]), dict(aux["thermostat"])
        noise = normal(params)
        new = {}
        for k in params:
            new[k], u[k], thermostat[k] = dynamics.sgnht_update(
                params[k], u[k], thermostat[k], grads[k], noise[k], self.stepsize[k], self.a[k]
            )
        return new, {"momentum": u, "thermostat": thermostat}, log_post


@dataclass(frozen=True)
class SGD:
    """Stochastic-gradient ascent to the posterior mode (the control-variate optimisation)."""

    stepsize: dict[str, float]

    def init_aux(self, params: Params, normal: Normal) -> Aux:
        return {}

    def one_step(self, params: Params, aux: Aux, estimate: Estimator, normal: Normal):
        log_post, grads = estimate(params)
        return {k: dynamics.sgd_update(params[k], grads[k], self.stepsize[k]) for k in params}, aux, log_post
