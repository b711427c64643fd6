r"""The control-variate set-up: find the posterior mode by SGD, then fix the control
variate there with one full-data gradient (Baker et al. 2018; SPEC §3).

**The automatic mode-search stepsize** (``opt_stepsize=None``, :func:`auto_opt_stepsize`).
SGD on the log posterior, :math:`\hat\theta \leftarrow \hat\theta + h\,g(\hat\theta)` with g the
minibatch estimate (gradient scaled N/n), is on a Gaussian posterior with precision A the linear
recursion :math:`\delta' = (I - hA)\delta + h\xi` (δ = θ̂ − mode, ξ the minibatch noise). The
mean converges iff :math:`h\lambda_{\max} < 2`. The noise makes it jitter around the mode:
along an eigendirection of A with eigenvalue λ the stationary variance is
:math:`h^2V/(1 - (1 - h\lambda)^2) = hV/(\lambda(2 - h\lambda))` with
:math:`V = f\,\tfrac{N^2}{n}\,C_\lambda` (C the per-row gradient covariance, f = 1 − n/N rows
drawn without replacement, f = 1 with replacement). Near the mode of a well-specified model
:math:`NC \approx A` (information identity; the prior's share is small), so V = f(N/n)λ and the
jitter, in posterior sds (:math:`1/\sqrt\lambda`), has variance

.. math:: \frac{h\lambda\, f N/n}{2 - h\lambda}.

At :math:`h = \kappa/\lambda_{\max}` it is largest along the stiffest direction; it is exactly
one posterior sd there when :math:`\kappa = 2/(1 + fN/n)`, i.e. :math:`\kappa = 2n/N` without
replacement and :math:`2n/(N+n)` with. The rule is

.. math:: h = \min\{1,\ 2n/(N + [\text{replace}]\,n)\} / \lambda_{\max},

the cap 1 keeping the mean's recursion a factor 2 inside its stability limit when the minibatch
is (nearly) the whole dataset. The multiplicative noise of the minibatch Hessian moves the limit
only by a factor :math:`1 + (1 + \mathrm{tr}A/\lambda_{\max})/n` (least squares, Gaussian rows),
negligible at this κ. The cost of the safety: along a direction of curvature λ the search needs
about :math:`\lambda_{\max}/(\kappa\lambda)` iterations per e-fold, so a condition number times
N/(2n) beyond ``n_iters_opt`` leaves flat directions unconverged — which the end check reports.
λ_max is found by power iteration on full-data Hessian-vector products (as
:func:`sgmcmc.check_stepsize`) at the start and again after each of :data:`AUTO_STAGES` stages of
the search; the stepsize only ever decreases (h = κ / the largest λ_max seen), since the curvature
far from the mode can be much smaller than near it (logistic regression: saturated rows).

**The end check** (every mode search, :func:`check_mode`). With g the full-data gradient at the
search's end (the anchor's, computed anyway), :math:`D^2 = g^\top A^{-1} g` is on a Gaussian the
squared Mahalanobis distance of θ̂ from the mode (a posterior draw has :math:`D^2 \sim \chi^2_d`).
It is estimated from below by at most :data:`CHECK_CG_ITERS` conjugate-gradient iterations on
Hessian-vector products at θ̂ (the k-th CG iterate's :math:`g^\top x_k` increases to
:math:`g^\top A^{-1}g`; its first is :math:`\|g\|^4/g^\top Ag \ge \|g\|^2/\lambda_{\max}`, the
power-iteration bound). A :class:`ModeSearchWarning` when :math:`D > 5\sqrt d`
(:data:`MODE_DISTANCE`): five times the distance of a typical posterior draw (under the automatic
rule the jitter gives :math:`E D^2 \le d`).
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
import weakref

import numpy as np
import tensorflow as tf

from .chain import before_sampling, run_mode_search
from ..errors import DivergenceError
from .sampler import Sampler
from ..tuning.curvature import NegativeHessian, _user_stacklevel, largest_eigenvalue, warn_if_stepsize_too_large

#: The automatic search runs in this many stages, λ_max re-estimated before each.
AUTO_STAGES = 4
#: At most this many conjugate-gradient iterations (Hessian-vector products) in the end check.
CHECK_CG_ITERS = 20
#: The end check warns when the mode estimate is more than this times √d posterior sds away.
MODE_DISTANCE = 5.0


class ModeSearchWarning(UserWarning):
    """The control variate's SGD mode search ended far from a mode: the full-data gradient at its
    end is large against the posterior's scale there (module :mod:`sgmcmc.run.mode_search`).
    Raise ``n_iters_opt``, start nearer the mode, or pass ``opt_stepsize``."""


@dataclasses.dataclass(frozen=True)
class ModeCheck:
    """What :func:`check_mode` found.

    Attributes
    ----------
    distance : float
        D, a lower bound on the Mahalanobis distance of the estimate from the mode (posterior sds).
    threshold : float
        The distance above which the search counts as unconverged (5√d).
    grad_norm : float
        ‖g‖, the full-data gradient's Euclidean norm at the estimate.
    operator_calls : int
        Full-data Hessian-vector products used.
    """

    distance: float
    threshold: float
    grad_norm: float
    operator_calls: int

    @property
    def far(self) -> bool:
        return not self.distance <= self.threshold


class AutoStep:
    """The automatic mode-search stepsize: a schedule (callable of the iteration) reading a
    variable, so the compiled search is traced once and its stepsize set between stages."""

    def __init__(self, dtype: tf.DType):
        self.variable = tf.Variable(tf.zeros([], dtype), trainable=False, name="auto_opt_stepsize")
        self.curvature = 0.0

    def __call__(self, t):
        return self.variable.read_value()

    @property
    def value(self) -> float:
        return float(self.variable.numpy())


def auto_opt_stepsize(batch_size: int, n_rows: int, curvature: float, replace: bool = False) -> float:
    r"""The mode search's stepsize from the largest curvature (module docstring):

    .. math:: h = \min\{1,\ 2n/(N + [\text{replace}]\,n)\}/\lambda_{\max},

    the stepsize at which SGD's stationary jitter along the stiffest direction is one posterior sd.

    Parameters
    ----------
    batch_size
        n, the minibatch size.
    n_rows
        N, the dataset's rows.
    curvature
        λ_max of the negative log-posterior Hessian (full data).
    replace
        Whether minibatch rows are drawn with replacement (then f = 1).

    Returns
    -------
    float
    """
    kappa = min(1.0, 2.0 * batch_size / (n_rows + (batch_size if replace else 0)))
    return kappa / max(float(curvature), np.finfo(float).tiny)


#: One Hessian operator per sampler (its compiled Hessian-vector products traced once).
_HESSIANS: "weakref.WeakKeyDictionary[Sampler, NegativeHessian]" = weakref.WeakKeyDictionary()


def _point(sampler: Sampler) -> dict[str, tf.Tensor]:
    return {k: tf.convert_to_tensor(v.read_value()) for k, v in sampler.estimator.mode.items()}


def _hessian(sampler: Sampler) -> tuple[dict[str, tf.Tensor], NegativeHessian]:
    """The mode-search state and the full-data negative Hessian operator there."""
    point = _point(sampler)
    hess = _HESSIANS.get(sampler)
    if hess is None:
        hess = _HESSIANS[sampler] = NegativeHessian(sampler.one_chain_estimator, point)
    hess.params, hess.calls = point, 0
    return point, hess


def mode_curvature(sampler: Sampler, max_iters: int = 30, tol: float = 1e-2) -> float:
    """λ_max of the negative log-posterior Hessian at the mode-search state (power iteration on
    at most ``max_iters`` full-data Hessian-vector products, Rayleigh quotient to ``tol``)."""
    point, hess = _hessian(sampler)
    like = {k: np.zeros(v.shape) for k, v in point.items()}
    return float(largest_eigenvalue(hess, like, max_iters, tol, 0)[0])


def check_mode(sampler: Sampler, grad: dict, max_iters: int = CHECK_CG_ITERS) -> ModeCheck:
    r"""How far the mode-search state is from the mode: :math:`D^2 = g^\top A^{-1}g` (a lower
    bound, by at most ``max_iters`` conjugate-gradient iterations; module docstring).

    Parameters
    ----------
    sampler
        A control-variate sampler whose mode search has run.
    grad
        The full-data gradient of the log posterior at its state.
    max_iters
        Conjugate-gradient iterations (one Hessian-vector product each); exact after d.

    Returns
    -------
    ModeCheck
    """
    point, hess = _hessian(sampler)
    g = np.concatenate([np.ravel(np.asarray(grad[k], np.float64)) for k in point])
    shapes = {k: tuple(v.shape) for k, v in point.items()}
    sizes = [int(np.prod(s)) for s in shapes.values()]
    d = g.size

    def apply(v: np.ndarray) -> np.ndarray:
        parts = dict(zip(shapes, np.split(v, np.cumsum(sizes)[:-1])))
        out = hess({k: parts[k].reshape(s) for k, s in shapes.items()})
        return np.concatenate([np.ravel(out[k]) for k in shapes])

    x, r = np.zeros(d), g.copy()
    p, rr = r.copy(), float(r @ r)
    gnorm = float(np.sqrt(rr))
    for _ in range(min(max_iters, d)):
        if rr <= (1e-6 * gnorm) ** 2:
            break
        ap = apply(p)
        pap = float(p @ ap)
        if not pap > 0:  # not positive definite along p (saddle / flat): keep what we have
            break
        step = rr / pap
        x, r = x + step * p, r - step * ap
        rr_new = float(r @ r)
        p, rr = r + (rr_new / rr) * p, rr_new
    dist2 = max(float(g @ x), 0.0)
    return ModeCheck(float(np.sqrt(dist2)), MODE_DISTANCE * float(np.sqrt(d)), gnorm, hess.calls)


def run_auto_mode_search(sampler: Sampler, step: AutoStep, verbose: bool) -> None:
    """The mode search with the automatic stepsize: :data:`AUTO_STAGES` stages, λ_max estimated
    before each, the stepsize κ / (largest λ_max so far) (module docstring)."""
    settings = sampler.control_variate
    n_total = settings.n_iters_opt
    plain = sampler.one_chain_estimator
    replace = bool(getattr(plain, "replace", False))
    # n and N of the whole run: with rows sharded, all workers' (each worker's curvature is
    # all-reduced too, so every worker picks the same stepsize)
    shard = sampler.shard
    batch, rows = (plain.batch_size, plain.n_rows) if shard is None else (shard.batch_size, shard.n_rows)
    stages = [n_total * (i + 1) // AUTO_STAGES - n_total * i // AUTO_STAGES for i in range(AUTO_STAGES)]
    step.curvature = 0.0
    for n in stages:
        if not n:
            continue
        lam = mode_curvature(sampler)
        if lam > step.curvature:
            step.curvature = lam
            step.variable.assign(auto_opt_stepsize(batch, rows, lam, replace))
        if verbose:
            print(
                f"{sampler.method}: mode search, largest curvature {lam:.4g}: opt_stepsize {step.value:.4g} "
                f"(= min(1, 2n/N) / largest curvature so far)",
                file=sys.stderr,
            )
        run_mode_search(sampler, n, verbose)


def _auto_step(sampler: Sampler) -> AutoStep | None:
    """The sampler's automatic stepsize (made on first use), or None when ``opt_stepsize`` was given."""
    settings = sampler.control_variate
    if settings.opt_stepsize is None:
        step = AutoStep(sampler.dtype)
        sampler.control_variate = dataclasses.replace(settings, opt_stepsize={k: step for k in sampler.estimator.mode})
        return step
    first = next(iter(settings.opt_stepsize.values()))
    return first if isinstance(first, AutoStep) else None


def report_mode(sampler: Sampler, check: ModeCheck, verbose: bool) -> None:
    """Print the end check (``verbose``) and warn (:class:`ModeSearchWarning`) when far."""
    text = (
        f"{sampler.method}: the mode search ended at least {check.distance:.3g} posterior sds (Mahalanobis, "
        f"Gaussian approximation) from the mode; a posterior draw is about {check.threshold / MODE_DISTANCE:.3g} away"
    )
    if verbose:
        print(text, file=sys.stderr)
    if check.far:
        warnings.warn(
            text + f" (full-data gradient norm {check.grad_norm:.3g}): the search has not converged. Raise "
            f"n_iters_opt (now {sampler.control_variate.n_iters_opt}), start nearer the mode, or give opt_stepsize",
            ModeSearchWarning,
            stacklevel=_user_stacklevel(),
        )


@before_sampling
def find_mode_and_anchor(sampler: Sampler, verbose: bool) -> None:
    r"""Run ``n_iters_opt`` steps of :math:`\hat\theta \leftarrow \hat\theta + h\,g(\hat\theta)`
    from the first starting values, compute :math:`\nabla\log p(\hat\theta|x)` over the full
    dataset in batches, and fix the control variate there. With one start for all chains the
    chains start at :math:`\hat\theta` (R); with a list of starts each keeps its own.
    ``opt_stepsize=None`` chooses h from the curvature (:func:`auto_opt_stepsize`, in stages).
    ``n_iters_opt=0`` skips the search: the control variate is anchored at the first start.
    Then the distance from the mode is checked (:func:`check_mode`, a
    :class:`ModeSearchWarning` when far) and the stepsize against the curvature there (a
    :class:`~sgmcmc.StepsizeWarning` if it distorts the sd by more than 10 %,
    :func:`sgmcmc.check_stepsize`)."""
    settings = sampler.control_variate
    step = _auto_step(sampler)
    if settings.n_iters_opt:
        if step is not None:
            run_auto_mode_search(sampler, step, verbose)
        else:
            run_mode_search(sampler, settings.n_iters_opt, verbose)
    anchor_grad = sampler.full_data_gradient_at_mode()
    for name, g in anchor_grad.items():
        if not np.all(np.isfinite(g.numpy())):
            raise DivergenceError(
                f"{sampler.method}: the full-data gradient at the mode estimate is not finite for "
                f"{name!r}; try a smaller opt_stepsize. No samples exist yet",
                iteration=settings.n_iters_opt,
            )
    if settings.n_iters_opt:
        report_mode(sampler, check_mode(sampler, {k: g.numpy() for k, g in anchor_grad.items()}), verbose)
    sampler.set_anchor(anchor_grad)
    warn_if_stepsize_too_large(sampler)  # before sampling: stepsize x curvature at the mode
