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

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from .. import checks
from ..errors import StepsizeWarning
from ..api.methods import METHODS
from ..graph_options import own_function
from ..distribute.placement import row_collective
from ..step.estimators.plain import FULL_GRADIENT_BATCH_ROWS, MinibatchGradient, value_and_grad

Arrays = dict[str, np.ndarray]
Operator = Callable[[Arrays], Arrays]

#: The methods whose distortion formula is known, by dynamics.
DYNAMICS = ("sgld", "sghmc", "sgnht")


# -- Hessian-vector products and power iteration -------------------------------------------------
def _hvp(fn: Callable, params: dict[str, tf.Tensor], v: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    r""":math:`\nabla^2 f(\theta)\, v` by a double tape (reverse over reverse)."""
    with tf.GradientTape() as outer:
        outer.watch(params)
        grads = value_and_grad(fn, params)[1]
        dot = tf.add_n([tf.reduce_sum(grads[k] * v[k]) for k in params])
    hv = outer.gradient(dot, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {k: tf.convert_to_tensor(g) for k, g in hv.items()}  # a gather's gradient is IndexedSlices


class NegativeHessian:
    r"""The operator :math:`v \mapsto Av`, :math:`A = -\nabla^2\log p(\theta|x)` at ``params``,
    the likelihood summed over all N rows in batches (one compiled call per batch).

    Parameters
    ----------
    estimator
        A one-chain :class:`~sgmcmc.step.estimators.plain.MinibatchGradient` (its ``log_lik``,
        ``log_prior`` and dataset tensors are used, not its minibatches; with rows sharded, its
        ``reduce`` adds up the workers' likelihood terms, so every worker gets the same product).
    params
        Name -> value (the parameter's shape) where the Hessian is taken.
    """

    def __init__(self, estimator: MinibatchGradient, params: Mapping[str, Any]):
        self.estimator = estimator
        self.params = {k: tf.convert_to_tensor(v) for k, v in params.items()}
        self.dtype = next(iter(self.params.values())).dtype
        self._lik = own_function(
            lambda p, v, batch: _hvp(lambda q: estimator.log_lik(q, batch), p, v), reduce_retracing=True
        )
        self._prior = None
        if estimator.log_prior is not None:
            self._prior = own_function(lambda p, v: _hvp(estimator.log_prior, p, v), reduce_retracing=True)
        self.calls = 0

    def __call__(self, v: Arrays) -> Arrays:
        self.calls += 1
        vt = {k: tf.constant(np.asarray(v[k]), self.dtype) for k in self.params}
        total = {k: np.zeros(np.shape(v[k])) for k in self.params}
        data = self.estimator.dataset
        for start in range(0, self.estimator.n_rows, FULL_GRADIENT_BATCH_ROWS):
            batch = {k: x[start : start + FULL_GRADIENT_BATCH_ROWS] for k, x in data.items()}
            for k, hv in self._lik(self.params, vt, batch).items():
                total[k] -= hv.numpy()
        total = self.estimator.sum_over_workers(total)  # rows sharded: every worker's rows (SPEC §12)
        if self._prior is not None:
            for k, hv in self._prior(self.params, vt).items():
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
def sd_ratio(method: str, mu: float, alpha: float = 0.01, L: int = 5, a: float = 0.01) -> float:
    r"""Stationary sd of the discretised chain over the target's, along a direction of scaled
    curvature μ (= ελ), on a Gaussian with exact gradients; ``inf`` where the recursion is
    unstable. ``method``: ``"sgld"`` (:math:`(1-\mu/4)^{-1/2}`), ``"sghmc"`` (exact per-iteration
    recursion, friction ``alpha``, ``L`` leapfrog steps) or ``"sgnht"`` (thermostat frozen at
    ``a``). See the module docstring."""
    if mu <= 0:
        return 1.0
    if method == "sgld":
        return float(1.0 / np.sqrt(1.0 - mu / 4.0)) if mu < 4.0 else np.inf
    if method == "sghmc":
        # Coefficients of u over [u_t, w_0, xi_1..xi_L] through one iteration.
        u = np.zeros(L + 2)
        u[0] = 1.0
        w = np.zeros(L + 2)
        w[1] = 1.0
        for j in range(L):
            f = 0.5 if j == 0 else 1.0
            noise = np.zeros(L + 2)
            noise[2 + j] = np.sqrt(2.0 * f * alpha)
            w = w - f * mu * u - alpha * w + noise
            u = u + w
        if abs(u[0]) >= 1.0:
            return np.inf
        return float(np.sqrt(mu * np.sum(u[1:] ** 2) / (1.0 - u[0] ** 2)))
    if method == "sgnht":
        # (u, w) -> (u + w', w'), w' = (1 - a) w - mu u + sqrt(2a) xi.
        m = np.array([[1.0 - mu, 1.0 - a], [-mu, 1.0 - a]])
        if np.max(np.abs(np.linalg.eigvals(m))) >= 1.0:
            return np.inf
        q = 2.0 * a * np.ones((2, 2))
        cov = np.linalg.solve(np.eye(4) - np.kron(m, m), q.reshape(-1)).reshape(2, 2)
        return float(np.sqrt(mu * cov[0, 0]))
    raise ValueError(f"no distortion formula for {method!r}: use one of {DYNAMICS}")


def largest_safe_mu(method: str, distortion: float = 0.1, **hyper: float) -> float:
    r"""The smallest scaled curvature μ at which :math:`|\rho(\mu) - 1|` reaches ``distortion``
    (closed form for SGLD, :math:`4(1 - (1+\delta)^{-2})`; otherwise a grid scan over (0, 4]
    and bisection). Stepsizes with μ below it keep the sd within the stated proportion."""
    if method == "sgld":
        return 4.0 * (1.0 - (1.0 + distortion) ** -2)

    def bad(mu: float) -> bool:
        return not abs(sd_ratio(method, mu, **hyper) - 1.0) <= distortion

    grid = np.geomspace(1e-4, 4.0, 400)
    flags = [bad(m) for m in grid]
    if not any(flags):
        return 4.0
    i = flags.index(True)
    if i == 0:
        return 0.0
    lo, hi = grid[i - 1], grid[i]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if bad(mid) else (mid, hi)
    return float(lo)


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
        Full-data Hessian-vector products used (each about two full-data gradients).
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
            f"direction is {stretch}. A stepsize of {_show(self.safe_stepsize)} or less keeps it within "
            f"{self.distortion:.0%} (sgmcmc.check_stepsize)."
        )


def _show(stepsize: float | dict) -> str:
    if isinstance(stepsize, dict):
        return "{" + ", ".join(f"{k!r}: {v:.3g}" for k, v in stepsize.items()) + "}"
    return f"{stepsize:.3g}"


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside the sgmcmc package (for ``warnings.warn``
    called by the caller of this function)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _top_scaled(hess: Operator, like: Arrays, stepsize: Mapping[str, float], max_iters: int, tol: float, seed: int) -> tuple[float, Arrays]:
    """μ = λ_max(E^½ A E^½) and its eigenvector, for stepsizes E = diag(stepsize)."""
    root = {k: np.sqrt(stepsize[k]) for k in like}
    mu, v, _ = largest_eigenvalue(
        lambda x: {k: root[k] * y for k, y in hess({k: root[k] * x[k] for k in like}).items()},
        like, max_iters, tol, seed,
    )
    return mu, v


def _block_curvatures(hess: Operator, like: Arrays, max_iters: int, tol: float, seed: int) -> dict[str, float]:
    """Name -> λ_max of that parameter's diagonal block of A (one power iteration each)."""
    names = list(like)
    blocks = {}
    for name in names:
        def block(x: Arrays, name: str = name) -> Arrays:
            full = {k: (x[k] if k == name else like[k]) for k in names}
            return {name: hess(full)[name]}

        blocks[name] = float(largest_eigenvalue(block, {name: like[name]}, max_iters, tol, seed)[0])
    return blocks


def _safe_per_parameter(
    method: str, hess: Operator, like: Arrays, blocks: dict[str, float], fallback: dict[str, float],
    hyper: dict[str, dict[str, float]], distortion: float, max_iters: int, tol: float, seed: int,
) -> dict[str, float]:
    """Each block's safe stepsize (safe μ / block curvature; ``fallback`` for a block without
    positive curvature), then scaled by one factor so the joint μ is exactly the safe μ (off-
    diagonal blocks can make the joint μ larger than any block's)."""
    steps = {
        k: largest_safe_mu(method, distortion, **hyper[k]) / lam if lam > 0 else fallback[k]
        for k, lam in blocks.items()
    }
    mu, v = _top_scaled(hess, like, steps, max_iters, tol, seed)
    loadings = {k: float(np.sum(np.square(v[k]))) for k in like}
    top = hyper[max(loadings, key=loadings.get)]
    factor = largest_safe_mu(method, distortion, **top) / mu if mu > 0 else 1.0
    return {k: e * factor for k, e in steps.items()}


def _check(
    method: str,
    estimator: MinibatchGradient,
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
) -> StepsizeCheck:
    names = list(point)
    hess = NegativeHessian(estimator, point)
    like = {k: np.zeros(np.shape(point[k])) for k in names}
    mu, v = _top_scaled(hess, like, stepsize, max_iters, tol, seed)
    if len(set(stepsize.values())) == 1:
        lam = mu / stepsize[names[0]]
    else:
        lam = largest_eigenvalue(hess, like, max_iters, tol, seed)[0]
    loadings = {k: float(np.sum(np.square(v[k]))) for k in names}
    top = hyper[max(loadings, key=loadings.get)]
    ratio = sd_ratio(method, mu, **top)
    safe_mu = largest_safe_mu(method, distortion, **top)
    factor = safe_mu / mu if mu > 0 else np.inf
    safe = {k: e * factor for k, e in stepsize.items()}
    blocks = per_block = curvature_ratio = None
    if per_parameter:
        blocks = _block_curvatures(hess, like, block_iters or max_iters, block_tol or tol, seed)
        positive = [c for c in blocks.values() if c > 0]
        if len(names) > 1 and len(positive) > 1:
            curvature_ratio = float(max(positive) / min(positive))
            fallback = safe if np.all(np.isfinite(list(safe.values()))) else stepsize
            per_block = _safe_per_parameter(method, hess, like, blocks, fallback, hyper, distortion, max_iters, tol, seed)
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
        too_large=not abs(ratio - 1.0) <= distortion,
        operator_calls=hess.calls,
        safe_stepsize_per_parameter=per_block,
        curvature_ratio=curvature_ratio,
        slow_mixing=bool(
            len(set(stepsize.values())) == 1 and curvature_ratio is not None and curvature_ratio >= SLOW_MIXING_RATIO
        ),
    )


def _warn(result: StepsizeCheck, who: str, stacklevel: int) -> None:
    """One StepsizeWarning saying what the check found: the stepsize too large, one shared
    stepsize leaving a parameter mixing far slower, or both."""
    parts = ([result.message(who)] if result.too_large else []) + ([result.mixing_message(who)] if result.slow_mixing else [])
    if parts:
        warnings.warn(" ".join(parts), StepsizeWarning, stacklevel=stacklevel + 1)


def _dynamics(method: Any) -> str:
    """The stability model of a sampler (a name or its function): its dynamics' trait."""
    name = method if isinstance(method, str) else getattr(method, "__name__", repr(method))
    row = METHODS.get(name.removesuffix("_setup"))
    stability = None if row is None or row.dynamics.preconditioned else row.dynamics.stepsize_stability
    if stability is None:
        raise ValueError(f"check_stepsize knows the dynamics {DYNAMICS} (and their CV versions), got {method!r}")
    return stability


def check_stepsize(
    log_lik: Callable,
    dataset: Any,
    params: Mapping[str, Any],
    stepsize: float | Mapping[str, float],
    log_prior: Callable | None = None,
    *,
    method: str | Callable = "sgld",
    alpha: float = 0.01,
    L: int = 5,
    a: float = 0.01,
    distortion: float = 0.1,
    per_parameter: bool = True,
    warn: bool = True,
    max_iters: int = 100,
    tol: float = 1e-4,
    seed: int = 0,
    dtype: tf.DType = tf.float32,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
) -> StepsizeCheck:
    r"""Is ``stepsize`` small enough for the posterior's curvature at ``params``?

    Estimates :math:`\mu = \lambda_{\max}(E^{1/2}AE^{1/2})`, :math:`A = -\nabla^2\log p(\theta|x)`
    over the full data (:math:`\mu = \epsilon\lambda_{\max}` for one stepsize) by power
    iteration on Hessian-vector products, and the sd distortion ρ(μ) this stepsize gives on a
    Gaussian with that curvature (SGLD: :math:`\rho = (1 - \mu/4)^{-1/2}`; SGHMC, SGNHT: their
    linear recursions; module docstring). Warns (:class:`~sgmcmc.StepsizeWarning`) when
    :math:`|\rho - 1| > \delta` and says which stepsize keeps it within δ. With one stepsize for
    parameters of very different curvature it also says that the softest parameter mixes far
    slower (ratio of block curvatures) and gives a stepsize per parameter. The CV samplers run
    this check themselves at the mode they find, before sampling.

    Parameters
    ----------
    log_lik, dataset, log_prior
        As for the samplers.
    params
        Where the curvature is taken: give a mode estimate (the curvature at a start far from the
        mode may differ; for logistic regression it is largest at β = 0, so a check there is
        conservative). No mode search is run.
    stepsize
        A number or a dict by parameter name (a schedule: check its largest value).
    method
        ``"sgld"``, ``"sghmc"``, ``"sgnht"`` (or a CV name, or the sampler function).
    alpha, L, a
        SGHMC's friction and leapfrog steps; SGNHT's ``a``.
    distortion
        δ, the tolerated relative error of the sd (default 0.1).
    per_parameter
        Also report each parameter's block curvature (one power iteration per parameter), and with
        two or more parameters a safe stepsize per parameter (``safe_stepsize_per_parameter``, one
        more power iteration) and the ratio of block curvatures (``curvature_ratio``).
    warn
        Issue the warning when the stepsize is too large, or when one shared stepsize leaves a
        parameter mixing :data:`SLOW_MIXING_RATIO` or more times slower than another
        (``slow_mixing``; the warning then suggests the per-parameter dict).
    max_iters, tol, seed
        Power iteration: at most ``max_iters`` Hessian-vector products per eigenvalue, stop at
        relative change ``tol`` of the Rayleigh quotient, seeded start.
    dtype
        The model's dtype, as for the samplers (the same default, ``tf.float32``): ``params`` and
        the float data are cast to it, so ``log_lik``/``log_prior`` see what a sampler would give
        them (a model with float32 constants, e.g. ``Normal(0.0, 10.0)``, cannot take float64).
        ``tf.float64`` for a float64 model; the power iteration itself accumulates in float64
        either way.
    strategy, shard_rows
        As for the samplers (SPEC §12): under a ``MultiWorkerMirroredStrategy`` with rows
        sharded (``shard_rows`` True or unset), every worker calls this with its own rows and the
        same other arguments (checked); every Hessian-vector product sums the workers' rows (one
        all-reduce each), so every worker gets the same result. Otherwise this process's rows
        are all the rows.

    Returns
    -------
    StepsizeCheck
    """
    name = _dynamics(method)
    dtype = checks.as_dtype(dtype)
    point = checks.check_params(params, dtype)
    data = checks.check_dataset(dataset, dtype)
    steps = checks.per_parameter(stepsize, list(point), "stepsize")
    same = dict(params=point, stepsize=steps, method=name, alpha=alpha, L=L, a=a, distortion=distortion,
                per_parameter=per_parameter, max_iters=max_iters, tol=tol, seed=seed, dtype=dtype.name,
                log_prior=log_prior is not None)
    collective = row_collective(strategy, shard_rows, "check_stepsize", same)
    reduce = None if collective is None else collective.all_reduce_sum
    estimator = MinibatchGradient(log_lik, log_prior, data, 1, 1, reduce=reduce)
    hyper = _hyper(name, list(point), alpha, L, a)
    result = _check(
        name, estimator, point, steps, not isinstance(stepsize, Mapping), hyper, distortion, per_parameter,
        max_iters, tol, seed,
    )
    if warn:
        _warn(result, "check_stepsize", stacklevel=2)
    return result


def _hyper(name: str, names: list[str], alpha: Any, L: Any, a: Any) -> dict[str, dict[str, float]]:
    """Per parameter, the hyperparameters of the distortion formula (a per-parameter ``alpha`` or
    ``a``: the check uses the value of the parameter the top eigenvector loads on most)."""
    if name == "sghmc":
        alphas = checks.per_parameter(alpha, names, "alpha")
        return {k: {"alpha": float(alphas[k]), "L": int(L)} for k in names}
    if name == "sgnht":
        a_s = checks.per_parameter(a, names, "a")
        return {k: {"a": float(a_s[k])} for k in names}
    return {k: {} for k in names}


def warn_if_stepsize_too_large(
    sampler, max_iters: int = 30, tol: float = 1e-3, block_iters: int = 10, block_tol: float = 1e-2
) -> StepsizeCheck | None:
    """The CV samplers' check, after the mode search and before sampling: the stepsize (a
    schedule: its first value) against the curvature at the mode found, warning as
    :func:`check_stepsize`. Samplers of other dynamics are not checked (None). Costs at most
    ``max_iters`` full-data Hessian-vector products (the Rayleigh quotient to ``tol``); with one
    shared stepsize and 2 to :data:`MAX_BLOCKS_CHECKED` parameters also each block's curvature
    (at most ``block_iters`` products each, to ``block_tol``: the ratio only needs to be rough)
    and, when there are two or more, the per-parameter dict (another ``max_iters``), so the
    warning can say when a parameter mixes :data:`SLOW_MIXING_RATIO` or more times slower."""
    kernel = sampler.kernel
    name = getattr(type(kernel), "stepsize_stability", None)
    if name is None or getattr(type(kernel), "preconditioned", False):
        return None
    steps = {k: float(e.at(1)) if callable(e) else float(e) for k, e in kernel.stepsize.items()}
    hyper = _hyper(name, list(steps), getattr(kernel, "alpha", 0.01), getattr(kernel, "L", 5), getattr(kernel, "a", 0.01))
    mode = {k: v.read_value() for k, v in sampler.estimator.mode.items()}
    shared = len(set(steps.values())) == 1
    blocks = shared and 2 <= len(steps) <= MAX_BLOCKS_CHECKED
    result = _check(
        name, sampler.one_chain_estimator, mode, steps, shared, hyper, 0.1, blocks, max_iters, tol, 0,
        block_iters=block_iters, block_tol=block_tol,
    )
    _warn(result, sampler.method, stacklevel=_user_stacklevel())
    return result
