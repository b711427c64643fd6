r"""``tune_stepsize``: successive halving over stepsizes (and minibatch sizes) by the KSD of short
runs (after Coullon, South & Nemeth 2023), under a budget of gradient evaluations.

**Budget.** Counted in per-row gradient evaluations of the sampler, iterations × minibatch rows
× gradient evaluations per iteration (``L`` for SGHMC, 2 for HAMCMC, 1 otherwise): the unit in which a larger
minibatch costs more, so stepsizes and minibatch sizes compete fairly. Not counted: the CV mode
search (run once, shared by all candidates) and the KSD's exact gradients (``ksd_samples`` × N
rows per evaluation; the table reports them).

**Successive halving.** C candidates, R = ⌈log₂ C⌉ rounds, B/R of the budget per round shared
equally by the survivors: round k runs each survivor for
:math:`r_k = \lfloor B / (R\,|S_k|\,\text{cost per iteration}) \rfloor` more iterations (so
iterations roughly double as the survivors halve), ranks them by KSD and keeps the best half
(rounded up). A candidate's chain continues across rounds (saved and restored exactly with
:meth:`Sampler.save`), so a survivor's later KSDs are on a longer-burnt-in chain. A diverged
candidate gets KSD = inf and is dropped. The choice is the best of the last round.

**KSD.** The IMQ KSD of :func:`sgmcmc.ksd` (c = 1, β = −½) on the segment a round ran (in the
first round its second half: the first is burn-in), thinned to at most ``ksd_samples`` points,
with the **exact** full-data gradients (as :func:`sgmcmc.full_gradients`, compiled once per
search; minibatch estimates would mostly measure their own noise), on standardised coordinates
:math:`z_i = \theta_i\sqrt{h_i}`, scores :math:`s_i/\sqrt{h_i}`, with
:math:`h = \mathrm{diag}(-\nabla^2\log p)` at the starting point (the mode for CV samplers),
from Hessian-vector products: the unit-scale IMQ kernel then sees every coordinate at its
posterior scale. (The sample sd would give each candidate its own scale: not comparable.)

**The cap: no candidate the stepsize check would flag.** Short runs' KSD rewards mixing over
bias (a chain that moves faster looks better after a few hundred iterations even when its
stationary sd is too wide), so left alone the search drifts to the top of its grid, beyond the
stepsize :func:`sgmcmc.check_stepsize` calls safe (issue 22: ελ_max = 2.78 for SGLD-CV, sd ×1.64
along the stiffest direction). Two fixes were possible: cap the grid at the check's safe
stepsize, or add the predicted discretisation bias to the KSD. The cap is used: the check's sd
distortion is a Gaussian prediction whose units (relative sd error) cannot be added to a KSD
without an arbitrary weight, the library has exactly one notion of "too large" (the check's 10 %)
that the sampler itself enforces, and a cap never spends budget on a candidate that could not be
returned. Within the cap the KSD still ranks by mixing. A candidate is excluded when its scaled
curvature :math:`\mu = \lambda_{\max}(E^{1/2}AE^{1/2})` (:mod:`.curvature`, E the sampler's
effective stepsize) exceeds :data:`CAP_MARGIN` × the safe μ of its dynamics (SGLD
:math:`4(1 - 1.1^{-2}) = 0.694`; SGHMC, SGNHT at their ``alpha``, ``L``, ``a``); the margin
covers the check's power iteration stopping early or being run at a slightly different mode.

* SGLD, SGHMC, SGNHT and their CV versions: E = εI, μ = ελ_max with A at the start (the mode
  for CV samplers, where their own check runs), λ_max by the check's power iteration (100
  products, tolerance 1e-4: the Rayleigh quotient rises to λ_max, so this is at least the CV
  samplers' own 30-product estimate). Excluded before any run.
* pSGLD: E = εG, :math:`G = \mathrm{diag}(1/(\lambda + \sqrt V))` the RMSprop preconditioner
  (pSGLD is SGLD with stepsize εG while G moves slowly). G is read from each candidate's chain
  after each of its runs, and a candidate over the cap is excluded then (KSD ignored). The
  default grid is centred on the prediction :math:`V \approx (N/n)\,\mathrm{diag}(A)`: at
  stationarity the exact gradient has covariance A and the minibatch adds (N/n − 1) times the
  per-row gradient covariance, which is A/N on a well-specified model (the information identity).
* HAMCMC: E = εH with H the L-BFGS inverse-Hessian estimate of the chain's pairs
  (μ = λ_max(εHA), power iteration on x ↦ εH(Ax)), read after each run as for pSGLD. HAMCMC's ε
  is on the standardised scale (HA ≈ I): its default grid is centred on the safe μ itself, and the
  post-run check catches the noise of the curvature estimates (λ_max(HA) > 1 when the pairs are
  noisy or the memory spans too few directions). That noise also makes one H a poor guide: on a
  d = 5 regression λ_max(HA) over 40 snapshots of one chain had median 1.3, 90 % quantile 2.5,
  maximum 7.1. So μ is the median over 5 matrices (``HAMCMC.preconditioner_snapshots``): the
  run's last, then after each of 4 further stretches of M iterations (new pairs each time)
  continued from the saved state (not counted in the budget; the candidate's chain itself
  continues from the saved state, so they do not change it). Its SGLD warm-up, unless
  ``warmup_stepsize`` is given, runs at the SGLD cap CAP_MARGIN · 0.694/λ_max (at ε on the
  standardised scale it would diverge).

**The minibatch noise is part of the cap** (issue 29.4): along the top direction the gradient
estimate's variance per unit stepsize (:class:`~sgmcmc.stability.check.MinibatchNoise` at the
start or mode, per minibatch size; for the CV samplers the rows' differences from the mode) enters
the distortion as q = ε·V_vv, so a candidate is over the cap when its stepsize exceeds
:data:`CAP_MARGIN` × the stepsize keeping ρ(μ, q) within 10 % (for plain SGLD at N/n = 100 that is
~100 times below the noise-free cap; before, the chosen stepsizes gave sd up to ×1.45). pSGLD: q at
its preconditioned stepsize after each run; HAMCMC: its noise is not modelled (q = 0).

**The softest direction** (issue 29.5): short runs' KSD ranks by what moves within them, so on an
ill-conditioned posterior it picks the stepsize that suits the stiffest direction and cannot see
the softest one not mixing (a 10-parameter regression with condition number ~4·10^3: chosen
ε·λ_max = 0.68, the chain 1.2 sds off along the softest direction after 30,000 iterations). After
choosing, the softest curvature is found (Lanczos) and a :class:`~sgmcmc.MixingWarning` says when
``n_iters`` iterations give fewer than :data:`MIN_SOFT_DRAWS` effective draws along it.

Excluded candidates stay in the table (``excluded`` True, ``reason`` saying μ, the cap and the
sd inflation ρ(μ) the check predicts). When every candidate is excluded, ValueError.

**Determinism.** Every candidate's chain uses the same seed (common random numbers: the
candidates see the same minibatches and noise, so KSD differences come from the stepsize, not
from luck); all randomness comes from ``seed``, so the same seed gives the same table.
``max_seconds`` may end the search early (then the choice depends on the machine's speed: the
table says which round was reached).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import tempfile
import time
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import tensorflow as tf

from ..analysis.stein_discrepancy import ksd
from ..data.stream import is_batch_stream
from ..api import samplers
from ..api.runs import sample_chain
from ..api.session import init_sess
from ..run.compiled import default_jit_compile
from ..run.mode_search import set_anchor
from ..step.methods import METHODS
from ..errors import DivergenceError, MixingWarning
from ..step.posterior import FULL_GRADIENT_BATCH_ROWS, Posterior, value_and_grad
from ..graph_options import own_function
from ..schedules import Schedule
from ..stability.curvature import (
    NegativeHessian, _top_scaled, largest_eigenvalue, largest_safe_mu, safe_factor, scaled_operator, sd_ratio,
    stability_model,
)
from ..stability.check import MinibatchNoise, RowSample, check_rows, difference_displacements, lanczos, noise_kind


def _setup_function(name: str):
    """The public ``{name}_setup`` (the tuner drives the public step-by-step API)."""
    return getattr(samplers, f"{name}_setup")


#: The samplers whose stepsize the check can judge (their dynamics' ``stepsize_stability``) and
#: may be a schedule (the candidates are a schedule reading a variable: ``stepsize_schedules``).
TUNABLE = tuple(
    name for name, method in METHODS.items()
    if method.dynamics.stepsize_stability is not None and method.dynamics.stepsize_schedules
)

#: A candidate is excluded when its scaled curvature μ exceeds this fraction of its dynamics'
#: safe μ (module docstring: the cap).
CAP_MARGIN = 0.95

#: The power iteration of the cap: check_stepsize's defaults (products, relative tolerance, seed).
CAP_POWER_ITERATION = (100, 1e-4, 0)

#: The post-run check of pSGLD and HAMCMC: the CV samplers' own check (30 products, 1e-3).
AFTER_RUN_POWER_ITERATION = (30, 1e-3, 0)
#: The candidates run in graph mode when all their iterations together are at most this many
#: (:meth:`_Search._choose_compilation`): in short runs XLA's compile (0.25–0.5 s a program for a
#: small model) costs more than its faster iterations save.
#: Measured: test_tuning + test_auto_tuning 108.8 → 88.8–92.1 CPU s in graph mode (the same
#: choices; ill_conditioned's quick tuner 7.4 → 4.1 s, the same survivors every round); the
#: covertype-shaped default (N = 581,012, n = 500, budget 100 N: 116,000 iterations) 33.4 →
#: 41.3 s of runs in graph mode (68 µs an iteration more), so it keeps XLA.
GRAPH_MODE_ITERATIONS = 20_000


class _Tunable(Schedule):
    """A "schedule" reading a variable: one compiled sampler serves every stepsize candidate."""

    def __init__(self, value: float):
        self.variable = tf.Variable(float(value), dtype=tf.float64, trainable=False)

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        return self.variable.read_value()


def _method_name(method: str | Callable) -> str:
    name = method if isinstance(method, str) else getattr(method, "__name__", repr(method))
    name = name.removesuffix("_setup")
    if name not in TUNABLE:
        raise ValueError(f"tune_stepsize runs one of {TUNABLE} (a name or the sampler function), got {method!r}")
    return name


def _diagonal_curvature(hess: NegativeHessian, point: Mapping[str, Any], max_exact: int) -> dict[str, np.ndarray]:
    r""":math:`\mathrm{diag}(-\nabla^2\log p)` at ``point`` (``hess``, the operator there): one
    Hessian-vector product per coordinate up to ``max_exact`` coordinates, else Hutchinson's
    estimate :math:`E[v\odot Av]` with 64 Rademacher probes (seed 0). Floored at 1e-12 of its
    largest entry (a flat direction keeps a finite scale)."""
    zeros = {k: np.zeros(np.shape(v)) for k, v in point.items()}
    diag = {k: np.zeros(np.shape(v)) for k, v in point.items()}
    dim = sum(z.size for z in zeros.values())
    if dim <= max_exact:
        for name, z in zeros.items():
            for i in range(z.size):
                e = {k: v.copy() for k, v in zeros.items()}
                e[name].reshape(-1)[i] = 1.0
                diag[name].reshape(-1)[i] = hess(e)[name].reshape(-1)[i]
    else:
        rng = np.random.default_rng(0)
        for _ in range(64):
            v = {k: rng.choice([-1.0, 1.0], size=np.shape(z)) for k, z in zeros.items()}
            for k, av in hess(v).items():
                diag[k] += v[k] * av / 64
    top = max(float(np.max(d)) if d.size else 0.0 for d in diag.values())
    floor = 1e-12 * top if top > 0 else 1.0
    return {k: np.maximum(d, floor) for k, d in diag.items()}


class _ExactScores:
    r"""The exact :math:`\nabla\log p(\theta|x)` at a block of points, on the sampler's
    (unconstrained) scale: the likelihood summed over row batches, vectorised over the points.
    Compiled once per tuning run (``full_gradients`` would trace anew at every call)."""

    def __init__(self, posterior: Posterior):
        self.posterior = posterior
        self._lik = own_function(lambda pts, batch: tf.vectorized_map(
            lambda u: value_and_grad(lambda p: posterior.log_lik(p, batch), u)[1], pts, fallback_to_while_loop=True
        ), reduce_retracing=True)
        self._prior = None if posterior.log_prior is None else own_function(lambda pts: tf.vectorized_map(
            lambda u: value_and_grad(posterior.log_prior, u)[1], pts, fallback_to_while_loop=True
        ), reduce_retracing=True)

    def __call__(self, points: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        pts = {k: tf.constant(v) for k, v in points.items()}
        total = {k: np.zeros(v.shape) for k, v in points.items()}
        for start in range(0, self.posterior.n_rows, FULL_GRADIENT_BATCH_ROWS):
            batch = {k: x[start : start + FULL_GRADIENT_BATCH_ROWS] for k, x in self.posterior.dataset.items()}
            for k, g in self._lik(pts, batch).items():
                total[k] += g.numpy()
        if self._prior is not None:
            for k, g in self._prior(pts).items():
                total[k] += g.numpy()
        return total


def _standardised_ksd(samples, scores: _ExactScores, scale: Mapping[str, np.ndarray]) -> float:
    points = samples.pooled("unconstrained")
    grads = scores(points)
    root = {k: np.sqrt(scale[k]) for k in points}
    # Already on the curvature's scale: standardise=False (ksd's default, the sample sd, would give
    # each candidate its own scale and rank a chain that has barely left the mode best).
    value = ksd({k: points[k] * root[k] for k in points}, gradients={k: grads[k] / root[k] for k in points}, standardise=False)
    return value if np.isfinite(value) else math.inf


class _Cap:
    r"""Which stepsizes the stepsize check would flag, for one sampler (module docstring: the cap).

    Parameters
    ----------
    name
        The sampler (one of :data:`TUNABLE`).
    hess
        :math:`v \mapsto Av` at the start (the mode for CV samplers).
    like
        Zeros of the parameters' shapes (the operator's argument).
    sampler_kwargs
        The sampler's keyword arguments (SGHMC's ``alpha``, ``L``; SGNHT's ``a``).
    defaults
        The ``*_setup`` signature's defaults (for the hyperparameters not given).
    """

    def __init__(
        self, name: str, hess: NegativeHessian, like: dict[str, np.ndarray], sampler_kwargs: Mapping[str, Any],
        defaults: Mapping[str, Any], noise: Mapping[int, Callable] | None = None,
    ):
        dynamics = METHODS[name].dynamics
        self.kernel_class = dynamics
        #: The dynamics whose distortion formula judges: pSGLD and HAMCMC are SGLD with a
        #: preconditioned stepsize.
        self.dynamics = dynamics.stepsize_stability
        self.preconditioned = dynamics.preconditioned
        self.name, self.hess, self.like = name, hess, like
        #: The sampler's hyperparameters: those given, else the ``*_setup`` defaults.
        self.values = {h: sampler_kwargs.get(h, defaults.get(h)) for h in dynamics.hyperparameters if h != "stepsize"}
        self.hyper = stability_model(self.dynamics).distortion_hyperparameters(list(like), self.values)
        safe = min(largest_safe_mu(self.dynamics, 0.1, **h) for h in self.hyper.values())
        #: The largest scaled curvature a candidate may have.
        self.mu = CAP_MARGIN * safe
        max_iters, tol, seed = CAP_POWER_ITERATION
        #: λ_max of A (Rayleigh quotient of the check's power iteration) and its direction.
        curvature, self.top = largest_eigenvalue(hess, like, max_iters, tol, seed)[:2]
        self.curvature = float(curvature)
        #: Minibatch size -> the gradient noise's variance along the top direction per unit
        #: stepsize (q/ε, issue 29.4), and ``noise`` itself (θ-direction -> variance) for
        #: preconditioned stepsizes; empty when no noise model was given.
        self.noise = dict(noise or {})
        self.noise_per_step = {batch_size: float(f(self.top)) for batch_size, f in self.noise.items()}
        #: The largest stepsize of unpreconditioned dynamics without the noise (ε λ_max = mu);
        #: for pSGLD and HAMCMC the SGLD one (HAMCMC's warm-up).
        self.stepsize = self.mu / self.curvature if self.curvature > 0 else math.inf
        hyper = next(iter(self.hyper.values()))
        #: Minibatch size -> the largest stepsize of unpreconditioned dynamics with the noise.
        self.stepsize_for = {
            batch_size: CAP_MARGIN * safe_factor(self.dynamics, self.curvature, q, 0.1, **hyper)
            for batch_size, q in self.noise_per_step.items()
        }

    def default_grid(self, n: int, diag: Mapping[str, np.ndarray], n_rows: int, batch_rows: int) -> list[float]:
        """``n`` log-spaced candidates up to the cap (plain dynamics; HAMCMC: its cap on the
        standardised scale, where H A ≈ I) or around it (pSGLD: the cap at the predicted
        preconditioner, ``diag`` = diag(A), rows N and n, the sampler's hyperparameters, the
        minibatch noise included); for pSGLD and HAMCMC the post-run check decides."""
        if self.kernel_class.standardised_stepsize:  # HAMCMC: εHA ≈ εI
            return list(np.geomspace(self.mu / 32, self.mu, n))
        g = self.kernel_class.predicted_preconditioner(diag, n_rows, batch_rows, self.values)
        if g is not None:  # pSGLD: V ≈ (N/n) diag(A) at stationarity (module docstring)
            mu, q = self.scaled_top(g, batch_rows)  # at ε = 1; both scale with ε
            predicted = CAP_MARGIN * safe_factor(self.dynamics, mu, q, 0.1, **next(iter(self.hyper.values())))
            return list(np.geomspace(predicted / 16, 2 * predicted, n))
        top = max(self.stepsize_for.values()) if self.stepsize_for else self.stepsize
        return list(np.geomspace(top / 32, top, n))

    def over(self, mu: float, q: float) -> bool:
        """Whether a candidate with scaled curvature μ and noise q along the top direction is over
        the cap: its stepsize above :data:`CAP_MARGIN` × the stepsize keeping the sd within 10 %."""
        factor = safe_factor(self.dynamics, mu, q, 0.1, **next(iter(self.hyper.values())))
        return not factor * CAP_MARGIN >= 1.0 - 1e-12

    def noise_before_run(self, eps: float, batch_size: int) -> float:
        """q = ε · the noise per unit stepsize along the top direction (0 without a noise model)."""
        return eps * self.noise_per_step.get(batch_size, 0.0)

    def scaled_curvature(self, steps: Mapping[str, Any]) -> float:
        r""":math:`\lambda_{\max}(E^{1/2}AE^{1/2})` for a diagonal E (``steps``: name -> number or
        array of the parameter's shape)."""
        return float(_top_scaled(self.hess, self.like, steps, *AFTER_RUN_POWER_ITERATION)[0])

    def scaled_top(self, steps: Mapping[str, Any], batch_size: int) -> tuple[float, float]:
        """(μ, q) for a diagonal E: the top scaled curvature and the noise along its direction."""
        root = {k: np.sqrt(steps[k]) for k in self.like}
        return self._top(scaled_operator(self.hess, root), root, batch_size)

    def _top(self, operator: Callable, root: Mapping[str, Any] | None, batch_size: int) -> tuple[float, float]:
        """(μ, q): the largest eigenvalue of ``operator`` and, where it is :math:`E^{1/2}AE^{1/2}`
        (``root`` = :math:`E^{1/2}`), the minibatch noise along its top direction (else 0)."""
        mu, v, _ = largest_eigenvalue(operator, self.like, *AFTER_RUN_POWER_ITERATION)
        noise = None if root is None else self.noise.get(batch_size)
        q = 0.0 if noise is None else float(noise({k: root[k] * v[k] for k in v}))
        return float(mu), q

    def before_run(self, eps: float) -> float | None:
        """μ = ε λ_max for unpreconditioned dynamics; None for pSGLD and HAMCMC (known after a run)."""
        return None if self.preconditioned else eps * self.curvature

    def after_run(self, eps: float, sampler, batch_size: int) -> tuple[float, float] | None:
        """(μ, q) of a preconditioned stepsize at the preconditioner the run reached: the largest
        over the dynamics' :meth:`~sgmcmc.step.dynamics.base.Dynamics.scaled_curvature_operators`
        (one per chain, or one bounding all), each the median over its ``preconditioner_snapshots``
        (read ``preconditioner_renewal`` iterations apart: the sampler runs on, so call it after
        the state is saved). None for unpreconditioned dynamics."""
        kernel = sampler.kernel
        if not kernel.preconditioned:
            return None
        snapshots = []
        for k in range(kernel.preconditioner_snapshots):
            if k:  # every input of the preconditioner renewed; one draw kept (the last)
                renewal = kernel.preconditioner_renewal(sampler.kernel_state())
                sample_chain(sampler, renewal, False, burn_in=sampler.iteration + renewal - 1)
            operators = kernel.scaled_curvature_operators(self.hess, self.like, sampler.kernel_state(), eps)
            if not operators:
                return None
            snapshots.append([self._top(op, root, batch_size) for op, root in operators])
        mu, q = np.max(np.median(snapshots, axis=0), axis=0)  # each operator's median; the largest
        return float(mu), float(q)

    def reason(self, mu: float, q: float = 0.0) -> str:
        """Why a candidate with scaled curvature ``mu`` and noise ``q`` was excluded."""
        what = self.kernel_class.curvature_scale
        ratio = sd_ratio(self.dynamics, mu, noise=q, **next(iter(self.hyper.values())))
        noise = f" with the minibatch noise (q = {q:.3g})" if q > 0 else ""
        stretch = "unstable" if not np.isfinite(ratio) else f"sd ×{ratio:.3g} along the stiffest direction{noise}"
        judge = "the SGLD check at this preconditioned stepsize would warn" if self.preconditioned else "check_stepsize would warn"
        return f"{what} × curvature = {mu:.3g}: {stretch}, over {CAP_MARGIN:g} × the 10 % stepsize: {judge}"


def _record(i: int, eps: float, batch_size: int, rnd: int, **fields: Any) -> dict[str, Any]:
    """One row of the table (defaults: a candidate that did not run)."""
    row = dict(candidate=i, stepsize=eps, minibatch_size=batch_size, round=rnd, iterations=0, total_iterations=0,
               gradient_evaluations=0, ksd=math.nan, diverged=False, seconds=0.0, kept=False,
               scaled_curvature=math.nan, noise=math.nan, excluded=False, reason="")
    row.update(fields)
    return row


def tune_stepsize(
    method: str | Callable,
    log_lik: Callable,
    dataset: Any,
    params: Mapping[str, Any],
    log_prior: Callable | None = None,
    *,
    stepsizes: Sequence[float] | None = None,
    n_candidates: int = 8,
    minibatch_sizes: Sequence[float] | None = None,
    minibatch_size: float = 0.01,
    budget: int | None = None,
    max_seconds: float | None = None,
    ksd_samples: int = 100,
    min_iters: int = 20,
    seed: int = 0,
    verbose: bool = True,
    max_exact_dim: int = 256,
    n_iters: int = 10_000,
    **sampler_kwargs: Any,
) -> tuple[float, pd.DataFrame]:
    r"""Pick the stepsize whose short run has the smallest KSD, by successive halving under a
    budget of gradient evaluations (module docstring: budget, rounds, KSD, determinism).

    Parameters
    ----------
    method
        A sampler name (``"sgld"``, ``"sgldcv"``, ``"sghmc"``, …) or the function
        (``sgmcmc.sgld``).
    log_lik, dataset, params, log_prior
        As for the sampler.
    stepsizes
        The candidates; those the stepsize check would flag are excluded (module docstring: the
        cap). Default: ``n_candidates`` log-spaced stepsizes from ε_c/32 to the cap ε_c =
        0.95 · safe μ / λ_max at the start (the mode for CV samplers; SGLD's safe μ is 0.694,
        :func:`sgmcmc.check_stepsize`); HAMCMC: from 0.95 · 0.694 / 32 to 0.95 · 0.694 (its
        standardised scale); pSGLD: from ε_p/16 to 2 ε_p, ε_p the cap at the predicted
        stationary preconditioner.
    minibatch_sizes
        Also tune the minibatch size over these (each a proportion or a count): the candidates
        are every (stepsize, minibatch size) pair. Default: ``minibatch_size`` only.
    budget
        Per-row gradient evaluations of all the candidates' runs together (default 100 N: a
        hundred passes over the data). Raises ValueError when the first round would get fewer
        than ``min_iters`` iterations per candidate. A budget of at most
        :data:`GRAPH_MODE_ITERATIONS` iterations in all runs the candidates in graph mode (XLA's
        compile would cost more than it saves; ``SGMCMC_XLA`` decides when set).
    max_seconds
        Optional wall-clock cap: no new run starts after it; the choice is then the best of the
        last round reached (candidates with fewer iterations are not compared with it).
    ksd_samples
        Points per KSD (thinned from the round's segment).
    seed
        Seeds every candidate's chain (all the same seed) and everything else.
    verbose
        One line per round.
    max_exact_dim
        Standardising curvatures exactly (one Hessian-vector product per coordinate) up to this
        dimension, by Hutchinson's estimate above it.
    n_iters
        The length of the run the stepsize is for: a :class:`~sgmcmc.MixingWarning` when, at the
        chosen stepsize, it gives fewer than :data:`MIN_SOFT_DRAWS` effective draws along the
        posterior's softest direction (short runs' KSD cannot see a direction that has not mixed;
        issue 29.5). ``table.attrs["mixing"]`` holds the figures.
    **sampler_kwargs
        Passed to the sampler's ``*_setup``: ``alpha``, ``L``, ``opt_stepsize``, ``n_iters_opt``,
        ``dtype``, ``constraints``, … (HAMCMC without ``warmup_stepsize``: its warm-up runs at
        the SGLD cap, module docstring).

    Returns
    -------
    (stepsize, table)
        The chosen stepsize (a float) and a DataFrame with one row per candidate and round:
        ``candidate``, ``stepsize``, ``minibatch_size`` (rows), ``round``, ``iterations`` (this
        round), ``total_iterations``, ``gradient_evaluations`` (this round, the budget's unit),
        ``ksd``, ``diverged``, ``seconds`` (run + KSD), ``kept`` (survived the round),
        ``scaled_curvature`` (μ, module docstring; NaN where not computed), ``excluded`` (over the
        cap: not run, or for pSGLD/HAMCMC its KSD ignored and the candidate dropped), ``reason``
        (why excluded, else "") and ``chosen``. A candidate excluded before running has one row
        (round 0, 0 iterations, KSD NaN). ``table.attrs["choice"]`` holds the chosen stepsize and
        minibatch size, ``table.attrs["budget"]`` the budget, ``table.attrs["cap"]`` the largest
        scaled curvature allowed (``scaled_curvature``), λ_max (``curvature``) and, for
        unpreconditioned dynamics, the largest stepsize allowed (``stepsize``).

    Raises
    ------
    ValueError
        Every candidate is over the cap (before running, or for pSGLD/HAMCMC after), the
        stepsizes are not positive numbers, or the budget is too small.
    """
    name = _method_name(method)
    if is_batch_stream(dataset):
        raise ValueError(
            "tune_stepsize does not take a tf.data.Dataset: its KSD needs exact scores over all rows. Tune on the "
            "rows as a dict of name -> array (the data the pipeline batches, without augmentation), then sample "
            "the pipeline with the stepsize chosen"
        )
    sizes = list(minibatch_sizes) if minibatch_sizes is not None else [minibatch_size]
    search = _Search(name, log_lik, dataset, params, log_prior, sizes, seed, verbose, max_exact_dim, sampler_kwargs,
                     budget)
    survivors = search.screen(stepsizes, n_candidates)
    budget = search.budget
    n_rounds = max(1, math.ceil(math.log2(len(survivors))))
    search.save_starting_states()
    for rnd in range(n_rounds):
        survivors = search.run_round(rnd, n_rounds, survivors, budget, min_iters, ksd_samples, max_seconds)
        if survivors is None or search.stopped or len(survivors) == 1:
            break
    return search.finish(budget, n_iters)


class _Search:
    """:func:`tune_stepsize`'s steps, in order: set up one sampler per minibatch size and the
    stepsize cap at the mode (``__init__``), :meth:`screen` the candidates against the cap,
    :meth:`save_starting_states`, :meth:`run_round` per round of successive halving, and
    :meth:`finish` (the table, the choice, the mixing warning)."""

    def __init__(self, name: str, log_lik: Callable, dataset: Any, params: Mapping[str, Any], log_prior: Callable | None,
                 sizes: Sequence[float], seed: int, verbose: bool, max_exact_dim: int, sampler_kwargs: dict,
                 budget: int | None = None):
        setup = _setup_function(name)
        signature = inspect.signature(setup).parameters
        accepted = set(signature)
        unknown = sorted(set(sampler_kwargs) - accepted)
        if unknown:
            raise TypeError(f"{name}_setup does not take {unknown}")
        if METHODS[name].control_variate and "verbose" in accepted:
            sampler_kwargs.setdefault("verbose", verbose)
        self.name, self.verbose, self.sampler_kwargs, self.signature = name, verbose, sampler_kwargs, signature
        self.t_start = time.perf_counter()
        self.tunable = _Tunable(1.0)
        self.sizes = list(sizes)
        self.built = {}
        for mb in self.sizes:  # one compiled sampler per minibatch size; the stepsize lives in a variable
            self.built[mb] = setup(log_lik, dataset, params, self.tunable, log_prior=log_prior, minibatch_size=mb,
                                   seed=seed, check_stepsize=False, **sampler_kwargs)  # the cap judges every candidate
        first = self.first = self.built[self.sizes[0]]
        self.budget = int(100 * first.n_rows) if budget is None else int(budget)
        self._choose_compilation(first.kernel.gradient_evaluations)
        init_sess(first, sampler_kwargs.get("verbose", False))  # CV: the mode search, once
        at = first.estimator.mode if first.control_variate is not None else first.params
        self.point = point = {k: v.read_value() for k, v in at.items()}
        #: The model (its full-data passes and curvature), shared with the sampler's estimators.
        self.posterior = first.plain_estimator.posterior
        self.hess = NegativeHessian(self.posterior, point)
        self.like = {k: np.zeros(np.shape(v)) for k, v in point.items()}
        self.batch_sizes = {mb: self.built[mb].batch_size for mb in self.sizes}
        self.cap = _Cap(name, self.hess, self.like, sampler_kwargs, {k: v.default for k, v in signature.items()},
                        _noise_models(first, self.hess, point, self.like, sorted(set(self.batch_sizes.values())), seed))
        self.scale = _diagonal_curvature(self.hess, point, max_exact_dim)
        self.exact_scores = _ExactScores(self.posterior)
        self.n_rows = first.n_rows
        warm = METHODS[name].dynamics.plain_cap_hyperparameter
        if warm is not None and sampler_kwargs.get(warm) is None:
            for sampler in self.built.values():  # before anything is compiled: HAMCMC's warm-up SGLD steps at the SGLD cap
                sampler.kernel = dataclasses.replace(sampler.kernel, **{warm: {k: self.cap.stepsize for k in point}})
        self.per_iter = first.kernel.gradient_evaluations
        self.records: list[dict] = []
        self.excluded: set[int] = set()
        self.saved: dict[int, str] = {}
        self.spent = 0
        self.stopped = False
        self.choice: int | None = None

    def _choose_compilation(self, per_iter: int) -> None:
        """Graph mode for every sampler (set before anything of theirs is compiled) when all the
        candidates' iterations together, at most budget / (n · gradient evaluations per
        iteration), are at most :data:`GRAPH_MODE_ITERATIONS`; else the sampler's own mode.
        ``SGMCMC_XLA`` still decides when set. The choice changes the candidates' KSDs in their
        last bits, not the chain the user then runs."""
        iterations = self.budget // max(1, min(s.batch_size for s in self.built.values()) * per_iter)
        for sampler in self.built.values():
            sampler.jit_compile = default_jit_compile(sampler.jit_compile and iterations > GRAPH_MODE_ITERATIONS)

    def screen(self, stepsizes: Sequence[float] | None, n_candidates: int) -> list[int]:
        """The candidates (stepsize × minibatch size; a default grid from the cap when
        ``stepsizes`` is None) and those the cap lets run (unpreconditioned dynamics: before any
        run); refuses when none is left."""
        cap, batch_sizes, sizes = self.cap, self.batch_sizes, self.sizes
        if stepsizes is None:
            stepsizes = cap.default_grid(n_candidates, self.scale, self.n_rows, max(batch_sizes.values()))
        stepsizes = [float(e) for e in stepsizes]
        if not stepsizes or any(not (e > 0 and np.isfinite(e)) for e in stepsizes):
            raise ValueError(f"stepsizes must be positive numbers, got {stepsizes}")
        self.candidates = candidates = [(e, mb) for mb in sizes for e in stepsizes]
        self.total_iters = {i: 0 for i in range(len(candidates))}
        for i, (eps, mb) in enumerate(candidates):  # unpreconditioned dynamics: the cap before any run
            mu, q = cap.before_run(eps), cap.noise_before_run(eps, batch_sizes[mb])
            if mu is not None and cap.over(mu, q):
                self.excluded.add(i)
                self.records.append(_record(i, eps, batch_sizes[mb], 0, scaled_curvature=mu, noise=q, excluded=True,
                                            reason=cap.reason(mu, q)))
        limits = ", ".join(
            f"{cap.stepsize_for.get(batch_sizes[mb], cap.stepsize):.3g} (minibatch {batch_sizes[mb]})" for mb in sizes
        )
        survivors = [i for i in range(len(candidates)) if i not in self.excluded]
        if not survivors:
            raise ValueError(
                f"every candidate stepsize is above the stepsize check's cap: {self.name} at this curvature "
                f"(λ_max = {cap.curvature:.3g}) with its minibatch noise takes stepsizes up to {limits}; give smaller "
                f"stepsizes, or stepsizes=None"
            )
        if self.verbose and self.excluded:
            print(f"tune_stepsize: {len(self.excluded)} of {len(candidates)} candidates excluded, above the cap "
                  f"{limits} (sd within 10 % with the minibatch noise, sgmcmc.check_stepsize)", flush=True)
        return survivors

    def save_starting_states(self) -> None:
        """The state every candidate begins from, one per minibatch size (the CV samplers share
        the first one's mode search: same mode, same anchor)."""
        self.workdir = tempfile.TemporaryDirectory(prefix="sgmcmc_tune_")
        first = self.first
        self.base = {}
        for mb, sampler in self.built.items():
            if sampler is not first:
                if first.control_variate is not None:
                    sampler.estimator.take_mode(first.estimator)
                    set_anchor(sampler, {k: v.read_value() for k, v in first.estimator.anchor_grad.items()})
                    sampler.init_aux()
                    sampler.initialised = True
                else:
                    init_sess(sampler, False)
            self.base[mb] = sampler.save(f"{self.workdir.name}/base_{id(sampler)}")

    def run_round(self, rnd: int, n_rounds: int, survivors: list[int], budget: int, min_iters: int,
                  ksd_samples: int, max_seconds: float | None) -> list[int] | None:
        """One round of successive halving: every survivor runs its share of the budget on (from
        where it stopped), scored by the KSD of its second half (first round) or its whole run;
        returns the better half (None when every candidate was dropped)."""
        candidates, batch_sizes, per_iter = self.candidates, self.batch_sizes, self.per_iter
        share = budget // n_rounds
        iters = {i: share // (len(survivors) * batch_sizes[candidates[i][1]] * per_iter) for i in survivors}
        if rnd == 0 and min(iters.values()) < min_iters:
            need = min_iters * n_rounds * sum(batch_sizes[candidates[i][1]] * per_iter for i in survivors)
            raise ValueError(
                f"budget={budget} gives the first round fewer than min_iters={min_iters} iterations per "
                f"candidate ({len(survivors)} candidates, {n_rounds} rounds): give budget >= {need}, or fewer candidates"
            )
        scores = {}
        for i in survivors:
            if max_seconds is not None and time.perf_counter() - self.t_start > max_seconds:
                self.stopped = True
                break
            scores[i] = self._run_candidate(i, rnd, iters[i], ksd_samples)
        ranked = sorted((i for i in scores if i not in self.excluded), key=lambda i: (scores[i], i))
        if not ranked:
            return None
        self.choice = choice = ranked[0]
        survivors = ranked[: max(1, math.ceil(len(ranked) / 2))] if rnd < n_rounds - 1 and not self.stopped else ranked[:1]
        for r in self.records:
            if r["round"] == rnd and r["candidate"] in survivors and not r["excluded"]:
                r["kept"] = True
        if self.verbose:
            print(
                f"tune_stepsize round {rnd + 1}/{n_rounds}: {len(scores)} candidates x {iters[choice]} iterations"
                f"{f' ({len(scores) - len(ranked)} over the cap)' if len(ranked) < len(scores) else ''}; "
                f"best stepsize {candidates[choice][0]:.3g} (minibatch {batch_sizes[candidates[choice][1]]}) "
                f"KSD {scores[choice]:.4g}; "
                f"keeping {len(survivors)}; {time.perf_counter() - self.t_start:.1f} s",
                flush=True,
            )
        return survivors

    def _run_candidate(self, i: int, rnd: int, n: int, ksd_samples: int) -> float:
        """Candidate ``i`` runs ``n`` more iterations from its saved state (or the starting one);
        returns its KSD (inf if it diverged) and records the run."""
        eps, mb = self.candidates[i]
        batch_sizes, cap = self.batch_sizes, self.cap
        sampler = self.built[mb]
        t0 = time.perf_counter()
        if i in self.saved:
            sampler.restore(self.saved[i])
        else:
            sampler.restore(self.base[mb])
            self.tunable.variable.assign(eps)
            sampler.init_aux()  # momenta at this stepsize's scale
        self.tunable.variable.assign(eps)
        it0 = sampler.iteration
        skip = n // 2 if rnd == 0 else 0
        thin = max(1, math.ceil((n - skip) / ksd_samples))
        diverged, mu, q, reason = False, cap.before_run(eps), cap.noise_before_run(eps, batch_sizes[mb]), ""
        try:
            out = sample_chain(sampler, n, False, burn_in=it0 + skip, thin=thin)
            value = _standardised_ksd(out, self.exact_scores, self.scale)
            self.saved[i] = sampler.save(f"{self.workdir.name}/cand_{i}")
            after = cap.after_run(eps, sampler, batch_sizes[mb])
            if after is not None:
                mu, q = after
                if cap.over(mu, q):  # pSGLD, HAMCMC: over the cap at the preconditioner it reached
                    self.excluded.add(i)
                    reason = cap.reason(mu, q)
        except DivergenceError:
            value, diverged = math.inf, True
        self.spent += n * batch_sizes[mb] * self.per_iter
        self.total_iters[i] += n
        self.records.append(_record(
            i, eps, batch_sizes[mb], rnd, iterations=n, total_iterations=self.total_iters[i],
            gradient_evaluations=n * batch_sizes[mb] * self.per_iter, ksd=value, diverged=diverged,
            seconds=time.perf_counter() - t0, scaled_curvature=math.nan if mu is None else mu, noise=q,
            excluded=i in self.excluded, reason=reason,
        ))
        return value

    def _chosen_steps(self) -> dict[str, np.ndarray] | None:
        """E, the chosen candidate's per-coordinate stepsize (pSGLD: εG at the chosen chain's
        preconditioner); None where not modelled (HAMCMC's L-BFGS scaling)."""
        if self.choice is None:
            return None
        eps, mb = self.candidates[self.choice]
        if not self.cap.preconditioned:
            return {k: np.full(np.shape(v), eps) for k, v in self.like.items()}
        if not self.cap.kernel_class.diagonal_preconditioner:
            return None
        chosen = self.built[mb]
        chosen.restore(self.saved[self.choice])
        return {k: eps * g for k, g in chosen.kernel.preconditioner_reached(chosen.kernel_state()).items()}

    def finish(self, budget: int, n_iters: int) -> tuple[float, pd.DataFrame]:
        """The chosen stepsize and the table of every run (module docstring), with the mixing
        warning for ``n_iters`` iterations at the choice."""
        steps = self._chosen_steps()
        self.workdir.cleanup()
        table = pd.DataFrame.from_records(self.records)
        choice, cap, batch_sizes = self.choice, self.cap, self.batch_sizes
        if choice is None:
            raise ValueError(
                f"every candidate of {self.name} was over the stepsize check's cap (sd within 10 % with the minibatch noise) "
                f"at the preconditioner its chain reached, or diverged:\n{table.to_string()}\ngive smaller stepsizes"
            )
        last = table.index[table["candidate"] == choice][-1]
        table["chosen"] = table.index == last
        eps, mb = self.candidates[choice]
        table.attrs["choice"] = {"stepsize": eps, "minibatch_size": batch_sizes[mb]}
        table.attrs["budget"] = budget
        table.attrs["gradient_evaluations"] = self.spent
        cap_stepsize = None if cap.preconditioned else cap.stepsize_for.get(batch_sizes[mb], cap.stepsize)
        table.attrs["cap"] = {"scaled_curvature": cap.mu, "curvature": cap.curvature, "stepsize": cap_stepsize}
        if steps is not None:  # HAMCMC's L-BFGS scaling is not modelled here
            table.attrs["mixing"] = _warn_if_slow(self.name, cap.preconditioned, self.hess, self.like, eps, steps, n_iters,
                                                  self.first.kernel.moves_per_iteration)
        return eps, table


def _noise_models(
    sampler, hess: NegativeHessian, point, like, batch_sizes: list[int], seed: int
) -> dict[int, Callable]:
    """Minibatch size -> the gradient noise's variance along a θ-direction (:class:`MinibatchNoise`,
    the sampler's estimator: plain rows, or differences from the mode / an anchor)."""
    plain = sampler.plain_estimator
    displacements = None
    if noise_kind(sampler) != "plain":
        ritz = lanczos(hess, like, 20, 1e-3, seed)
        spread = 1.0 if noise_kind(sampler) == "difference" else math.sqrt(2.0)
        displacements = difference_displacements(ritz, {k: 1.0 for k in like}, 4, spread, seed)
    models = {}
    for batch_size in batch_sizes:
        sample = RowSample.draw(plain.posterior, check_rows(batch_size), seed)
        models[batch_size] = MinibatchNoise(plain, point, sample, batch_size, displacements, seed)
    return models


#: tune_stepsize warns when the chosen stepsize leaves fewer than this many effective draws along
#: the posterior's softest direction in ``n_iters`` iterations.
MIN_SOFT_DRAWS = 100


def _warn_if_slow(name: str, preconditioned: bool, hess: NegativeHessian, like, eps: float, steps: Mapping[str, np.ndarray],
                  n_iters: int, moves: int) -> dict:
    r"""The softest direction's mixing at the chosen stepsize (issue 29.5): the smallest eigenvalue
    μ_min of :math:`E^{1/2}AE^{1/2}` (E = εI, pSGLD: εG at the chosen chain's preconditioner) by
    Lanczos (exact up to d = 40; above, the smallest Ritz value, an upper bound: the mixing
    estimate is then optimistic). Along it SGLD is u' = (1 − μ/2)u + ξ, with integrated
    autocorrelation time τ = (1 + r)/(1 − r) ≈ 4/μ_min; SGHMC's L leapfrog steps per iteration move
    about L times as far (τ/L, rough), SGNHT is taken as SGLD. A :class:`~sgmcmc.MixingWarning`
    when ``n_iters`` / τ < :data:`MIN_SOFT_DRAWS`, naming the numbers and the preconditioned samplers."""
    size = sum(int(np.prod(np.shape(v))) for v in like.values())
    root = {k: np.sqrt(np.asarray(steps[k], np.float64)) for k in like}
    ritz = lanczos(scaled_operator(hess, root), like, min(size, 40), 0.0, 0)  # tol 0: run on for the smallest, not only the top
    mu, top = float(ritz.values[-1]), float(ritz.values[0])
    soft = mu / eps if not preconditioned else float(lanczos(hess, like, min(size, 40), 0.0, 0).values[-1])
    tau = (4.0 / mu if mu > 0 else math.inf) / moves
    draws = n_iters / tau
    info = {"softest_curvature": soft, "scaled_condition_number": top / mu if mu > 0 else math.inf,
            "softest_scaled_curvature": mu, "autocorrelation_time": tau, "effective_draws": draws, "n_iters": n_iters}
    if draws < MIN_SOFT_DRAWS:
        warnings.warn(
            f"tune_stepsize: the chosen {name} stepsize {eps:.3g} suits the stiffest direction (stepsize × curvature "
            f"{top:.3g}) but the posterior's softest direction (curvature {soft:.3g}; stepsize × curvature {mu:.3g}, "
            f"{info['scaled_condition_number']:.3g} times smaller) then has an autocorrelation time of about "
            f"{tau:,.0f} iterations: {n_iters:,} iterations give about "
            f"{draws:.3g} effective draws along it (and a start away from the mode there decays by e^-{n_iters / tau * 2:.2g}). "
            f"Run about {MIN_SOFT_DRAWS * tau:,.0f} iterations, give one stepsize per parameter where the parameters "
            f"differ in scale (check_stepsize(...).safe_stepsize_per_parameter), reparametrise (e.g. centre the "
            f"predictors), or use a preconditioned sampler: osgld (Hessian-scaled, near-Gaussian posteriors) or psgld.",
            MixingWarning,
            stacklevel=3,
        )
    return info
