r"""Preconditioned SGLD with an RMSprop preconditioner (Li et al. 2016; SPEC §8).

Per element, with ``g`` the full-scale estimate of SPEC §3 (prior + N/n · minibatch sum):

.. math::
    V \leftarrow \beta V + (1-\beta)\, g\odot g, \qquad
    G = \operatorname{diag}\big(1/(\lambda + \sqrt V)\big), \qquad
    \theta \leftarrow \theta + \tfrac{\epsilon}{2} G g + N(0, \epsilon G).

Deviations from Li et al. (2016), Algorithm 1: (i) they build ``V`` from the *mean* per-row
gradient ḡ = g/N; with the full-scale g, √V is N times larger, which only rescales ε and λ (their
(ε, λ) equal our (ε·N, λ·N)); (ii) the correction term Γ(θ) = ∇·G(θ) is omitted, as Li et al.
do in practice (it is O(1 − β) small when V changes slowly); it leaves a bias that vanishes as
the stepsize decreases. ``V`` starts at 0, and the first iteration updates V before using it
(so G is never 1/λ at step 1 unless the gradient is 0). ``V`` lives in the kernel's aux state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from typing import Any, ClassVar, Mapping

from ... import checks
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions


def psgld_update(theta, grad, v, noise, stepsize, beta: float, lam: float):
    r"""One pSGLD step for one parameter: returns ``(theta', V')`` (module docstring)."""
    v = beta * v + (1.0 - beta) * tf.square(grad)
    precond = 1.0 / (lam + tf.sqrt(v))
    eps = tf.cast(stepsize, theta.dtype)
    return theta + (0.5 * eps) * precond * grad + tf.sqrt(eps * precond) * noise, v


@dataclass(frozen=True)
class PSGLD(Dynamics):
    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="pSGLD",
        argument_types={"beta": "float", "lam": "float"},
        parameter_docs={
            "beta": """    beta : float
        β in [0, 1): the decay of V, the running average of g ⊙ g.
""",
            "lam": """    lam : float
        λ > 0, added to √V in G = 1/(λ + √V) (so G ≤ 1/λ).
""",
        },
        setup_doc=r"""Set up preconditioned SGLD (Li et al. 2016, Algorithm 1; SPEC §8). Per element, with
    g the full-scale gradient estimate (prior + N/n · minibatch sum, SPEC §3):
    :math:`V \leftarrow \beta V + (1-\beta) g\odot g`, :math:`G = 1/(\lambda + \sqrt V)`,
    :math:`\theta \leftarrow \theta + \frac{\epsilon}{2} G g + N(0, \epsilon G)`; V starts at 0
    and is updated before it is used. Deviations: Li et al. build V from the mean per-row
    gradient g/N, which only rescales ε and λ (their (ε, λ) are our (εN, λN)); the correction
    term Γ = ∇·G is omitted (as Li et al. do in their experiments), a bias that vanishes as
    ε → 0. Other arguments as :func:`sgld_setup`.
    """,
    )

    stepsize: dict
    beta: float = 0.99
    lam: float = 1e-5
    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "beta", "lam")
    stepsize_stability: ClassVar[str | None] = "sgld"  # with the preconditioned stepsize
    preconditioned: ClassVar[bool] = True
    #: G ≈ 1/√V scales with 1/|gradient|, so under log p / T it is T times larger by itself.
    temperature_powers: ClassVar[dict[str, float]] = {}
    diagonal_preconditioner: ClassVar[bool] = True
    curvature_scale: ClassVar[str] = "stepsize × preconditioner"
    defaults: ClassVar[dict[str, Any]] = {"beta": 0.99, "lam": 1e-5}

    @classmethod
    def predicted_preconditioner(
        cls, diag: Mapping[str, Any], n_rows: int, batch_rows: int, hyper: Mapping[str, Any]
    ) -> dict[str, Any]:
        """At stationarity V ≈ (N/n) diag(A), so G ≈ 1/(λ + √((N/n) diag(A)))
        (:mod:`sgmcmc.tuning.stepsize_search`)."""
        lam = hyper.get("lam", cls.defaults["lam"])
        return {k: 1.0 / (lam + np.sqrt(n_rows / batch_rows * d)) for k, d in diag.items()}

    def preconditioner_reached(self, kernel_state: Mapping[str, Any]) -> dict[str, Any]:
        """G = 1/(λ + √V) from the state's V, the largest over chains."""
        return {k: np.max(1.0 / (self.lam + np.sqrt(np.asarray(v))), axis=0) for k, v in kernel_state["v"].items()}

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "PSGLD":
        beta = arguments["beta"]
        if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) or not 0 <= beta < 1:
            raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
        return cls(
            checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True),
            float(beta),
            checks.check_positive(arguments["lam"], "lam"),
        )

    def init_aux(self, params: Params, rng) -> dict:
        return {"v": {k: tf.zeros_like(p) for k, p in params.items()}}

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        est = estimate(params)
        noise = rng.normal(params)
        new, v = {}, {}
        for k in params:
            new[k], v[k] = psgld_update(
                params[k], est.grads[k], aux["v"][k], noise[k],
                stepsize_at(self.stepsize[k], t, params[k].dtype), self.beta, self.lam,
            )
        return new, {"v": v}, est
