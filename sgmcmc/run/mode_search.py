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
λ_max is found by Lanczos on Hessian-vector products over a row subsample scaled to N
(:data:`MODE_CHECK_ROWS`) at the start and again after each of :data:`AUTO_STAGES` stages of
the search; the stepsize only ever decreases (h = κ / the largest λ_max seen), since the curvature
far from the mode can be much smaller than near it (logistic regression: saturated rows).

**The end check** (every mode search, :func:`check_mode`). With g the full-data gradient at the
search's end (the anchor's, computed anyway), :math:`D^2 = g^\top A^{-1} g` is on a Gaussian the
squared Mahalanobis distance of θ̂ from the mode (a posterior draw has :math:`D^2 \sim \chi^2_d`).
It is estimated from below by at most :data:`CHECK_CG_ITERS` conjugate-gradient iterations on
Hessian-vector products at θ̂ (the k-th CG iterate's :math:`g^\top x_k` increases to
:math:`g^\top A^{-1}g`; its first is :math:`\|g\|^4/g^\top Ag \ge \|g\|^2/\lambda_{\max}`, the
power-iteration bound); A on the row subsample.

**Newton steps, then a verdict** (issue 29.2). SGD's stepsize must shrink with n/N to keep its
jitter within a posterior sd, so at large N/n it cannot reach the mode in ``n_iters_opt`` steps
(N = 2·10^6, n = 100: 290 sds away, and the chains anchored there were 8.5× too wide). While
:math:`D > \sqrt d` (:data:`POLISH_DISTANCE`, a typical draw's distance) damped Newton-CG steps
continue from the search's end (:func:`polish_mode`: the end check's CG solution as the step,
an Armijo line search on the full-data log posterior; at most :data:`NEWTON_STEPS`). If then
:math:`D > 5\sqrt d` (:data:`MODE_DISTANCE`), :class:`~sgmcmc.ModeSearchError`: nothing is
sampled from an anchor that far. (Measured by ``benchmarks/bench_mode_search.py``.)

**No mode at all** (issue 43.3). On an improper posterior (separable classes or a parameter the
likelihood does not identify, under a flat prior) the search ends somewhere on its way to
infinity, often within a few posterior sds by the end check, which assumes a mode exists. Before
the verdict, :func:`sgmcmc.run.improper.check_proper` continues the search on the row subsample
and tests rays for a log posterior that does not fall, raising
:class:`~sgmcmc.ImproperPosteriorError` (the derivation and its cost are in
:mod:`sgmcmc.run.improper`).
"""

from __future__ import annotations

import dataclasses
import sys
import weakref

import numpy as np
import tensorflow as tf

from tqdm.auto import tqdm

from .chain import NO_SAMPLES_YET, _chunk_or_sampling_error, _Pacer, _progress, before_sampling
from ..data.pipeline import iteration_of
from ..errors import DivergenceError, ModeSearchError
from ..graph_options import own_function, package_call_options
from ..step.contract import BoundEstimator, Minibatches
from ..step.dynamics.sgd import SGD
from .improper import check_proper
from .feeds import run_blocks
from .program import finite_per_chain
from .calls import ChunkResult
from .sampler import Sampler
from ..stability.curvature import NegativeHessian
from ..stability.check import RowSample, check_before_sampling, lanczos_largest

#: The automatic search runs in this many stages, λ_max re-estimated before each.
AUTO_STAGES = 4
#: At most this many conjugate-gradient iterations (Hessian-vector products) in the end check.
CHECK_CG_ITERS = 20
#: The end check warns when the mode estimate is more than this times √d posterior sds away.
MODE_DISTANCE = 5.0
#: After the SGD search, damped Newton-CG steps continue while the estimate is more than this
#: times √d posterior sds from the mode (√d: a typical posterior draw's distance) ...
POLISH_DISTANCE = 1.0
#: ... at most this many (each one full-data pass for the gradient and log posterior, more only
#: when the line search halves the step, and at most :data:`CHECK_CG_ITERS` Hessian-vector
#: products on the row subsample); if the estimate is then still more than MODE_DISTANCE·√d
#: away, :class:`~sgmcmc.ModeSearchError`.
NEWTON_STEPS = 10
#: The Hessian of the end check and the Newton steps: m = min(N, max(this, 10·n)) rows, scaled N/m.
MODE_CHECK_ROWS = 20_000


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
    #: The conjugate-gradient solution x of Ax = g: the Newton step (a dict like the mode).
    newton_step: dict | None = dataclasses.field(default=None, repr=False, compare=False)

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


# -- the SGD steps, in compiled chunks ------------------------------------------------------------
def mode_steps(sampler: Sampler, n: int) -> ChunkResult:
    """``n`` more steps of the SGD mode search (one chain, from the first start, its own
    minibatch stream and counter), through the sampler's block loop; returns the last
    log-posterior estimate and the search step at which it diverged (0: none)."""
    if sampler.mode_search.program is None:
        kernel = SGD(sampler.control_variate.opt_stepsize)
        mode = sampler.estimator.mode

        @own_function
        def run_opt_chunk(n, t0, block):
            """Up to ``n`` SGD steps; stops at the first whose state or estimate is not finite
            (that step not taken, ``diverged_at`` its iteration)."""

            def step(i, params, last, done, diverged_at):
                t = t0 + i + 1
                sampler.mode_search.rng.begin(t)
                minibatches = Minibatches(iteration_of(block, i))
                estimate = BoundEstimator(sampler.one_chain_estimator, minibatches, sampler.mode_search.rng, t)
                new, _, est = kernel.one_step(params, {}, estimate, sampler.mode_search.rng, t)
                finite = tf.reduce_all(finite_per_chain(new, est.log_post))
                return (i + 1, *tf.cond(
                    finite,
                    lambda: (new, est.log_post, i + 1, diverged_at),
                    lambda: (params, last, done, t),
                ))

            start = (
                tf.constant(0, tf.int64),
                {k: v.read_value()[None] for k, v in mode.items()},
                tf.zeros([1], sampler.dtype),
                tf.constant(0, tf.int64),
                tf.constant(0, tf.int64),
            )
            _, params, last, done, diverged_at = tf.while_loop(
                lambda i, params, last, done, diverged_at: tf.logical_and(i < n, diverged_at == 0), step, start
            )
            for k, v in mode.items():
                v.assign(params[k][0])
            return done, diverged_at, last

        sampler.mode_search.program = run_opt_chunk

    def call(m: int, block) -> tuple:
        with package_call_options():
            done, diverged_at, last = sampler.mode_search.program(
                tf.constant(m, tf.int64), tf.constant(sampler.mode_search.iteration, tf.int64), block
            )
        sampler.mode_search.iteration += int(done)
        return int(done), int(diverged_at), last.numpy()

    feed = sampler.feeds.get("mode")
    results = run_blocks(n, feed, feed.capacity, call, sampler.mode_search.iteration)
    done = sum(r[0] for r in results)
    return ChunkResult({}, np.empty((0, 1)), {}, results[-1][2], done, results[-1][1], np.zeros(1, bool))


def run_mode_search(sampler: Sampler, n_iters: int, verbose: bool) -> None:
    """The SGD mode search of the control-variate samplers, in compiled chunks with progress; an
    operation failing in a chunk (with rows sharded: a peer that died) raises
    :class:`~sgmcmc.SamplingError` with empty ``samples``, as :func:`before_sampling`."""
    desc = f"{sampler.method}: finding the mode"
    pacer, done = _Pacer(sampler, verbose), 0
    bar = _progress(desc, n_iters, 0, verbose)
    try:
        while done < n_iters:
            n = min(pacer.length, n_iters - done)
            chunk = pacer.timed(n, lambda: _chunk_or_sampling_error(
                lambda: mode_steps(sampler, n), desc, sampler, done, n, NO_SAMPLES_YET, dict, tf.errors.OpError,
            ))
            if chunk.diverged_at:  # the search's own step counter (it starts at 0 with the set-up)
                raise DivergenceError(
                    f"{desc}: the mode search diverged at its step {chunk.diverged_at} (NaN or Inf); "
                    f"try a smaller opt_stepsize. No samples exist yet",
                    iteration=chunk.diverged_at,
                )
            done += n
            bar.update(n)
            bar.set_postfix(log_post=f"{chunk.last_log_post[0]:.6g}", refresh=False)
    finally:
        bar.close()


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


#: One Hessian operator per sampler (its compiled Hessian-vector products traced once), on the
#: sampler's row subsample (:data:`MODE_CHECK_ROWS`).
_HESSIANS: "weakref.WeakKeyDictionary[Sampler, NegativeHessian]" = weakref.WeakKeyDictionary()


def _point(sampler: Sampler) -> dict[str, tf.Tensor]:
    return {k: tf.convert_to_tensor(v.read_value()) for k, v in sampler.estimator.mode.items()}


def _hessian(sampler: Sampler) -> tuple[dict[str, tf.Tensor], NegativeHessian]:
    """The mode-search state and the negative Hessian operator there, the likelihood's on a row
    subsample of at most max(:data:`MODE_CHECK_ROWS`, 10 n) rows scaled to N (all rows when N is
    that small): the search's curvature, its end check and its Newton steps need the curvature's
    scale and directions, not every row (at N = 5·10^7 a full-data product took ~4 s)."""
    point = _point(sampler)
    hess = _HESSIANS.get(sampler)
    if hess is None:
        plain = sampler.one_chain_estimator
        sample = RowSample.draw(plain.posterior, max(MODE_CHECK_ROWS, 10 * plain.batch_size), sampler.seed)
        hess = _HESSIANS[sampler] = NegativeHessian(plain.posterior, point, sample.rows, sample.scale)
    hess.params, hess.calls = point, 0
    return point, hess


def mode_curvature(sampler: Sampler, max_iters: int = 20, tol: float = 1e-3) -> float:
    """λ_max of the negative log-posterior Hessian at the mode-search state (Lanczos, at most
    ``max_iters`` Hessian-vector products on the row subsample, to relative change ``tol``)."""
    point, hess = _hessian(sampler)
    like = {k: np.zeros(v.shape) for k, v in point.items()}
    with package_call_options():
        return float(lanczos_largest(hess, like, max_iters, tol, 0)[0])


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
        with package_call_options():
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
    step = dict(zip(shapes, np.split(x, np.cumsum(sizes)[:-1])))
    return ModeCheck(
        float(np.sqrt(dist2)), MODE_DISTANCE * float(np.sqrt(d)), gnorm, hess.calls,
        {k: step[k].reshape(s) for k, s in shapes.items()},
    )


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


def _full_pass(sampler: Sampler, point: dict, verbose: bool, what: str) -> tuple[float, dict]:
    """The full-data log posterior and its gradient at ``point`` (one streamed pass, with a
    progress bar when ``verbose``)."""
    with tqdm(total=sampler.n_rows, desc=f"{sampler.method}: {what}", unit="rows", unit_scale=True,
              disable=not verbose, leave=False) as bar, package_call_options():
        return sampler.one_chain_estimator.full_data_log_post_and_gradient(point, bar.update)


def polish_mode(sampler: Sampler, grad: dict, check: ModeCheck, verbose: bool) -> tuple[dict, ModeCheck, int]:
    r"""Damped Newton-CG from the search's end while the end check puts it more than
    :data:`POLISH_DISTANCE`·√d posterior sds from the mode: the step is the end check's CG
    solution x of Ax = g (A on the row subsample, g the full-data gradient), its length chosen by
    backtracking until the full-data log posterior rises by at least 10⁻⁴·t·gᵀx (Armijo;
    halving t from 1, at most 20 times). At most :data:`NEWTON_STEPS` steps. SGD's stepsize must
    shrink with N/n to keep its jitter within a posterior sd, so at N = 2·10^6 and n = 100 its
    10^4 steps ended 290 sds away (issue 29.2); on a posterior near a Gaussian a Newton step from
    there lands within a fraction of an sd. Returns the gradient and check at the new state and the
    full-data passes made (the state is written to the mode variables)."""
    d = check.threshold / MODE_DISTANCE
    passes, value = 0, None
    if verbose and check.distance > POLISH_DISTANCE * d:
        print(f"{sampler.method}: the SGD search ended at least {check.distance:.3g} posterior sds from the mode: "
              f"Newton steps follow", file=sys.stderr)
    for _ in range(NEWTON_STEPS):
        if check.distance <= POLISH_DISTANCE * d or not check.newton_step:
            break
        point = {k: v.numpy().astype(np.float64) for k, v in _point(sampler).items()}
        if value is None:
            value, _ = _full_pass(sampler, _point(sampler), verbose, "log posterior at the search's end")
            passes += 1
        slope, t = check.distance**2, 1.0
        for _ in range(20):
            trial = {k: tf.constant(point[k] + t * check.newton_step[k], sampler.dtype) for k in point}
            new_value, new_grad = _full_pass(sampler, trial, verbose, "Newton step")
            passes += 1
            if np.isfinite(new_value) and new_value >= value + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            break  # no ascent along the Newton direction: leave the state as it is
        for k, v in sampler.estimator.mode.items():
            v.assign(trial[k])
        value, grad = new_value, new_grad
        check = check_mode(sampler, {k: g.numpy() for k, g in grad.items()})
        if verbose:
            print(f"{sampler.method}: Newton step (length {t:g}): {check.distance:.3g} posterior sds from the mode",
                  file=sys.stderr)
    return grad, check, passes


def report_mode(sampler: Sampler, check: ModeCheck, verbose: bool) -> None:
    """Print the end check (``verbose``); raise :class:`~sgmcmc.ModeSearchError` when the
    estimate is still far after the Newton steps (a control variate anchored there makes the
    chain far too wide: sd × 8.5–14.5 at 290–3,320 sds, issue 29.2)."""
    typical = check.threshold / MODE_DISTANCE
    text = (
        f"{sampler.method}: the mode search ended at least {check.distance:.3g} posterior sds (Mahalanobis, "
        f"Gaussian approximation) from the mode; a posterior draw is about {typical:.3g} away"
    )
    if verbose:
        if check.far:
            pass  # the error below says what to do
        elif check.distance > POLISH_DISTANCE * typical:
            # issue 44.8: not an error, but the user can do better
            print(text + f": farther than a draw even after the Newton steps, so the chains start out "
                  f"there and the control variate is less effective. Drop the first iterations (burn_in=...), "
                  f"and for a closer anchor raise n_iters_opt (now {sampler.control_variate.n_iters_opt}) or "
                  f"start nearer the mode (params=...)", file=sys.stderr)
        else:
            print(text + ": close enough, nothing to do", file=sys.stderr)
    if check.far:
        raise ModeSearchError(
            text + f" (full-data gradient norm {check.grad_norm:.3g}), after {NEWTON_STEPS} Newton steps: the "
            f"control variate would be anchored far from the mode and the samples would be too wide. Nothing was "
            f"sampled. Start nearer the mode (params=...), raise n_iters_opt (now "
            f"{sampler.control_variate.n_iters_opt}) or give opt_stepsize; or use estimator='plain' or 'svrg', "
            f"which need no mode",
            check.distance, check.threshold,
        )


@before_sampling
def find_mode_and_anchor(sampler: Sampler, verbose: bool) -> None:
    r"""Run ``n_iters_opt`` steps of :math:`\hat\theta \leftarrow \hat\theta + h\,g(\hat\theta)`
    from the first starting values, compute :math:`\nabla\log p(\hat\theta|x)` over the full
    dataset in batches, and fix the control variate there. With one start for all chains the
    chains start at :math:`\hat\theta` (R); with a list of starts each keeps its own.
    ``opt_stepsize=None`` chooses h from the curvature (:func:`auto_opt_stepsize`, in stages).
    ``n_iters_opt=0`` skips the search: the control variate is anchored at the first start.
    Then the distance from the mode is checked (:func:`check_mode`); while it is more than
    √d posterior sds, damped Newton-CG steps continue (:func:`polish_mode`), and if the estimate
    is still more than 5√d away, :class:`~sgmcmc.ModeSearchError`. Before that verdict, a
    posterior that has no mode is refused: :func:`sgmcmc.run.improper.check_proper` raises
    :class:`~sgmcmc.ImproperPosteriorError` when the log posterior keeps rising or stays flat
    along a direction in which parameters run away (it runs only when the prior does not curve
    every parameter element). Last, the stepsize is checked against the curvature there
    (:func:`sgmcmc.stability.check.check_before_sampling`)."""
    settings = sampler.control_variate
    step = _auto_step(sampler)
    if settings.n_iters_opt:
        if step is not None:
            run_auto_mode_search(sampler, step, verbose)
        else:
            run_mode_search(sampler, settings.n_iters_opt, verbose)
    anchor_grad = full_data_gradient_at_mode(sampler)
    for name, g in anchor_grad.items():
        if not np.all(np.isfinite(g.numpy())):
            raise DivergenceError(
                f"{sampler.method}: the full-data gradient at the mode estimate is not finite for "
                f"{name!r}; try a smaller opt_stepsize. No samples exist yet",
                iteration=settings.n_iters_opt,
            )
    if settings.n_iters_opt:
        check = check_mode(sampler, {k: g.numpy() for k, g in anchor_grad.items()})
        anchor_grad, check, _ = polish_mode(sampler, anchor_grad, check, verbose)
        check_proper(sampler, _hessian(sampler)[1], verbose=verbose)
        report_mode(sampler, check, verbose)
    set_anchor(sampler, anchor_grad)
    check_before_sampling(sampler)  # before sampling: stepsize x curvature at the mode, with the noise


def full_data_gradient_at_mode(sampler: Sampler) -> dict[str, tf.Tensor]:
    r""":math:`\nabla\log p(\hat\theta|x)` at the mode-search state, streamed over all rows in
    blocks, with a progress bar when the mode search shows its progress."""
    with tqdm(
        total=sampler.n_rows, desc=f"{sampler.method}: full-data gradient", unit="rows", unit_scale=True,
        disable=not sampler.control_variate.verbose, leave=False,
    ) as bar, package_call_options():
        mode = {k: v.read_value() for k, v in sampler.estimator.mode.items()}
        return sampler.one_chain_estimator.full_data_gradient(mode, bar.update)


def set_anchor(sampler: Sampler, anchor_grad: dict[str, tf.Tensor]) -> None:
    """Fix the control variate at the mode-search state with its full-data gradient; with one
    start for all chains (R), every chain starts at the mode."""
    sampler.estimator.set_anchor(anchor_grad)
    if not sampler.starts_given_per_chain:
        mode = {k: v.numpy() for k, v in sampler.estimator.mode.items()}
        sampler.variables.set_params([mode] * sampler.n_chains)
