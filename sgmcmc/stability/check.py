r"""The check every gradient sampler makes before sampling (issue 29.3–4): is the stepsize
stable for the posterior's curvature, and how far does it — with the minibatch noise — stretch
the chain's sd?

**What is measured.** At the point where sampling starts (the first chain's start; the CV
samplers: the mode they found), with the stepsizes :math:`E = \mathrm{diag}(\epsilon_k)`:

* :math:`\mu = \lambda_{\max}(E^{1/2}AE^{1/2})`, :math:`A = -\nabla^2\log p(\theta|x)`, by
  Lanczos (:func:`lanczos`, at most :data:`LANCZOS_STEPS` Hessian-vector products; its Ritz value
  approaches λ_max from below) on a row subsample (:class:`RowSample`: at most
  :data:`MIN_ROWS` or :data:`ROWS_PER_MINIBATCH` minibatches' worth of rows, the likelihood's
  Hessian scaled by N/m; all rows when N is that small);
* the gradient estimate's noise along the top direction v (θ-direction w = E^½v), in the same
  scaled units: :math:`q = w^\top V w`, :math:`V = f\,\tfrac{N^2}{n}\,\mathrm{Cov}_i(s_i)`, the
  per-row directional derivatives :math:`s_i = \nabla\log p(x_i|\theta)\cdot w` over the subsample
  (f = (N − n)/(N − 1) without replacement, 1 with; :class:`MinibatchNoise`). For the control
  variate (and SVRG/SAGA) the rows' gradients enter as differences from the anchor,
  :math:`s_i = (\nabla\log p(x_i|\hat\theta + \delta) - \nabla\log p(x_i|\hat\theta))\cdot w`,
  averaged over :data:`DIFFERENCE_DRAWS` displacements δ ~ N(0, A⁻¹) drawn in the Lanczos
  subspace (directions outside it are not seen: a lower estimate; SVRG/SAGA: δ·√2, the anchor
  being a posterior draw too);
* with one stepsize shared by 2–:data:`~sgmcmc.stability.curvature.MAX_BLOCKS_CHECKED`
  parameters, each parameter's block curvature (λ_max of its diagonal block of A, for the
  slow-mixing warning), by Lanczos on at most :data:`BLOCK_ROWS` of the subsample's rows.

On a Gaussian, along v, SGLD is :math:`u' = (1-\mu/2)u + \xi + \tfrac12\sqrt q\,\zeta`, so the
stationary sd over the posterior's is :math:`\rho = \sqrt{(1 + q/4)/(1 - \mu/4)}`; SGHMC and SGNHT
as in :func:`sgmcmc.stability.curvature.sd_ratio` with the noise in every kick. Near the mode of a
well-specified model :math:`NC \approx A`, so for the plain estimator :math:`q \approx f(N/n)\mu`:
at N/n = 100 the noise, not the discretisation, decides the sd.

**What is done.** μ at or beyond the dynamics' stability limit (SGLD: 4) raises
:class:`~sgmcmc.StepsizeError` before anything is compiled, giving the stepsize that keeps the
sd within 10 % and the limit; a stable stepsize that distorts the sd by more than 10 % (and the
estimates' slack, :data:`ESTIMATE_SLACK`) gives a :class:`~sgmcmc.StepsizeWarning` (as
:func:`sgmcmc.check_stepsize`). ``check_stepsize=False`` on
the sampler turns both off. Dynamics with an adaptive preconditioner (pSGLD, HAMCMC), OSGLD (no
stepsize) and BAOAB (no distortion model yet) are not checked here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from ..tempering import check_temperature, scaled, tempered
from ..errors import StepsizeError, user_stacklevel
from ..graph_options import own_function, package_call_options
from ..data.rows import Rows, aligned_empty, as_tensor
from ..data.stream import BatchStream
from ..step.estimators.plain import MinibatchGradient, value_and_grad
from ..step.posterior import Posterior
from .. import checks
from ..distribute.placement import row_collective
from .curvature import (
    MAX_BLOCKS_CHECKED,
    SUBSAMPLE_BATCH_ROWS,
    NegativeHessian,
    StepsizeCheck,
    _check,
    _dynamics,
    _hyper,
    _is_control_variate,
    _warn,
    scaled_operator,
    stability_model,
)

Arrays = dict[str, np.ndarray]

#: Lanczos steps (Hessian-vector products) for the top curvature; stopped earlier when the top
#: Ritz value moves by less than :data:`LANCZOS_TOL` (relative).
LANCZOS_STEPS = 15
LANCZOS_TOL = 1e-3
#: The check's row subsample: m = min(N, max(MIN_ROWS, ROWS_PER_MINIBATCH · n)).
MIN_ROWS = 20_000
ROWS_PER_MINIBATCH = 10
#: The per-parameter block curvatures (the slow-mixing warning's ratio and its suggested
#: stepsize per parameter, that suggestion's joint scaling too) are taken on at most this many
#: of the subsample's rows, by Lanczos (≤ 8 steps, 1 % tolerance; a one-element block: one
#: product): each block costs its own Hessian-vector products. A subsample's λ_max overestimates the full data's in expectation
#: (λ_max is convex, the subsample's Hessian unbiased), most for high-dimensional blocks of flat
#: spectrum: on the bnn_mnist network (d = 79,510), 5,000 of 20,000 rows gave 1.00–1.02× for
#: the output layer and the precisions, 1.01–1.48× for the hidden kernel and 1.08–1.54× for its
#: bias (seeds 0–2; 2,000 rows: up to 2.0×), so the ratio errs towards warning and the
#: suggested stepsizes towards small. (Power iteration, 8 steps, gave that hidden kernel 0.001×.)
BLOCK_ROWS = SUBSAMPLE_BATCH_ROWS
#: Displacements δ ~ N(0, A⁻¹) at which the control variate's row differences are taken.
DIFFERENCE_DRAWS = 4
#: The sampler's own check warns when the sd is off by more than 10 % plus this: its estimates
#: (subsample, Lanczos, 500 noise groups: ρ to about ±0.5 %) differ from check_stepsize's, and a
#: stepsize that check_stepsize calls safe (ρ = 1.1 exactly) must not then warn at 1.1003.
ESTIMATE_SLACK = 0.01


# -- Lanczos ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lanczos:
    """Ritz pairs of a symmetric operator from :func:`lanczos`: ``values`` descending, ``vectors``
    (dicts like the operator's argument, unit norm), ``calls`` operator applications."""

    values: np.ndarray
    vectors: list[Arrays]
    calls: int


def flatten(values: Mapping[str, Any], names: list[str]) -> np.ndarray:
    """The parameters ``names`` of ``values`` as one float64 vector, in that order."""
    return np.concatenate([np.ravel(np.asarray(values[k], np.float64)) for k in names])


def unflatten(x: np.ndarray, like: Mapping[str, Any]) -> Arrays:
    """``x`` ``[..., d]`` split into ``like``'s parameters (their shapes after the leading axes)."""
    out, start = {}, 0
    lead = x.shape[:-1]
    for k, v in like.items():
        size = int(np.prod(np.shape(v)))
        out[k] = x[..., start : start + size].reshape(lead + np.shape(v))
        start += size
    return out


def lanczos(operator: Callable[[Arrays], Arrays], like: Mapping[str, Any], max_iters: int = LANCZOS_STEPS,
            tol: float = LANCZOS_TOL, seed: int = 0, top_only: bool = False) -> Lanczos:
    r"""Lanczos with full reorthogonalisation from a seeded normal start: the Ritz pairs of the
    Krylov subspace :math:`\mathcal K_k(B, v_0)`, stopped when the largest Ritz value θ changes by
    at most ``tol`` relative, or the subspace is invariant; with ``top_only`` (only the top pair
    is wanted, not the subspace) also when its error bound :math:`r^2/\min(\delta, |\theta|)` is at
    most ``tol``·|θ| (r = β_k|s_k|, the Ritz pair's residual; δ the gap to the next Ritz value;
    Parlett, *The Symmetric Eigenvalue Problem*, §11.7): the check's top curvature on the
    bnn_mnist network, one product (four batches of rows) fewer, the value within 2e-4 of the
    longer run's. (The block curvatures keep the change rule: with the bound at their 1 %
    tolerance a Gaussian block whose exact answer the tests know came out 0.5 % low.) The
    largest Ritz value approaches λ_max from below, much faster than power iteration's Rayleigh
    quotient (error ∝ the Chebyshev polynomial of the spectral gap instead of its k-th power)."""
    names = list(like)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(sum(int(np.prod(np.shape(like[k]))) for k in names))
    basis = [q / np.linalg.norm(q)]
    alphas, betas = [], []
    top_prev, calls = None, 0
    for _ in range(min(max_iters, len(q))):
        w = flatten(operator(unflatten(basis[-1], like)), names)
        calls += 1
        alphas.append(float(basis[-1] @ w))
        stack = np.array(basis)
        for _ in range(2):  # full reorthogonalisation, twice is enough
            w = w - stack.T @ (stack @ w)
        beta = float(np.linalg.norm(w))
        tri = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
        ritz, small = np.linalg.eigh(tri)
        top = float(ritz[-1])
        scale = max(abs(top), abs(alphas[0]), np.finfo(float).tiny)
        # the top Ritz value's residual is beta·|last component of its vector|; its error is at
        # most residual² / (gap to the next eigenvalue), the gap estimated by the Ritz values'
        # and taken at most |top| (so the residual itself is within √tol · |top|)
        residual = beta * abs(small[-1, -1])
        gap = min(top - float(ritz[-2]), abs(top)) if len(ritz) > 1 else 0.0
        converged = top_only and gap > 0 and residual**2 <= tol * abs(top) * gap
        if beta <= 1e-10 * scale or converged or (top_prev is not None and abs(top - top_prev) <= tol * abs(top)):
            break
        top_prev = top
        betas.append(beta)
        basis.append(w / beta)
    k = len(alphas)
    tri = np.diag(alphas) + np.diag(betas[: k - 1], 1) + np.diag(betas[: k - 1], -1)
    values, small = np.linalg.eigh(tri)
    order = np.argsort(values)[::-1]
    stack = np.array(basis[:k])
    return Lanczos(values[order], [unflatten(stack.T @ small[:, j], like) for j in order], calls)


def lanczos_largest(operator, like, max_iters: int = LANCZOS_STEPS, tol: float = LANCZOS_TOL, seed: int = 0):
    """(largest Ritz value, its vector, calls): :func:`sgmcmc.stability.curvature.largest_eigenvalue`'s
    contract, by :func:`lanczos`."""
    result = lanczos(operator, like, max_iters, tol, seed)
    return float(result.values[0]), result.vectors[0], result.calls


# -- the rows the check looks at ------------------------------------------------------------------
def check_rows(batch_size: int) -> int:
    """The check's subsample size: max(:data:`MIN_ROWS`, :data:`ROWS_PER_MINIBATCH` · n)."""
    return max(MIN_ROWS, ROWS_PER_MINIBATCH * int(batch_size))


@dataclass(frozen=True)
class RowSample:
    """The rows the check sums over: all N when few, else m distinct rows drawn once (seeded,
    sorted) with the likelihood scaled by N/m. ``rows`` name -> ``[m, …]`` in the model dtype."""

    rows: dict[str, np.ndarray]
    scale: float
    exact: bool

    @property
    def size(self) -> int:
        return len(next(iter(self.rows.values())))

    @classmethod
    def draw(cls, posterior: Posterior, sample_size: int, seed: int) -> "RowSample":
        """At most ``sample_size`` of the model's rows (all of them when it has no more). From a
        ``tf.data`` pipeline (:mod:`sgmcmc.data.stream`), which has no rows by index: the rows of
        its first ⌈m/n⌉ elements, m = min(N, ``sample_size``), scaled N/m — a sample of the data as far
        as the pipeline shuffles it (:meth:`~sgmcmc.data.stream.BatchStream.first_rows`)."""
        n_rows = posterior.n_rows
        if isinstance(posterior.rows, BatchStream):
            taken = posterior.rows.first_rows(min(n_rows, int(sample_size)))
            m = len(next(iter(taken.values())))
            return cls(taken, n_rows / m, False)
        m = min(n_rows, int(sample_size))
        if m == n_rows:
            indices = np.arange(n_rows, dtype=np.int64)
        else:
            indices = np.sort(np.random.default_rng([int(seed) & 0xFFFFFFFF, 29]).choice(n_rows, m, replace=False))
        rows_read = posterior.rows
        out = {k: aligned_empty((m, *shape), rows_read.dtypes[k]) for k, shape in rows_read.row_shapes.items()}
        return cls(rows_read.take(indices, out=out), n_rows / m, m == n_rows)

    def subsample(self, sample_size: int, seed: int) -> "RowSample":
        """At most ``sample_size`` of these rows (all of them when there are no more), drawn once
        (seeded, kept in order), their likelihood scaled to all N rows."""
        if sample_size >= self.size:
            return self
        keep = np.sort(np.random.default_rng([int(seed) & 0xFFFFFFFF, 31]).choice(self.size, sample_size, replace=False))
        return RowSample(self.take(keep), self.scale * self.size / sample_size, False)

    def take(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Rows ``indices`` (any shape) of the sample, each entry one new aligned array (read as
        a tensor without another copy: :func:`~sgmcmc.data.rows.as_tensor`). The check's
        row arrays are tens of MB; fresh ones cost their page faults (~3 ms per MB here), so
        each is made once."""
        return {k: np.take(x, indices, axis=0, out=aligned_empty((*np.shape(indices), *x.shape[1:]), x.dtype))
                for k, x in self.rows.items()}


class MinibatchNoise:
    r"""``w ↦`` :math:`w^\top V w`, the minibatch gradient estimate's variance along the
    θ-direction w (module docstring), from ``sample``'s rows.

    The per-row variance :math:`\mathrm{Var}_i(s_i)` is estimated from :data:`NOISE_GROUPS`
    groups of b rows: the groups' sums :math:`S_g = \sum_{i\in g} s_i` are directional
    derivatives of ``log_lik`` on b rows (one gradient per group, in one compiled loop), and for
    rows drawn at random :math:`\mathrm{Var}(S_g) = b\,\mathrm{Var}_i(s_i)`. (Per-row gradients by
    ``vectorized_map`` gave the same figure but took ~1.3 s to trace for a logistic regression.)

    Parameters
    ----------
    estimator
        The plain estimator (its ``log_lik``, N = ``n_rows``, ``replace``; with rows sharded,
        ``sum_over_workers`` adds the workers' strata).
    point
        Where the estimate is taken (the anchor θ̂ for differences).
    sample
        The rows (a random subsample, or all rows in their order: shuffled here).
    batch_size
        n (this worker's n_w with rows sharded).
    displacements
        None for the plain estimator; else the δ's at which the row differences
        :math:`\nabla\log p(x_i|\hat\theta + \delta) - \nabla\log p(x_i|\hat\theta)` are taken.
    seed
        Seeds the rows' grouping.
    """

    def __init__(self, estimator: MinibatchGradient, point: Mapping[str, Any], sample: RowSample, batch_size: int,
                 displacements: list[Arrays] | None = None, seed: int = 0):
        self.estimator, self.batch_size = estimator, int(batch_size)
        self.point = {k: tf.convert_to_tensor(v) for k, v in point.items()}
        self.dtype = next(iter(self.point.values())).dtype
        self.displacements = displacements
        groups = max(2, min(NOISE_GROUPS, sample.size))
        self.group_rows = sample.size // groups
        order = np.random.default_rng([int(seed) & 0xFFFFFFFF, 37]).permutation(sample.size)[: groups * self.group_rows]
        self.groups = {k: as_tensor(x) for k, x in sample.take(order.reshape(groups, self.group_rows)).items()}

    def _group_sums(self, params: Mapping[str, tf.Tensor], w: Mapping[str, tf.Tensor]) -> np.ndarray:
        return group_directional_sums(self.estimator, params, w, self.groups).numpy().astype(np.float64)

    def __call__(self, w: Arrays) -> float:
        wt = {k: tf.constant(np.asarray(w[k]), self.dtype) for k in self.point}
        with package_call_options():
            if self.displacements is None:
                sums = [self._group_sums(self.point, wt)]
            else:
                at_anchor = self._group_sums(self.point, wt)
                sums = []
                for delta in self.displacements:
                    moved = {k: self.point[k] + tf.constant(delta[k], self.dtype) for k in self.point}
                    sums.append(self._group_sums(moved, wt) - at_anchor)
        n_rows, n = self.estimator.n_rows, self.batch_size
        finite = 1.0 if self.estimator.replace else max(n_rows - n, 0) / max(n_rows - 1, 1)
        per_row = float(np.mean([np.var(g, ddof=1) for g in sums])) / self.group_rows
        local = {"v": np.array(finite * n_rows**2 / n * per_row)}
        return float(self.estimator.sum_over_workers(local)["v"])


#: Groups of rows the noise is estimated from (the variance's relative error is √(2/groups): 6 %).
NOISE_GROUPS = 500


def group_directional_sums(estimator: MinibatchGradient, params, w, groups) -> tf.Tensor:
    r"""``[G]``: :math:`\nabla_\theta\,\mathrm{log\_lik}(\theta, \text{group}_g)\cdot w` for each
    group of rows (``groups`` name -> ``[G, b, …]``), one compiled loop (traced once per model:
    :meth:`~sgmcmc.step.estimators.plain.MinibatchGradient.program`)."""
    return estimator.program("group_directional_sums", _group_sums_program)(params, w, groups)


def _group_sums_program(log_lik: Callable, log_prior: Callable | None):
    def sums(params, w, groups):
        def one(group):
            grads = value_and_grad(lambda p: log_lik(p, group), params)[1]
            return tf.add_n([tf.reduce_sum(grads[k] * w[k]) for k in params])

        return tf.map_fn(one, groups, fn_output_signature=next(iter(params.values())).dtype, parallel_iterations=8)

    return own_function(sums, reduce_retracing=True)


def difference_displacements(ritz: Lanczos, root: Arrays, draws: int, spread: float, seed: int) -> list[Arrays]:
    r"""δ ~ N(0, A⁻¹) restricted to the Lanczos subspace of :math:`B = E^{1/2}AE^{1/2}`:
    :math:`\delta = E^{1/2}\sum_j z_j u_j/\sqrt{\theta_j}` over the positive Ritz pairs, times ``spread``."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 31])
    pairs = [(t, u) for t, u in zip(ritz.values, ritz.vectors) if t > 0]
    out = []
    for _ in range(draws):
        z = rng.standard_normal(len(pairs))
        out.append({k: spread * root[k] * sum(zj / np.sqrt(t) * u[k] for zj, (t, u) in zip(z, pairs)) for k in root})
    return out


# -- the check --------------------------------------------------------------------------------------
def first_stepsize(value: Any) -> float:
    """A stepsize's value at the first iteration: a number, a Schedule (``.at``) or any callable
    h(t) of TF ops (the library's one stepsize rule, probed at t = 1)."""
    if hasattr(value, "at"):
        return float(value.at(1))
    if callable(value):
        return float(value(tf.constant(1, tf.int64)))
    return float(value)


def check_before_sampling(sampler, point: Mapping[str, Any] | None = None):
    """The sampler's stepsize check (module docstring) at ``point`` (default: the CV mode, else
    the first chain's start), before anything is compiled: raises :class:`~sgmcmc.StepsizeError`
    when unstable, warns when the sd is distorted by more than 10 %; returns the
    :class:`~sgmcmc.stability.curvature.StepsizeCheck`, or None when the sampler's dynamics is not
    checked (or ``check_stepsize=False``). Its ``safe_stepsize_per_parameter`` is computed only
    when ``slow_mixing`` (the warning's suggestion), else None."""
    kernel, plain = sampler.kernel, sampler.plain_estimator
    method = getattr(type(kernel), "stepsize_stability", None)
    if not sampler.stepsize_check or plain is None or method is None or getattr(type(kernel), "preconditioned", False):
        return None
    steps = {k: first_stepsize(e) for k, e in kernel.stepsize.items()}
    values = {name: getattr(kernel, name) for name in type(kernel).hyperparameters}
    hyper = stability_model(method).distortion_hyperparameters(list(steps), values)
    if point is None:
        point = _check_point(sampler)
    point = {k: tf.convert_to_tensor(v) for k, v in point.items()}
    batch_size = plain.batch_size
    sample = RowSample.draw(plain.posterior, check_rows(batch_size), sampler.seed)
    shared = len(set(steps.values())) == 1
    blocks = shared and 2 <= len(steps) <= MAX_BLOCKS_CHECKED
    with package_call_options():
        hess = NegativeHessian(plain.posterior, point, sample.rows, sample.scale)
        block_hess = None
        if blocks:
            block_sample = sample.subsample(BLOCK_ROWS, sampler.seed)
            block_hess = NegativeHessian(plain.posterior, point, block_sample.rows, block_sample.scale)
        like = {k: np.zeros(v.shape) for k, v in point.items()}
        root = {k: np.sqrt(steps[k]) for k in like}
        kind = noise_kind(sampler)
        ritz = lanczos(scaled_operator(hess, root), like, top_only=kind == "plain")  # else its subspace is used
        displacements = None
        if kind != "plain":
            displacements = difference_displacements(ritz, root, DIFFERENCE_DRAWS, np.sqrt(2.0) if kind == "anchor_draw" else 1.0, sampler.seed)
        noise = MinibatchNoise(plain, point, sample, batch_size, displacements, sampler.seed)
        result = _check(
            method, plain.posterior, point, steps, shared, hyper, 0.1, blocks, LANCZOS_STEPS, LANCZOS_TOL, 0,
            block_iters=8, block_tol=1e-2, hess=hess, block_hess=block_hess, noise=noise,
            top=(float(ritz.values[0]), ritz.vectors[0]), eigen=lanczos_largest,
            rows_seen=sample.size, exact_rows=sample.exact, per_parameter_only_if_slow=True,
        )
    result = result.at_temperature(sampler.settings.get("temperature", 1.0))  # the user's units
    if result.unstable:
        raise StepsizeError(result.refusal(sampler.method), result)
    _warn(result, sampler.method, stacklevel=user_stacklevel(), slack=ESTIMATE_SLACK)
    return result


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
    minibatch_size: float | None = None,
    minibatch_replace: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
    temperature: float = 1.0,
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
    minibatch_size
        The samplers' ``minibatch_size`` (a proportion of N or a count): the gradient estimate's
        noise along the top direction is then included in ``sd_ratio`` and ``safe_stepsize``
        (the per-row gradients' variance on a row subsample, :class:`MinibatchNoise`; for a CV
        ``method``, of the rows' gradient differences from ``params``, taken as the mode). None
        (default): exact gradients, the discretisation alone.
    minibatch_replace
        As for the samplers (rows drawn with replacement: no finite-population factor).
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
    temperature
        As for the samplers: the check of a chain on the tempered posterior p(θ | x)^(1/T) with
        this stepsize (the same discretisation at every T; the minibatch noise, which is not
        tempered, weighs 1/T as much; :mod:`sgmcmc.tempering`). Stepsizes and curvatures are
        reported in the user's units (curvatures of log p).

    Returns
    -------
    StepsizeCheck
    """
    name = _dynamics(method)
    temperature = check_temperature(temperature)
    dtype = checks.as_dtype(dtype)
    point = checks.check_params(params, dtype)
    rows = Rows(checks.check_dataset(dataset), dtype.as_numpy_dtype)
    data = rows.as_read()
    steps = checks.per_parameter(stepsize, list(point), "stepsize")
    if temperature != 1.0:  # the chain on log p / T with stepsize εT (sgmcmc.tempering)
        log_lik, log_prior = tempered(log_lik, log_prior, temperature)
        steps = scaled(steps, temperature)
    same = dict(params=point, stepsize=steps, method=name, alpha=alpha, L=L, a=a, distortion=distortion,
                per_parameter=per_parameter, max_iters=max_iters, tol=tol, seed=seed, dtype=dtype.name,
                log_prior=log_prior is not None)
    collective = row_collective(strategy, shard_rows, "check_stepsize", same)
    if collective is not None and minibatch_size is not None:
        raise ValueError(
            "check_stepsize with rows sharded across workers does not include the minibatch noise yet: "
            "leave minibatch_size=None (the discretisation alone), or call it in one process"
        )
    reduce = None if collective is None else collective.all_reduce_sum
    n_rows = len(next(iter(data.values())))
    batch = 1 if minibatch_size is None else checks.batch_size(minibatch_size, n_rows)
    estimator = MinibatchGradient(log_lik, log_prior, data, batch, 1, bool(minibatch_replace), reduce=reduce, rows=rows)
    hyper = _hyper(name, list(point), alpha, L, a)
    noise = top = None
    if minibatch_size is not None:
        with package_call_options():
            sample = RowSample.draw(estimator.posterior, check_rows(batch), seed)
            displacements = None
            if _is_control_variate(method):
                hess = NegativeHessian(estimator.posterior, point)
                like = {k: np.zeros(np.shape(point[k])) for k in point}
                root = {k: np.sqrt(steps[k]) for k in like}
                ritz = lanczos(scaled_operator(hess, root), like, max(LANCZOS_STEPS, 20), tol, seed)
                top = (float(ritz.values[0]), ritz.vectors[0])
                displacements = difference_displacements(ritz, root, DIFFERENCE_DRAWS, 1.0, seed)
            noise = MinibatchNoise(estimator, point, sample, batch, displacements, seed)
    with package_call_options():
        result = _check(
            name, estimator.posterior, point, steps, not isinstance(stepsize, Mapping), hyper, distortion, per_parameter,
            max_iters, tol, seed, noise=noise, top=top,
        ).at_temperature(temperature)
    if warn:
        _warn(result, "check_stepsize", stacklevel=2)
    return result


def _check_point(sampler) -> dict[str, tf.Tensor]:
    """Where the stepsize check looks: the CV mode, else the first chain's current state."""
    if sampler.control_variate is not None:
        return {k: v.read_value() for k, v in sampler.estimator.mode.items()}
    return {k: v[0] for k, v in sampler.variables.read_params().items()}


def noise_kind(sampler) -> str:
    """How a sampler's gradient estimate gets its noise: ``"plain"`` (the rows' gradients),
    ``"difference"`` (the control variate: differences from the mode) or ``"anchor_draw"``
    (SVRG/SAGA: differences from an anchor that is itself a chain state)."""
    if sampler.control_variate is not None:
        return "difference"
    return "plain" if sampler.estimator is sampler.plain_estimator else "anchor_draw"
