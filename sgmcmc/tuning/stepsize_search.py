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

**Determinism.** Every candidate's chain uses the same seed (common random numbers: the
candidates see the same minibatches and noise, so KSD differences come from the stepsize, not
from luck); all randomness comes from ``seed``, so the same seed gives the same table.
``max_seconds`` may end the search early (then the choice depends on the machine's speed: the
table says which round was reached).
"""

from __future__ import annotations

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
from ..errors import DivergenceError, StepsizeWarning
from ..step.estimators.plain import FULL_GRADIENT_BATCH_ROWS, MinibatchGradient, value_and_grad
from ..schedules import Schedule
from .curvature import NegativeHessian, largest_eigenvalue, largest_safe_mu

#: Samplers tune_stepsize can run (gradient samplers with a stepsize).

def _public():
    """The public samplers (imported when used: the samplers' set-up imports this package)."""
    import sgmcmc

    return sgmcmc

TUNABLE = ("sgld", "sghmc", "sgnht", "sgldcv", "sghmccv", "sgnhtcv", "psgld", "hamcmc")


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


def _diagonal_curvature(estimator: MinibatchGradient, point: Mapping[str, Any], max_exact: int) -> dict[str, np.ndarray]:
    r""":math:`\mathrm{diag}(-\nabla^2\log p)` at ``point``: one Hessian-vector product per
    coordinate up to ``max_exact`` coordinates, else Hutchinson's estimate
    :math:`E[v\odot Av]` with 64 Rademacher probes (seed 0). Floored at 1e-12 of its largest
    entry (a flat direction keeps a finite scale)."""
    hess = NegativeHessian(estimator, point)
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

    def __init__(self, plain: MinibatchGradient):
        self.plain = plain
        self._lik = tf.function(lambda pts, batch: tf.vectorized_map(
            lambda u: value_and_grad(lambda p: plain.log_lik(p, batch), u)[1], pts, fallback_to_while_loop=True
        ), reduce_retracing=True)
        self._prior = None if plain.log_prior is None else tf.function(lambda pts: tf.vectorized_map(
            lambda u: value_and_grad(plain.log_prior, u)[1], pts, fallback_to_while_loop=True
        ), reduce_retracing=True)

    def __call__(self, points: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        pts = {k: tf.constant(v) for k, v in points.items()}
        total = {k: np.zeros(v.shape) for k, v in points.items()}
        for start in range(0, self.plain.n_rows, FULL_GRADIENT_BATCH_ROWS):
            batch = {k: x[start : start + FULL_GRADIENT_BATCH_ROWS] for k, x in self.plain.dataset.items()}
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
    value = ksd({k: points[k] * root[k] for k in points}, gradients={k: grads[k] / root[k] for k in points})
    return value if np.isfinite(value) else math.inf


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
        The candidates. Default: ``n_candidates`` log-spaced stepsizes from ε_s/32 to 4 ε_s, with
        ε_s the SGLD-safe stepsize :math:`0.694/\lambda_{\max}` at the start (the mode for CV
        samplers; :func:`sgmcmc.check_stepsize`): from well inside to near the stability limit
        5.8 ε_s.
    minibatch_sizes
        Also tune the minibatch size over these (each a proportion or a count): the candidates
        are every (stepsize, minibatch size) pair. Default: ``minibatch_size`` only.
    budget
        Per-row gradient evaluations of all the candidates' runs together (default 100 N: a
        hundred passes over the data). Raises ValueError when the first round would get fewer
        than ``min_iters`` iterations per candidate.
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
    **sampler_kwargs
        Passed to the sampler's ``*_setup``: ``alpha``, ``L``, ``opt_stepsize``, ``n_iters_opt``,
        ``dtype``, ``constraints``, …

    Returns
    -------
    (stepsize, table)
        The chosen stepsize (a float) and a DataFrame with one row per candidate and round:
        ``candidate``, ``stepsize``, ``minibatch_size`` (rows), ``round``, ``iterations`` (this
        round), ``total_iterations``, ``gradient_evaluations`` (this round, the budget's unit),
        ``ksd``, ``diverged``, ``seconds`` (run + KSD), ``kept`` (survived the round) and
        ``chosen``. ``table.attrs["choice"]`` holds the chosen stepsize and minibatch size,
        ``table.attrs["budget"]`` the budget.
    """
    name = _method_name(method)
    setup = getattr(_public(), f"{name}_setup")
    accepted = set(inspect.signature(setup).parameters)
    unknown = sorted(set(sampler_kwargs) - accepted)
    if unknown:
        raise TypeError(f"{name}_setup does not take {unknown}")
    if name.endswith("cv") and "verbose" in accepted:
        sampler_kwargs.setdefault("verbose", verbose)
    t_start = time.perf_counter()
    tunable = _Tunable(1.0)
    sizes = list(minibatch_sizes) if minibatch_sizes is not None else [minibatch_size]
    built = {}
    for mb in sizes:  # one compiled sampler per minibatch size; the stepsize lives in a variable
        built[mb] = setup(log_lik, dataset, params, tunable, log_prior=log_prior, minibatch_size=mb, seed=seed, **sampler_kwargs)
    first = built[sizes[0]]
    with warnings.catch_warnings():  # the CV check would judge the placeholder stepsize
        warnings.simplefilter("ignore", StepsizeWarning)
        _public().init_sess(first, sampler_kwargs.get("verbose", False))  # CV: the mode search, once
    point = {k: v.read_value() for k, v in (first.estimator.mode if first.control_variate is not None else first.params).items()}
    plain = first.one_chain_estimator if first.control_variate is not None else MinibatchGradient(
        first._plain.log_lik, first._plain.log_prior, first._plain.dataset, 1, 1
    )
    scale = _diagonal_curvature(plain, point, max_exact_dim)
    exact_scores = _ExactScores(plain)
    if stepsizes is None:
        lam = largest_eigenvalue(NegativeHessian(plain, point), {k: np.zeros(np.shape(v)) for k, v in point.items()}, 100, 1e-3, seed)[0]
        safe = largest_safe_mu("sgld") / lam
        stepsizes = list(np.geomspace(safe / 32, 4 * safe, n_candidates))
    stepsizes = [float(e) for e in stepsizes]
    if not stepsizes or any(not (e > 0 and np.isfinite(e)) for e in stepsizes):
        raise ValueError(f"stepsizes must be positive numbers, got {stepsizes}")
    per_iter = {"sghmc": sampler_kwargs.get("L", 5), "hamcmc": 2}.get(name.removesuffix("cv"), 1)
    candidates = [(e, mb) for mb in sizes for e in stepsizes]
    rows = {mb: built[mb].batch_size for mb in sizes}
    n_rows = first.n_rows
    budget = int(100 * n_rows) if budget is None else int(budget)
    n_rounds = max(1, math.ceil(math.log2(len(candidates))))

    workdir = tempfile.TemporaryDirectory(prefix="sgmcmc_tune_")
    base = {}
    for mb, sampler in built.items():  # the starting state every candidate begins from
        if sampler is not first:
            if first.control_variate is not None:  # share the mode search: same mode, same anchor
                sampler.estimator.copy_state(first.estimator)
                sampler.set_anchor({k: v.read_value() for k, v in first.estimator.anchor_grad.items()})
                sampler.init_aux()
                sampler.initialised = True
            else:
                _public().init_sess(sampler, False)
        base[mb] = sampler.save(f"{workdir.name}/base_{id(sampler)}")
    saved: dict[int, str] = {}
    total_iters = {i: 0 for i in range(len(candidates))}
    survivors = list(range(len(candidates)))
    records = []
    spent = 0
    stopped = False
    for rnd in range(n_rounds):
        share = budget // n_rounds
        iters = {i: share // (len(survivors) * rows[candidates[i][1]] * per_iter) for i in survivors}
        if rnd == 0 and min(iters.values()) < min_iters:
            need = min_iters * n_rounds * sum(rows[candidates[i][1]] * per_iter for i in survivors)
            raise ValueError(
                f"budget={budget} gives the first round fewer than min_iters={min_iters} iterations per "
                f"candidate ({len(candidates)} candidates, {n_rounds} rounds): give budget >= {need}, or fewer candidates"
            )
        scores = {}
        for i in survivors:
            if max_seconds is not None and time.perf_counter() - t_start > max_seconds:
                stopped = True
                break
            eps, mb = candidates[i]
            sampler = built[mb]
            t0 = time.perf_counter()
            if i in saved:
                sampler.restore(saved[i])
            else:
                sampler.restore(base[mb])
                tunable.variable.assign(eps)
                sampler.init_aux()  # momenta at this stepsize's scale
            tunable.variable.assign(eps)
            n = iters[i]
            it0 = sampler.iteration
            skip = n // 2 if rnd == 0 else 0
            thin = max(1, math.ceil((n - skip) / ksd_samples))
            diverged = False
            try:
                out = _public().sample_chain(sampler, n, False, burn_in=it0 + skip, thin=thin)
                value = _standardised_ksd(out, exact_scores, scale)
                saved[i] = sampler.save(f"{workdir.name}/cand_{i}")
            except DivergenceError:
                value, diverged = math.inf, True
            spent += n * rows[mb] * per_iter
            total_iters[i] += n
            scores[i] = value
            records.append(dict(
                candidate=i, stepsize=eps, minibatch_size=rows[mb], round=rnd, iterations=n,
                total_iterations=total_iters[i], gradient_evaluations=n * rows[mb] * per_iter, ksd=value,
                diverged=diverged, seconds=time.perf_counter() - t0, kept=False,
            ))
        if not scores:
            break
        ranked = sorted(scores, key=lambda i: (scores[i], i))
        survivors = ranked[: max(1, math.ceil(len(ranked) / 2))] if rnd < n_rounds - 1 and not stopped else ranked[:1]
        for r in records:
            if r["round"] == rnd and r["candidate"] in survivors:
                r["kept"] = True
        if verbose:
            best = ranked[0]
            print(
                f"tune_stepsize round {rnd + 1}/{n_rounds}: {len(scores)} candidates x {iters[best]} iterations; "
                f"best stepsize {candidates[best][0]:.3g} (minibatch {rows[candidates[best][1]]}) KSD {scores[best]:.4g}; "
                f"keeping {len(survivors)}; {time.perf_counter() - t_start:.1f} s",
                flush=True,
            )
        if stopped or len(survivors) == 1:
            break
    workdir.cleanup()
    table = pd.DataFrame.from_records(records)
    choice = survivors[0]
    table["chosen"] = (table["candidate"] == choice) & (table["round"] == table["round"].max())
    eps, mb = candidates[choice]
    table.attrs["choice"] = {"stepsize": eps, "minibatch_size": rows[mb]}
    table.attrs["budget"] = budget
    table.attrs["gradient_evaluations"] = spent
    return eps, table
