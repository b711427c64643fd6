"""Stochastic gradient Hamiltonian Monte Carlo (Chen et al. 2014), leapfrog start: β̂ = 0, or
with ``noise_correction`` β̂ = ½εV̂ from each minibatch's per-row gradients."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from typing import Any, ClassVar, Mapping

from ... import checks
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions
from .sgld import switch_noise

#: The estimators whose per-row gradients give the variance of the estimate they make (the plain
#: minibatch sum, and the control variate's sum of per-row differences).
NOISE_CORRECTION_ESTIMATORS = ("plain", "cv")


def sghmc_kick(nu: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize, alpha, fraction: float = 1.0) -> tf.Tensor:
    r"""A (fractional) SGHMC momentum kick, Chen et al. (2014) eq. 15 with :math:`\hat\beta = 0`:

    .. math:: \nu' = \nu + f\epsilon\, g(\theta) - \alpha\nu + \sqrt{2 f \alpha\epsilon}\,\xi

    ``fraction`` f is 1 for a full kick and ½ for the first kick after a momentum refresh.
    """
    return nu + (fraction * stepsize) * grad - alpha * nu + tf.sqrt(tf.cast(2.0 * fraction * alpha * stepsize, nu.dtype)) * noise


def gradient_noise_variance(rows: Params, n_rows: int, batch_size: int, replace: bool) -> Params:
    r"""V̂, per chain and element, the variance of the minibatch estimate
    :math:`\frac{N}{n}\sum_{i\in S} r_i` from its own rows ``rows`` (``[K, n, *shape]``):

    .. math:: \hat V = \left(1 - \frac{n}{N}\right)\frac{N^2}{n}\,s^2,\qquad
              s^2 = \frac{1}{n-1}\sum_{i\in S}(r_i - \bar r)^2

    for a uniform n-subset (SPEC §3; :math:`s^2` estimates the rows' variance with denominator
    N − 1 without bias), and without the factor 1 − n/N for rows drawn with replacement
    (``replace``; :math:`s^2` then estimates it with denominator N). Entries ``[K, *shape]``.
    """
    fpc = 1.0 if replace else 1.0 - batch_size / n_rows
    scale = fpc * n_rows * n_rows / (batch_size * (batch_size - 1.0))
    return {k: scale * tf.reduce_sum(tf.square(r - tf.reduce_mean(r, axis=1, keepdims=True)), axis=1) for k, r in rows.items()}


def corrected_kick(nu: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize, alpha, variance: tf.Tensor,
                   fraction: float = 1.0) -> tuple[tf.Tensor, tf.Tensor]:
    r"""An SGHMC kick with the minibatch-noise correction (Chen et al. 2014 §3.2, eq. 15 with
    :math:`\hat\beta = \tfrac12 f\epsilon\hat V`, the kick's own step fε playing Chen's η):

    .. math:: \nu' = \nu + f\epsilon\, g(\theta) - \alpha\nu + \sqrt{[2 f\epsilon(\alpha - \hat\beta)]_+}\,\xi

    so that the injected and the gradient's noise, :math:`f^2\epsilon^2\hat V`, add up to
    :math:`2f\alpha\epsilon`. Returns ν' and where the bracket was negative (β̂ > α: clipped
    at 0, the kick then carries more noise than the dynamics asks).
    """
    step = fraction * stepsize
    injected = tf.cast(2.0 * step * alpha, nu.dtype) - tf.square(tf.cast(step, nu.dtype)) * variance
    return nu + step * grad - alpha * nu + tf.sqrt(tf.maximum(injected, 0.0)) * noise, injected < 0.0


#: The fraction of clipped element-kicks above which a run with ``noise_correction`` warns.
CLIPPED_WARNING = 0.05


@dataclass(frozen=True)
class SGHMC(Dynamics):
    r"""SGHMC (SPEC §3): each iteration resamples :math:`\nu \sim N(0, \epsilon)`, then ``L``
    times a kick with a fresh minibatch and a drift :math:`\theta \leftarrow \theta + \nu`. The
    first kick after the refresh is a half kick (leapfrog). The R package used a full first kick,
    which leaves the sampled variance at about L/(L + 1) of the target's whatever the stepsize
    (0.52 at L = 1, 0.84 at L = 5 on N(0, 1)); the half kick removes that bias
    (tests/test_sghmc_variance.py). The momentum does not outlive an iteration.

    **Minibatch-noise correction** (``noise_correction=True``; Chen, Fox & Guestrin 2014 §3.2, the
    friction's noise :math:`N(0, 2(C - \hat B)\epsilon)` with :math:`\hat B = \frac12\epsilon\hat V`,
    and the update eq. 15 with :math:`\hat\beta = \frac12\eta\hat V`): a kick of step η = fε
    (f = ½ for the half kick, 1 otherwise) injects :math:`N(0, [2\eta(\alpha - \hat\beta)]_+)`
    instead of :math:`N(0, 2\eta\alpha)`, :math:`\hat\beta = \frac12\eta\hat V` per element, V̂ the
    variance of the gradient estimate (:func:`gradient_noise_variance`, from the per-row gradients
    of the kick's own minibatch). The gradient's noise :math:`\eta^2 V` and the injected noise then
    add up to :math:`2\eta\alpha`, the noise of exact gradients, so on a Gaussian the chain is the
    exact-gradient chain in its second moments (``sd_ratio(μ, q, noise_correction=True)`` is
    ``sd_ratio(μ, 0)`` while q ≤ 2α). Decisions:

    * **V̂ from each kick's own minibatch, no running average.** The injected variance is linear
      in V̂, so an unbiased V̂ at the current θ makes every kick's expected total noise exactly
      2ηα; a running average (Ahn et al. 2012; OSGLD's C here) is less noisy but lags V(θ), which
      moves with θ (a regression's residuals grow away from the mode), so it is biased in burn-in
      and wherever the chain travels. The price is clipping more often (for Gaussian rows s² has
      relative sd √(2/(n − 1))), and the kernel keeps no statistics.
    * **β̂ > α is clipped, counted, not refused**: the bracket is set to 0 (the kick then carries
      the gradient's noise alone, more than 2ηα: the sd is inflated as without the correction,
      by less). Per chain ``aux["clipped"]`` counts the clipped element-kicks and ``aux["kicks"]``
      the element-kicks with noise (``sampler.kernel_state()``; :meth:`clipped_fraction`). The
      stepsize check before sampling models the clipping (:meth:`sd_ratio`): noise along the
      top direction beyond 2α inflates the predicted sd and the check warns and names a smaller
      stepsize (β̂/α = εV̂/(2α) falls with ε). Refusing at run time is not possible inside the
      compiled loop, and a few clipped kicks (V̂'s own noise near 2α/η) are harmless. β̂ ≤ α needs
      εV̂ ≤ 2α: at the default α = 0.01 only a small minibatch noise is corrected in full.
    * **Control variates**: the estimate's minibatch part is :math:`\frac{N}{n}\sum_{i\in S}
      (\nabla\ell_i(\theta) - \nabla\ell_i(\hat\theta))`, so its rows are those differences
      (:meth:`ControlVariateGradient.estimate_and_rows`), whose variance is far smaller than the
      plain rows' near θ̂. SVRG and SAGA are refused (their anchors and tables change inside
      the iteration; not implemented), as are rows sharded across workers (every row's gradient
      is needed on one worker) and minibatches of fewer than 2 rows.
    * **temperature=T**: the chain runs on log p / T with stepsize εT; its per-row gradients are
      the tempered ones, so V̂_T = V̂/T², β̂ = ½εT·V̂/T², and injected plus gradient noise is
      2αεT: the tempered dynamics' own noise, with no code of its own.
    * **The stepsize check** (noise q along its top direction): the correction is elementwise
      (V̂ diagonal), the check assumes it removes q, which is exact when the noise covariance is
      diagonal in the coordinates (one parameter, independent coordinates); noise correlated
      across elements keeps its off-diagonal part, which the check does not see.
    """

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SGHMC",
        argument_types={"alpha": "PerParameter", "L": "int", "noise_correction": "bool"},
        keyword_only=("noise_correction",),
        parameter_docs={
            "alpha": """    alpha : float or dict
        α, the friction: a number, or a dict like ``stepsize``.
""",
            "L": """    L : int
        Kicks (leapfrog steps, each on a fresh minibatch) per iteration: an iteration costs about
        ``L`` SGLD iterations.
""",
            "noise_correction": r"""    noise_correction : bool, keyword-only
        False (default): :math:`\hat\beta = 0`, the minibatch noise adds to the injected noise.
        True: Chen et al. (2014) §3.2's correction, :math:`\hat\beta = \frac12\epsilon\hat V`: each
        kick injects :math:`N(0, [2\epsilon(\alpha - \hat\beta)]_+)`, V̂ the per-element variance
        of the gradient estimate, :math:`(1 - n/N)\frac{N^2}{n}s^2` from the sample variance
        :math:`s^2` of the kick's minibatch's per-row log-likelihood gradients (control variates:
        of their differences at θ and at the mode; no 1 − n/N with ``minibatch_replace``), so
        that the stationary variance is the exact-gradient chain's. Where β̂ > α the bracket is
        clipped at 0 (counted: ``sampler.kernel_state()["clipped"]``) and the stepsize check
        warns. Costs a per-row gradient pass per kick; needs ``estimator`` plain or cv, at
        least 2 rows per minibatch, rows not sharded. See :class:`sgmcmc.step.dynamics.sghmc.SGHMC`.
""",
        },
        cv_setup_doc=r"""Set up SGHMC with control variates: :func:`sghmc_setup` dynamics with the gradient of
    :func:`sgldcv_setup`.
    """,
        setup_doc=r"""Set up SGHMC (Chen et al. 2014): each iteration resamples
    :math:`\nu \sim N(0, \epsilon)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon g(\theta) - \alpha\nu + N(0, 2(\alpha - \hat\beta)\epsilon)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick (leapfrog; SPEC §3), with
    :math:`\hat\beta = 0` or, with ``noise_correction=True``, :math:`\frac12\epsilon\hat V`
    (§3.2; V̂ the minibatch gradient's variance). Other arguments as :func:`sgld_setup`.
    """,
    )

    stepsize: dict
    alpha: dict
    L: int
    noise_correction: bool = field(default=False, kw_only=True)

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "alpha", "L", "noise_correction")
    stepsize_stability: ClassVar[str | None] = "sghmc"

    @classmethod
    def sd_ratio(
        cls, mu: float, noise: float = 0.0, alpha: float = 0.01, L: int = 5, noise_correction: bool = False, **hyper: float
    ) -> float:
        """The exact per-iteration recursion: friction ``alpha``, ``L`` leapfrog steps, the noise
        entering every kick; NaN with ``alpha = 0`` (no stationary sd). ``noise_correction``: a
        kick of fraction f injects variance [2fα − f²q]₊ (the gradient's f²q on top), so below
        q = 2α the noise term cancels and ρ(μ, q) = ρ(μ, 0)."""
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
            injected = 2.0 * f * alpha - (f * f * q if noise_correction else 0.0)
            kick = np.zeros(size)
            kick[2 + j] = np.sqrt(max(injected, 0.0))
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
        # Named only when on: callers that pass alpha and L alone are unchanged.
        corrected = {"noise_correction": True} if values.get("noise_correction") else {}
        return {k: {"alpha": float(alphas[k]), "L": int(values["L"]), **corrected} for k in names}
    defaults: ClassVar[dict[str, Any]] = {"alpha": 0.01, "L": 5, "noise_correction": False}

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
            noise_correction=check_noise_correction(arguments.get("noise_correction", False), context),
        )

    def init_aux(self, params: Params, rng) -> dict:
        if not self.noise_correction:
            return {}
        k = next(iter(params.values())).shape[0]
        return {"clipped": tf.zeros([k], tf.int64), "kicks": tf.zeros([], tf.int64)}

    def clipped_fraction(self, kernel_state: Mapping[str, Any]) -> np.ndarray:
        """Per chain, the fraction of element-kicks since :func:`~sgmcmc.init_sess` whose
        correction was clipped (β̂ > α), from ``sampler.kernel_state()``."""
        if not self.noise_correction:
            raise ValueError("clipped_fraction counts the noise correction's clipped kicks: the sampler has noise_correction=False")
        return np.asarray(kernel_state["clipped"], np.float64) / max(int(kernel_state["kicks"]), 1)

    def after_run(self, kernel_state: Any) -> str | None:
        """With the noise correction on, a message when more than :data:`CLIPPED_WARNING` of
        some chain's element-kicks were clipped (β̂ > α: those elements got no injected noise
        and still more gradient noise than the friction absorbs, so they sample too wide)."""
        if not self.noise_correction or not kernel_state or int(kernel_state["kicks"]) == 0:
            return None
        worst = float(np.max(self.clipped_fraction(kernel_state)))
        if worst <= CLIPPED_WARNING:
            return None
        return (
            f"noise_correction was clipped in {worst:.0%} of the element-kicks (the chain's worst): there the "
            f"minibatch noise's β̂ = ½εV̂ exceeded the friction alpha, so those elements got no injected noise and "
            f"still sample too wide. Raise alpha above ½εV̂, lower the stepsize, or use a larger minibatch_size "
            f"(the fraction per chain: kernel.clipped_fraction(sampler.kernel_state()))"
        )

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        return self.update_at(params, aux, estimate, rng, {k: stepsize_at(self.stepsize[k], t, params[k].dtype) for k in params})

    def update_at(self, params: Params, aux: dict, estimate: Estimator, rng, eps: dict, noise_on=None):
        """One iteration with the stepsizes ``eps`` (by parameter); ``noise_on``, a scalar tensor
        (1: SGHMC, 0: no momentum refresh and no noise in the kicks: SGD with momentum) or None
        (SGHMC), scales every normal draw."""
        params = dict(params)
        refresh = switch_noise(rng.normal(params), noise_on)
        nu = {k: tf.sqrt(tf.cast(eps[k], params[k].dtype)) * refresh[k] for k in params}
        if self.noise_correction:
            return self._corrected_kicks(params, nu, aux, estimate, rng, eps, noise_on)

        def kick(state, first: tf.Tensor):
            params, nu = state
            est = estimate(params)
            noise = switch_noise(rng.normal(params), noise_on)
            # the half kick and the full one both computed, one kept: the bits of each as written out
            nu = {k: tf.where(first, sghmc_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], 0.5),
                              sghmc_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], 1.0)) for k in params}
            return ({k: params[k] + nu[k] for k in params}, nu), est

        (params, _), first = estimate.repeat(kick, (params, nu), self.L, rng)
        return params, aux, first

    def _corrected_kicks(self, params: Params, nu: Params, aux: dict, estimate: Estimator, rng, eps: dict, noise_on):
        """The L kicks and drifts with the noise correction (class docstring), counting the
        clipped element-kicks."""
        n_rows, batch_size, replace = minibatch_design(estimate.estimator)

        def kick(state, first: tf.Tensor):
            params, nu, clipped = state
            est, rows = estimate.with_rows(params)
            variance = gradient_noise_variance(rows, n_rows, batch_size, replace)
            noise = switch_noise(rng.normal(params), noise_on)
            new_nu = {}
            for k in params:
                half = corrected_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], variance[k], 0.5)
                full = corrected_kick(nu[k], est.grads[k], noise[k], eps[k], self.alpha[k], variance[k], 1.0)
                new_nu[k], negative = (tf.where(first, a, b) for a, b in zip(half, full))
                clipped += tf.reduce_sum(tf.cast(negative, tf.int64), axis=list(range(1, negative.shape.rank)))
            return ({k: params[k] + new_nu[k] for k in params}, new_nu, clipped), est

        zeros = tf.zeros_like(aux["clipped"])
        (params, _, clipped), first = estimate.repeat(kick, (params, nu, zeros), self.L, rng)
        elements = sum(int(p.shape[1:].num_elements()) for p in params.values())
        on = tf.constant(1, tf.int64) if noise_on is None else tf.cast(noise_on, tf.int64)
        return params, {"clipped": aux["clipped"] + on * clipped, "kicks": aux["kicks"] + on * self.L * elements}, first


def minibatch_design(estimator) -> tuple[int, int, bool]:
    """N, n and whether rows are drawn with replacement, of ``estimator``'s minibatches (its own,
    or those of the plain estimator a wrapper keeps), checked to give per-row gradients."""
    plain = getattr(estimator, "plain", estimator)
    if not hasattr(estimator, "estimate_and_rows") or getattr(plain, "reduce", None) is not None:
        raise TypeError(
            "noise_correction needs the per-row gradients of the whole minibatch (the plain or control-variate "
            "estimator, rows not sharded)"
        )
    return plain.n_rows, plain.batch_size, plain.replace


def check_noise_correction(value: Any, context: KernelContext) -> bool:
    """``noise_correction`` checked against the set-up (``context``): a bool; when True, an
    estimator whose per-row gradients give its variance, rows on one worker, n ≥ 2."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"noise_correction must be True or False (True: Chen et al. 2014's correction β̂ = ½εV̂ of the "
            f"injected noise for the minibatch noise; False: β̂ = 0), got {value!r}"
        )
    if not value:
        return False
    if context.estimator not in NOISE_CORRECTION_ESTIMATORS:
        raise ValueError(
            f"noise_correction=True estimates the gradient noise from each minibatch's per-row gradients, which "
            f"the plain and control-variate estimators give, not estimator={context.estimator!r} (its anchor or "
            f"table changes the per-row terms): use estimator='plain' or 'cv' (or sghmccv), or noise_correction=False"
        )
    if context.batch_size is None:
        raise ValueError(
            "noise_correction=True needs every row's gradient of a minibatch on one worker, and shard_rows=True "
            "splits the minibatch across workers: use shard_rows=False, or noise_correction=False"
        )
    if context.batch_size < 2:
        raise ValueError(
            f"noise_correction=True estimates the gradient noise from the spread of each minibatch's per-row "
            f"gradients, so a minibatch needs at least 2 rows; minibatch_size gives {context.batch_size} of "
            f"N={context.n_rows}: give a larger minibatch_size, or noise_correction=False"
        )
    return True
