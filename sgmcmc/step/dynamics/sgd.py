"""Stochastic-gradient ascent to the posterior mode (the control-variate optimisation)."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import Estimate, Estimator, Params, stepsize_at


@dataclass(frozen=True)
class SGD:
    r""":math:`\theta' = \theta + h\,g(\theta)` (SPEC §3, control variates)."""

    stepsize: dict

    def init_aux(self, params: Params, rng) -> dict:
        return {}

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        est = estimate(params)
        new = {k: params[k] + stepsize_at(self.stepsize[k], t, params[k].dtype) * est.grads[k] for k in params}
        return new, aux, est
