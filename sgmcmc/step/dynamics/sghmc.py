"""Stochastic gradient Hamiltonian Monte Carlo with β̂ = 0 (Chen et al. 2014), leapfrog start."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from typing import Any, ClassVar, Mapping

from ... import checks
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions
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

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SGHMC",
        argument_types={"alpha": "PerParameter", "L": "int"},
        parameter_docs={
            "alpha": """    alpha : float or dict
        α, the friction: a number, or a dict like ``stepsize``.
""",
            "L": """    L : int
        Kicks (leapfrog steps, each on a fresh minibatch) per iteration: an iteration costs about
        ``L`` SGLD iterations.
""",
        },
        cv_setup_doc=r"""Set up SGHMC with control variates: :func:`sghmc_setup` dynamics with the gradient of
    :func:`sgldcv_setup`.
    """,
        setup_doc=r"""Set up SGHMC (Chen et al. 2014, :math:`\hat\beta = 0`): each iteration resamples
    :math:`\nu \sim N(0, \epsilon)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon g(\theta) - \alpha\nu + N(0, 2\alpha\epsilon)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick (leapfrog; SPEC §3).
    Other arguments as :func:`sgld_setup`.
    """,
    )

    stepsize: dict
    alpha: dict
    L: int

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "alpha", "L")
    stepsize_stability: ClassVar[str | None] = "sghmc"

    @classmethod
    def sd_ratio(cls, mu: float, noise: float = 0.0, alpha: float = 0.01, L: int = 5, **hyper: float) -> float:
        """The exact per-iteration recursion: friction ``alpha``, ``L`` leapfrog steps, the noise
        entering every kick; NaN with ``alpha = 0`` (no stationary sd)."""
        if mu <= 0:
            return 1.0
        q = max(float(noise), 0.0)
        # Coefficients of u over [u_t, w_0, xi_1..xi_L, zeta_1..zeta_L] through one iteration
        # (xi: the injected noise of kick j, zeta: the gradient noise of kick j).
        size = 2 + 2 * L
        u = np.zeros(size)
        u[0] = 1.0
        w = np.zeros(size)
        w[1] = 1.0
        for j in range(L):
            f = 0.5 if j == 0 else 1.0
            kick = np.zeros(size)
            kick[2 + j] = np.sqrt(2.0 * f * alpha)
            kick[2 + L + j] = f * np.sqrt(q)
            w = w - f * mu * u - alpha * w + kick
            u = u + w
        if abs(u[0]) > 1.0 + 1e-9:
            return np.inf
        if abs(u[0]) >= 1.0 - 1e-9:  # no friction: neither growing nor settling (no stationary sd)
            return np.nan
        return float(np.sqrt(mu * np.sum(u[1:] ** 2) / (1.0 - u[0] ** 2)))

    @classmethod
    def distortion_hyperparameters(cls, names: list[str], values: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        alphas = checks.per_parameter(values["alpha"], names, "alpha")
        return {k: {"alpha": float(alphas[k]), "L": int(values["L"])} for k in names}
    defaults: ClassVar[dict[str, Any]] = {"alpha": 0.01, "L": 5}

    @property
    def minibatches_per_iteration(self) -> int:
        """A fresh minibatch for each of the L kicks."""
        return self.L

    @property
    def gradient_evaluations(self) -> int:
        return self.L

    @property
    def moves_per_iteration(self) -> int:
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

        def kick(state, first: bool):
            params, nu = state
            est = estimate(params)
            noise = switch_noise(rng.normal(params), noise_on)
            fraction = 0.5 if first else 1.0
            nu = {k: sghmc_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], fraction) for k in params}
            return ({k: params[k] + nu[k] for k in params}, nu), est

        (params, _), first = estimate.repeat(kick, (params, nu), self.L, rng)
        return params, aux, first
