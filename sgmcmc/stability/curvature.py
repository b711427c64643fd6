r"""The stepsize sanity check: the posterior's largest curvature, and what it does to the chain.

**Curvature.** :math:`A = -\nabla^2\log p(\theta|x)` (full data, prior included) at a point
(the CV samplers: the mode they found). Its largest eigenvalue is found by power iteration on
Hessian-vector products :math:`Av`, each a double tape through the batched full-data gradient
(rows in batches of ``FULL_GRADIENT_BATCH_ROWS``, so memory stays bounded at any N). The
Rayleigh quotient :math:`v^\top Av` of the iterate is returned; it approaches λ_max from below.

**Per-parameter stepsizes.** With :math:`E = \mathrm{diag}(\epsilon_k)` and
:math:`\phi = E^{-1/2}\theta`, SGLD :math:`\theta' = \theta + \tfrac12 E g + N(0, E)` is SGLD
with unit stepsize in φ, where the curvature is :math:`E^{1/2}AE^{1/2}` (the same change of
variables, :math:`\nu = E^{1/2}w`, makes SGHMC and SGNHT unit-stepsize in φ). So the check is on

.. math:: \mu = \lambda_{\max}(E^{1/2} A E^{1/2}) \quad (= \epsilon\lambda_{\max}\ \text{for one stepsize}),

exact for a dict of stepsizes, not an approximation by the largest or by the stepsize of the
parameters the top eigenvector loads on (those loadings are reported too).

**Distortion.** On a Gaussian with exact gradients, along an eigendirection with scaled
curvature μ, SGLD is the AR(1) recursion :math:`u' = (1 - \mu/2)u + \xi` (u = φ), whose
stationary variance is :math:`1/(1 - (1-\mu/2)^2) = 1/(\mu(1 - \mu/4))` against the target's
:math:`1/\mu`: the sd is inflated by

.. math:: \rho(\mu) = (1 - \mu/4)^{-1/2}, \qquad \text{unstable for } \mu \ge 4.

A warning means :math:`|\rho - 1| > \delta` (``distortion``, default 10 %); for SGLD that is
:math:`\mu > 4(1 - (1+\delta)^{-2}) = 0.694` at δ = 0.1, and the safe stepsize is the one giving
exactly δ: :math:`\epsilon_{\text{safe}} = 4(1 - (1+\delta)^{-2})/\lambda_{\max}`. (The stability
limit of the ε/2 convention is ελ < 4, not 2.)

SGHMC (SPEC §3, leapfrog start): in φ with :math:`w = E^{-1/2}\nu` one iteration is
:math:`w \sim N(0, 1)`, then L times :math:`w \leftarrow w - f\mu u - \alpha w + \sqrt{2f\alpha}\,\xi`,
:math:`u \leftarrow u + w` (f = ½ for the first kick), linear-Gaussian in u:
:math:`u_{t+1} = a u_t + \sum_j b_j\xi_j`, so ρ² = μ Σb²/(1 − a²) exactly
(as ``tests/reference_sghmc.py``). SGNHT: the same kick with the thermostat frozen at ``a``
and the momentum kept, a 2-d linear recursion whose stationary covariance solves the discrete
Lyapunov equation — approximate, since the real thermostat moves. For all three the safe μ is
the smallest μ where :math:`|\rho(\mu) - 1|` reaches δ (grid scan, then bisection). None of
this sees the minibatch noise (SGHMC with a small ``alpha`` can be far too wide for that
reason alone): the check is about the discretisation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import tensorflow as tf

from ..errors import StepsizeWarning
from ..step.methods import METHODS, Method
from ..data.rows import as_tensor
from ..graph_options import own_function
from ..step.dynamics.base import Arrays, Dynamics, Operator, scaled_operator
from ..step.posterior import FULL_GRADIENT_BATCH_ROWS, Posterior, value_and_grad

#: The stability models: the samplers (not CV twins) whose dynamics has a distortion formula.
DYNAMICS = tuple(
    name for name, row in METHODS.items() if row.dynamics.stepsize_stability == name and not row.control_variate
)


# -- Hessian-vector products and power iteration -------------------------------------------------
def _hvp(
    fn: Callable, params: dict[str, tf.Tensor], v: dict[str, tf.Tensor], unused: set[str] | None = None
) -> dict[str, tf.Tensor]:
    r""":math:`\nabla^2 f(\theta)\, v` by a double tape (reverse over reverse). ``unused``, if
    given, receives while tracing the names of the parameters ``fn`` does not depend on."""
    with tf.GradientTape() as outer:
        outer.watch(params)
        grads = value_and_grad(fn, params, unused)[1]
        dot = tf.add_n([tf.reduce_sum(grads[k] * v[k]) for k in params])
    hv = outer.gradient(dot, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {k: tf.convert_to_tensor(g) for k, g in hv.items()}  # a gather's gradient is IndexedSlices


class HessianPrograms:
    """The compiled Hessian-vector products of a model: ``likelihood(params, v, batch)`` on a
    batch of rows, ``prior(params, v)`` (None without a prior), and ``likelihood_free``: the
    parameters the likelihood does not depend on (None until ``likelihood`` is first traced; a
    product along them alone is the prior's, exactly: the precisions of a hierarchical prior)."""

    def __init__(self, log_lik: Callable, log_prior: Callable | None):
        self.likelihood_free: frozenset[str] | None = None

        def likelihood(p, v, batch):
            unused: set[str] = set()
            product = _hvp(lambda q: log_lik(q, batch), p, v, unused)
            self.likelihood_free = frozenset(unused)
            return product

        self.likelihood = own_function(likelihood, reduce_retracing=True)
        self.prior = None
        if log_prior is not None:
            self.prior = own_function(lambda p, v: _hvp(log_prior, p, v), reduce_retracing=True)


#: Products over a row subsample (:class:`RowSample`) sum it in batches of this many rows, and the
#: stepsize check's block subsample is one such batch: every product of a check has the same
#: batch shape, so the double tape is traced once (a network's: seconds). One trace for any
#: row count (a ``None`` leading dimension) was tried and ran 40–60 % slower a product (bnn_mnist
#: network, 20,000 rows: 0.21 against 0.13–0.17 s; benchmarks/RESULTS.md).
SUBSAMPLE_BATCH_ROWS = 5_000


class NegativeHessian:
    r"""The operator :math:`v \mapsto Av`, :math:`A = -\nabla^2\log p(\theta|x)` at ``params``,
    the likelihood summed over all N rows in batches of ``FULL_GRADIENT_BATCH_ROWS`` (one compiled
    call per batch), or over a subsample of them (``rows``; :class:`RowSample`) in batches of
    :data:`SUBSAMPLE_BATCH_ROWS`, times ``scale``.

    Parameters
    ----------
    posterior
        The model (:class:`~sgmcmc.step.posterior.Posterior`: its ``log_lik``, ``log_prior`` and
        rows; with rows sharded, its ``reduce`` adds up the workers' likelihood terms, so every
        worker gets the same product).
    params
        Name -> value (the parameter's shape) where the Hessian is taken.
    """

    def __init__(
        self, posterior: Posterior, params: Mapping[str, Any], rows: Mapping[str, Any] | None = None,
        scale: float = 1.0,
    ):
        self.posterior = posterior
        #: The rows the likelihood is summed over (default all N) and the factor on that sum
        #: (N/m for a subsample of m rows: :class:`RowSample`).
        self.rows, self.scale = (posterior.dataset if rows is None else rows), float(scale)
        self.batch_rows = FULL_GRADIENT_BATCH_ROWS if rows is None else SUBSAMPLE_BATCH_ROWS
        self.params = {k: tf.convert_to_tensor(v) for k, v in params.items()}
        self.dtype = next(iter(self.params.values())).dtype
        # compiled once per model, shared by every operator made on it (the mode search's
        # stages, its end check, the stepsize check, other samplers of the model): tracing a
        # double tape costs ~0.3 s (a network's: seconds)
        self.programs = posterior.program("negative_hessian", HessianPrograms)
        # A subsample's batches become tensors once (every product reads them all; converting
        # them on each product was ~0.3 s of a network's check); all N rows are read per product.
        self._batches = None if rows is None else [
            {k: as_tensor(np.asarray(x)) for k, x in batch.items()} for batch in self._read_batches()
        ]
        self.calls = 0

    def _read_batches(self) -> Iterator[dict[str, Any]]:
        data, step = self.rows, self.batch_rows
        for start in range(0, len(next(iter(data.values()))), step):
            yield {k: x[start : start + step] for k, x in data.items()}

    def __call__(self, v: Arrays) -> Arrays:
        self.calls += 1
        vt = {k: tf.constant(np.asarray(v[k]), self.dtype) for k in self.params}
        total = {k: np.zeros(np.shape(v[k])) for k in self.params}
        free = self.programs.likelihood_free  # known once the likelihood's product is traced
        along_free = free is not None and all(k in free or not np.any(v[k]) for k in self.params)
        if not along_free:  # else the likelihood's product is 0: it does not depend on those parameters
            for batch in (self._read_batches() if self._batches is None else self._batches):
                for k, hv in self.programs.likelihood(self.params, vt, batch).items():
                    total[k] -= self.scale * hv.numpy()
            total = self.posterior.sum_over_workers(total)  # rows sharded: every worker's rows (SPEC §12)
        if self.programs.prior is not None:
            for k, hv in self.programs.prior(self.params, vt).items():
                total[k] -= hv.numpy()
        return total


def _dot(a: Arrays, b: Arrays) -> float:
    return float(sum(np.vdot(a[k], b[k]) for k in a))


def _scaled(v: Arrays, c: float) -> Arrays:
    return {k: c * x for k, x in v.items()}


def largest_eigenvalue(
    operator: Operator, like: Mapping[str, Any], max_iters: int = 100, tol: float = 1e-4, seed: int = 0
) -> tuple[float, Arrays, int]:
    r"""The largest (algebraic) eigenvalue of a symmetric operator by power iteration.

    :math:`v_{i+1} = Bv_i/\|Bv_i\|` from a seeded standard normal start; the estimate is the
    Rayleigh quotient :math:`\mu_i = v_i^\top Bv_i`, stopped when
    :math:`|\mu_i - \mu_{i-1}| \le \text{tol}\,|\mu_i|`. Power iteration finds the eigenvalue of
    largest magnitude; if that is negative (a saddle), it is run again on :math:`B + |\mu|I`.

    Returns
    -------
    (eigenvalue, eigenvector, operator calls)
        The eigenvector as a dict like ``like``, unit norm over all entries.
    """
    rng = np.random.default_rng(seed)
    start = {k: rng.standard_normal(np.shape(x)) for k, x in like.items()}

    def iterate(op: Operator) -> tuple[float, Arrays, int]:
        v = _scaled(start, 1.0 / np.sqrt(_dot(start, start)))
        mu_prev, mu, calls = None, 0.0, 0
        for calls in range(1, max_iters + 1):
            w = op(v)
            mu = _dot(v, w)
            norm = np.sqrt(_dot(w, w))
            if norm == 0.0:
                return 0.0, v, calls
            v = _scaled(w, 1.0 / norm)
            if mu_prev is not None and abs(mu - mu_prev) <= tol * abs(mu):
                break
            mu_prev = mu
        return mu, v, calls

    mu, v, calls = iterate(operator)
    if mu < 0:
        shift = -mu
        mu, v, more = iterate(lambda x: {k: y + shift * x[k] for k, y in operator(x).items()})
        mu, calls = mu - shift, calls + more
    return mu, v, calls


# -- the distortion of the discretised dynamics ----------------------------------------------------
# The formulas live with each dynamics class (its ``sd_ratio`` and what follows from it; SGLD's
# closed forms): these take a stability model's name (a dynamics' ``stepsize_stability``, or a
# sampler's name) or the class, for the check, the tuner and the tests.
def stability_model(method: str | type[Dynamics]) -> type[Dynamics]:
    """The dynamics class whose formulas judge ``method`` (a class, a stability model's name or a
    sampler's name, ``_setup`` and CV twins included)."""
    if isinstance(method, type):
        return method
    row = _row(method)
    if row is None or row.dynamics.stepsize_stability is None:
        raise ValueError(f"no distortion formula for {method!r}: use one of {DYNAMICS}")
    return row.dynamics


def sd_ratio(
    method: str | type[Dynamics], mu: float, alpha: float = 0.01, L: int = 5, a: float = 0.01, noise: float = 0.0,
    **hyper: Any,
) -> float:
    r"""Stationary sd of the discretised chain over the target's, along a direction of scaled
    curvature μ (= ελ), on a Gaussian; ``inf`` where the recursion grows, NaN where it neither
    grows nor settles (SGHMC with ``alpha = 0``, SGNHT with ``a = 0``: no friction in the model).
    ``noise`` is the gradient estimate's variance along that direction in the same scaled units,
    :math:`q = \epsilon\,w^\top V w` (0: exact gradients; module docstring). ``method``:
    ``"sgld"`` (:math:`\rho^2 = (1 + q/4)/(1 - \mu/4)`), ``"sghmc"`` (exact per-iteration
    recursion, friction ``alpha``, ``L`` leapfrog steps, the noise entering every kick) or
    ``"sgnht"`` (thermostat frozen at ``a``): the ``sd_ratio`` of that dynamics class; ``hyper``,
    its other hyperparameters (SGHMC's ``noise_correction``)."""
    return stability_model(method).sd_ratio(mu, noise=noise, alpha=alpha, L=L, a=a, **hyper)


def stability_limit(method: str | type[Dynamics], **hyper: float) -> float:
    """The scaled curvature μ at which the dynamics' recursion becomes unstable (SGLD: 4; the
    others by bisection on where :func:`sd_ratio` turns infinite). The noise does not move it."""
    return stability_model(method).stability_limit(**hyper)


def safe_factor(
    method: str | type[Dynamics], mu: float, noise: float = 0.0, distortion: float = 0.1, **hyper: float
) -> float:
    r"""The largest c such that the stepsize times c keeps :math:`|\rho - 1| \le \delta` along a
    direction of scaled curvature μ and scaled noise q (both scale with the stepsize: cμ, cq).
    SGLD in closed form, :math:`c = 4((1+\delta)^2 - 1)/(q + \mu(1+\delta)^2)`; otherwise a
    geometric grid scan and bisection."""
    return stability_model(method).safe_factor(mu, noise, distortion, **hyper)


def largest_safe_mu(method: str | type[Dynamics], distortion: float = 0.1, **hyper: float) -> float:
    r"""The smallest scaled curvature μ at which :math:`|\rho(\mu) - 1|` reaches ``distortion``
    (closed form for SGLD, :math:`4(1 - (1+\delta)^{-2})`; otherwise a grid scan over (0, 4]
    and bisection). Stepsizes with μ below it keep the sd within the stated proportion."""
    return stability_model(method).largest_safe_mu(distortion, **hyper)


# -- the check ---------------------------------------------------------------------------------------
#: Largest over smallest block curvature from which one shared stepsize is said to leave a
#: parameter mixing far slower than the others (StepsizeCheck.slow_mixing).
SLOW_MIXING_RATIO = 10.0

#: The CV samplers' check estimates block curvatures only up to this many parameters (each costs
#: up to ``block_iters`` full-data Hessian-vector products).
MAX_BLOCKS_CHECKED = 16


@dataclass(frozen=True)
class StepsizeCheck:
    r"""What :func:`check_stepsize` found.

    Attributes
    ----------
    method : str
        ``"sgld"``, ``"sghmc"`` or ``"sgnht"`` (the dynamics; CV or not does not matter).
    stepsize : float or dict
        The stepsize checked (a schedule: its value at the first iteration).
    curvature : float
        :math:`\lambda_{\max}` of :math:`A = -\nabla^2\log p(\theta|x)`.
    scaled_curvature : float
        :math:`\mu = \lambda_{\max}(E^{1/2}AE^{1/2})`, the quantity the criterion is on.
    curvature_per_parameter : dict or None
        Name -> λ_max of that parameter's diagonal block of A (``per_parameter=True``).
    loadings : dict
        Name -> share of the top scaled eigenvector's squared norm on that parameter.
    sd_ratio : float
        Stationary sd of the discretised chain over the posterior's along that direction (Gaussian
        approximation, exact gradients); ``inf`` if unstable.
    distortion : float
        δ: a warning means :math:`|\rho - 1| > \delta`.
    safe_stepsize : float or dict
        The largest stepsize of the same pattern (every entry scaled by one factor) with
        :math:`|\rho - 1| \le \delta`.
    too_large : bool
    operator_calls : int
        Hessian-vector products used, each about two gradients over its rows (all N rows for
        :func:`check_stepsize`; the samplers' own check: its row subsample, and for the block
        curvatures at most ``BLOCK_ROWS`` of those rows).
    safe_stepsize_per_parameter : dict or None
        Name -> stepsize, one per parameter block (``per_parameter=True``, two or more
        parameters): each block's stepsize in proportion to 1/its block curvature (so every block
        moves at the same scaled rate), the whole dict then scaled by one factor so that the joint
        check, :math:`\mu = \lambda_{\max}(E^{1/2}AE^{1/2})`, sits exactly at the safe μ. Pass it as
        ``stepsize=`` to the samplers.
    curvature_ratio : float or None
        Largest over smallest block curvature (``per_parameter=True``, two or more parameters
        with positive block curvature): with one shared stepsize, capped by the stiffest block,
        the softest block moves about this many times slower per iteration than its own safe
        stepsize would let it (its autocorrelation time is this many times longer).
    slow_mixing : bool
        One shared stepsize and ``curvature_ratio`` >= :data:`SLOW_MIXING_RATIO`.
    noise : float
        q, the gradient estimate's variance along the top direction in the scaled units of μ
        (:math:`q = w^\top Vw`, w = E^½v; 0 when the minibatch noise was not estimated).
        ``sd_ratio`` and ``safe_stepsize`` include it.
    stability_limit : float
        The scaled curvature μ from which the dynamics' recursion is unstable (SGLD: 4).
    sample_size : int or None
        Rows the curvature and noise were estimated on (None: all of them).
    """

    method: str
    stepsize: float | dict
    curvature: float
    scaled_curvature: float
    curvature_per_parameter: dict | None
    loadings: dict
    sd_ratio: float
    distortion: float
    safe_stepsize: float | dict
    too_large: bool
    operator_calls: int
    safe_stepsize_per_parameter: dict | None = None
    curvature_ratio: float | None = None
    slow_mixing: bool = False
    noise: float = 0.0
    stability_limit: float = np.inf
    sample_size: int | None = None

    def at_temperature(self, temperature: float) -> "StepsizeCheck":
        """This check of the chain on log p / T with stepsize εT (:mod:`sgmcmc.tempering`)
        in the user's units: stepsizes divided by T, curvatures those of log p (times T); μ, the
        noise and the sd ratio are the same in both."""
        if temperature == 1.0:
            return self
        per_block = self.curvature_per_parameter
        return replace(
            self,
            stepsize=_scaled_stepsize(self.stepsize, 1.0 / temperature),
            safe_stepsize=_scaled_stepsize(self.safe_stepsize, 1.0 / temperature),
            safe_stepsize_per_parameter=None if self.safe_stepsize_per_parameter is None
            else _scaled_stepsize(self.safe_stepsize_per_parameter, 1.0 / temperature),
            curvature=self.curvature * temperature,
            curvature_per_parameter=None if per_block is None else {k: v * temperature for k, v in per_block.items()},
        )

    @property
    def unstable(self) -> bool:
        """μ at or beyond the dynamics' stability limit: the chain diverges or oscillates."""
        return not self.scaled_curvature < self.stability_limit

    def refusal(self, who: str = "") -> str:
        """What :class:`~sgmcmc.StepsizeError` says."""
        limit = _scaled_stepsize(self.stepsize, self.stability_limit / self.scaled_curvature)
        seen = "" if self.sample_size is None else f" (curvature estimated on {self.sample_size:,} rows)"
        return (
            f"{who or self.method}: stepsize {_show(self.stepsize)} is beyond the stability limit of the dynamics "
            f"for this posterior: stepsize × largest curvature = {self.scaled_curvature:.3g}{seen}, and the "
            f"chain diverges or oscillates from {self.stability_limit:.3g} on (at stepsize {_show(limit)}). "
            f"Use a stepsize of {_show(self.safe_stepsize)} or less (sd within {self.distortion:.0%} of the "
            f"posterior's, minibatch noise included), or pass check_stepsize=False to run anyway."
        )

    def mixing_message(self, who: str = "") -> str:
        """What the warning says when one shared stepsize leaves a parameter mixing far slower."""
        blocks = {k: v for k, v in (self.curvature_per_parameter or {}).items() if v > 0}
        stiff, soft = max(blocks, key=blocks.get), min(blocks, key=blocks.get)
        return (
            f"{who or self.method}: one stepsize for all parameters leaves {soft!r} mixing about "
            f"{self.curvature_ratio:.3g}× slower than {stiff!r} (block curvatures {blocks[soft]:.3g} and "
            f"{blocks[stiff]:.3g}: the shared stepsize must suit the stiffest block). Give one stepsize per "
            f"parameter, e.g. stepsize={_show(self.safe_stepsize_per_parameter)} (each block's safe "
            f"stepsize, jointly checked; sgmcmc.check_stepsize)."
        )

    def message(self, who: str = "") -> str:
        stretch = "unstable (diverges)" if not np.isfinite(self.sd_ratio) else f"{self.sd_ratio:.3g}× the posterior's"
        top = max(self.loadings, key=self.loadings.get)
        return (
            f"{who or self.method}: stepsize {_show(self.stepsize)} is large for the posterior's curvature: "
            f"stepsize × largest curvature = {self.scaled_curvature:.3g} (largest curvature "
            f"{self.curvature:.3g}, direction mostly {top!r}), so on a Gaussian the chain's sd along that "
            f"direction is {stretch}{' with the minibatch noise' if self.noise > 0 else ''}. A stepsize of "
            f"{_show(self.safe_stepsize)} or less keeps it within {self.distortion:.0%} (sgmcmc.check_stepsize)."
        )


def _scaled_stepsize(stepsize: float | dict, factor: float) -> float | dict:
    if isinstance(stepsize, dict):
        return {k: v * factor for k, v in stepsize.items()}
    return stepsize * factor


def _show(stepsize: float | dict) -> str:
    if isinstance(stepsize, dict):
        return "{" + ", ".join(f"{k!r}: {v:.3g}" for k, v in stepsize.items()) + "}"
    return f"{stepsize:.3g}"


def _top_scaled(
    hess: Operator, like: Arrays, stepsize: Mapping[str, float], max_iters: int, tol: float, seed: int,
    eigen: Callable = None,
) -> tuple[float, Arrays]:
    """μ = λ_max(E^½ A E^½) and its eigenvector, for stepsizes E = diag(stepsize) (``eigen``:
    power iteration by default, or :func:`sgmcmc.stability.check.lanczos_largest`)."""
    root = {k: np.sqrt(stepsize[k]) for k in like}
    mu, v, _ = (eigen or largest_eigenvalue)(scaled_operator(hess, root), like, max_iters, tol, seed)
    return mu, v


def _block_curvatures(hess: Operator, like: Arrays, max_iters: int, tol: float, seed: int, eigen: Callable = None) -> dict[str, float]:
    """Name -> λ_max of that parameter's diagonal block of A (one power iteration each)."""
    names = list(like)
    blocks = {}
    for name in names:
        def block(x: Arrays, name: str = name) -> Arrays:
            full = {k: (x[k] if k == name else like[k]) for k in names}
            return {name: hess(full)[name]}

        blocks[name] = float((eigen or largest_eigenvalue)(block, {name: like[name]}, max_iters, tol, seed)[0])
    return blocks


def _safe_per_parameter(
    method: str, hess: Operator, like: Arrays, blocks: dict[str, float], fallback: dict[str, float],
    hyper: dict[str, dict[str, float]], distortion: float, max_iters: int, tol: float, seed: int,
    noise: Callable | None = None, eigen: Callable = None,
) -> dict[str, float]:
    """Each block's safe stepsize (safe μ / block curvature; ``fallback`` for a block without
    positive curvature), then scaled by one factor so that along the joint top direction the sd
    is off by exactly δ (off-diagonal blocks can make the joint μ larger than any block's; the
    minibatch noise there is included when ``noise`` is given)."""
    steps = {
        k: largest_safe_mu(method, distortion, **hyper[k]) / lam if lam > 0 else fallback[k]
        for k, lam in blocks.items()
    }
    mu, v = _top_scaled(hess, like, steps, max_iters, tol, seed, eigen)
    loadings = {k: float(np.sum(np.square(v[k]))) for k in like}
    top = hyper[max(loadings, key=loadings.get)]
    q = 0.0 if noise is None else noise({k: np.sqrt(steps[k]) * v[k] for k in like})
    factor = safe_factor(method, mu, q, distortion, **top) if mu > 0 else 1.0
    return {k: e * factor for k, e in steps.items()}


def _check(
    method: str,
    posterior: Posterior,
    point: Mapping[str, Any],
    stepsize: dict[str, float],
    scalar: bool,
    hyper: dict[str, dict[str, float]],
    distortion: float,
    per_parameter: bool,
    max_iters: int,
    tol: float,
    seed: int,
    block_iters: int | None = None,
    block_tol: float | None = None,
    *,
    hess: Operator | None = None,
    block_hess: Operator | None = None,
    noise: Callable[[Arrays], float] | None = None,
    top: tuple[float, Arrays] | None = None,
    eigen: Callable | None = None,
    rows_seen: int | None = None,
    exact_rows: bool = True,
    per_parameter_only_if_slow: bool = False,
) -> StepsizeCheck:
    """The check: μ and its direction (``top`` if already known), the noise along it (``noise``:
    θ-direction -> variance, :class:`sgmcmc.stability.check.MinibatchNoise`), the distortion,
    the safe stepsize and, with ``per_parameter``, the block curvatures. ``hess`` defaults to the
    full-data operator, ``block_hess`` (the operator of the block curvatures and of the joint
    scaling of the safe stepsize per parameter, e.g. on fewer rows) to ``hess``; ``eigen`` to
    power iteration. ``per_parameter_only_if_slow``: the safe
    stepsize per parameter (one more eigenvalue search and noise estimate) only when the
    curvature ratio makes ``slow_mixing`` true, whose message is its only reader (the samplers'
    own check); else None."""
    names = list(point)
    hess = NegativeHessian(posterior, point) if hess is None else hess
    like = {k: np.zeros(np.shape(point[k])) for k in names}
    mu, v = _top_scaled(hess, like, stepsize, max_iters, tol, seed, eigen) if top is None else top
    if len(set(stepsize.values())) == 1:
        lam = mu / stepsize[names[0]]
    else:
        lam = (eigen or largest_eigenvalue)(hess, like, max_iters, tol, seed)[0]
    loadings = {k: float(np.sum(np.square(v[k]))) for k in names}
    top_hyper = hyper[max(loadings, key=loadings.get)]
    q = 0.0 if noise is None else float(noise({k: np.sqrt(stepsize[k]) * v[k] for k in names}))
    ratio = sd_ratio(method, mu, noise=q, **top_hyper)
    factor = safe_factor(method, mu, q, distortion, **top_hyper) if mu > 0 else np.inf
    safe = {k: e * factor for k, e in stepsize.items()}
    blocks = per_block = curvature_ratio = None
    slow_mixing = False
    if per_parameter:
        blocks = _block_curvatures(block_hess or hess, like, block_iters or max_iters, block_tol or tol, seed, eigen)
        positive = [c for c in blocks.values() if c > 0]
        if len(names) > 1 and len(positive) > 1:
            curvature_ratio = float(max(positive) / min(positive))
            slow_mixing = len(set(stepsize.values())) == 1 and curvature_ratio >= SLOW_MIXING_RATIO
        if curvature_ratio is not None and (not per_parameter_only_if_slow or slow_mixing):
            fallback = safe if np.all(np.isfinite(list(safe.values()))) else stepsize
            per_block = _safe_per_parameter(
                method, block_hess or hess, like, blocks, fallback, hyper, distortion, max_iters, block_tol or tol, seed,
                noise, eigen,
            )
    return StepsizeCheck(
        method=method,
        stepsize=stepsize[names[0]] if scalar else dict(stepsize),
        curvature=float(lam),
        scaled_curvature=float(mu),
        curvature_per_parameter=blocks,
        loadings=loadings,
        sd_ratio=float(ratio),
        distortion=float(distortion),
        safe_stepsize=safe[names[0]] if scalar else safe,
        too_large=bool(np.isinf(ratio) or abs(ratio - 1.0) > distortion),
        operator_calls=hess.calls + (0 if block_hess is None else block_hess.calls),
        safe_stepsize_per_parameter=per_block,
        curvature_ratio=curvature_ratio,
        slow_mixing=bool(slow_mixing),
        noise=q,
        stability_limit=stability_limit(method, **top_hyper),
        sample_size=None if exact_rows else rows_seen,
    )


def _warn(result: StepsizeCheck, who: str, stacklevel: int, slack: float = 0.0) -> None:
    """One StepsizeWarning saying what the check found: the stepsize too large (the sd off by more
    than δ + ``slack``), one shared stepsize leaving a parameter mixing far slower, or both."""
    too_large = bool(np.isinf(result.sd_ratio) or abs(result.sd_ratio - 1.0) > result.distortion + slack)
    parts = ([result.message(who)] if too_large else []) + ([result.mixing_message(who)] if result.slow_mixing else [])
    if parts:
        warnings.warn(" ".join(parts), StepsizeWarning, stacklevel=stacklevel + 1)


def _row(method: Any) -> Method | None:
    """The method table's row of ``method`` (a name or a sampler function, ``_setup`` included)."""
    name = method if isinstance(method, str) else getattr(method, "__name__", repr(method))
    return METHODS.get(name.removesuffix("_setup"))


def _is_control_variate(method: Any) -> bool:
    """Whether ``method`` (a name or a sampler function) is one of the R package's CV samplers."""
    row = _row(method)
    return bool(row is not None and row.control_variate)


def _dynamics(method: Any) -> str:
    """The stability model of a sampler (a name or its function): its dynamics' trait."""
    row = _row(method)
    stability = None if row is None or row.dynamics.preconditioned else row.dynamics.stepsize_stability
    if stability is None:
        raise ValueError(f"check_stepsize knows the dynamics {DYNAMICS} (and their CV versions), got {method!r}")
    return stability


def _hyper(name: str, names: list[str], alpha: Any, L: Any, a: Any) -> dict[str, dict[str, float]]:
    """Per parameter, the hyperparameters of the distortion formula (a per-parameter ``alpha`` or
    ``a``: the check uses the value of the parameter the top eigenvector loads on most)."""
    return stability_model(name).distortion_hyperparameters(names, {"alpha": alpha, "L": L, "a": a})
