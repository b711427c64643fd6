r"""Cyclical SG-MCMC (Zhang, Li, Zhang, Chen & Wilson 2020, "Cyclical stochastic gradient MCMC
for Bayesian deep learning", ICLR; §2): cSGLD and cSGHMC.

Iteration k (1-based; the kernel's ``t``) of K = ``n_iters`` with M = ``n_cycles`` cycles of
C = ⌈K/M⌉ iterations uses the stepsize of Zhang et al. (2020) eq. (1),

.. math::
    \epsilon_k = \frac{\epsilon}{2}\left[\cos(\pi r_k) + 1\right],\qquad
    r_k = \frac{\mathrm{mod}(k - 1, \lceil K/M\rceil)}{\lceil K/M\rceil},

(ε = ``stepsize``, per parameter; :func:`sgmcmc.schedules.cosine_cycle`, shared with the
:class:`sgmcmc.schedules.cyclical` schedule). While r_k < β = ``exploration`` the iteration is
the dynamics' noise-free step (the *exploration* stage: SGD θ + (ε_k/2) g for cSGLD; SGHMC's
update with no momentum refresh and no noise in the kicks, SGD with momentum, for cSGHMC); from
r_k ≥ β on (the *sampling* stage) it is SGLD's / SGHMC's own update at ε_k. The switch is a
multiplication of the normal draws by a scalar 0/1 (the kernel runs inside compiled loops), so
the draws, and every later iteration's, are those of the plain sampler with the same seed.

The whole-chain run keeps only sampling-stage iterations (:meth:`CSGLD.segments`): ``burn_in``
and ``thin`` apply within each cycle's sampling stage. :func:`sgmcmc.sample_chain` on a
``*_setup`` sampler keeps only sampling-stage iterations too (:meth:`_Cyclical.stages`; its
``burn_in`` and ``thin`` count on the global counter, as for every sampler). With K not
divisible by M the last cycle is shorter (C − (MC − K) iterations), and when ⌈K/C⌉ < M fewer
than M cycles fit in K (K = 10, M = 6: C = 2, five cycles); past K the cycles continue (the
step-by-step API).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import tensorflow as tf

from ... import checks
from ...schedules import cosine_cycle
from ..contract import Estimate, Estimator, Params
from .base import KernelContext, PublicFunctions, Segment, Stage
from .sghmc import SGHMC
from .sgld import SGLD

#: The defaults of the cyclical arguments (``n_iters``'s is every whole-chain function's).
CYCLICAL_DEFAULTS: dict[str, Any] = {"n_cycles": 4, "exploration": 0.8}


def cyclical_schedule(
    stepsize: Mapping[str, float], t: tf.Tensor, n_iters: int, n_cycles: int, exploration: float, dtypes: Mapping[str, tf.DType]
) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    r"""At the 1-based iteration ``t``: the stepsizes ε_k by parameter (eq. (1) of Zhang et al.
    2020, module docstring), each cast to its parameter's dtype, and the noise switch, 0.0 while
    r_k < ``exploration`` and 1.0 after (float64)."""
    eps, phase = {}, None
    for name, h in stepsize.items():
        value, phase = cosine_cycle(h, t, n_iters, n_cycles)
        eps[name] = tf.cast(value, dtypes[name])
    return eps, tf.cast(phase >= exploration, tf.float64)


def exploration_iterations(n_iters: int, n_cycles: int, exploration: float) -> int:
    """How many first iterations of a full cycle (C = ⌈K/M⌉) have r < β: the m in 0…C−1 with
    m/C < β, decided by the same float64 division as the kernel's."""
    period = math.ceil(n_iters / n_cycles)
    m = min(period, max(0, math.ceil(exploration * period)))
    while m > 0 and (m - 1) / period >= exploration:
        m -= 1
    while m < period and m / period < exploration:
        m += 1
    return m


def cycle_segments(n_iters: int, kernel_iters: int, n_cycles: int, exploration: float, burn_in: int, thin: int) -> list[Segment]:
    """One segment per cycle of the ``kernel_iters`` schedule within ``n_iters`` iterations (cycle c
    labelled c): its exploration iterations and then ``burn_in`` are not kept, then every
    ``thin``-th iteration of the rest of the cycle is."""
    period = math.ceil(kernel_iters / n_cycles)
    skip = exploration_iterations(kernel_iters, n_cycles, exploration) + burn_in
    return [Segment(min(period, n_iters - start), skip, thin, c) for c, start in enumerate(range(0, n_iters, period))]


def _cycle_arguments(arguments: Mapping[str, Any]) -> tuple[int, int, float]:
    """``n_iters``, ``n_cycles`` and ``exploration`` checked: ``n_iters`` and ``n_cycles`` ≤
    ``n_iters`` positive whole numbers, ``exploration`` in [0, 1)."""
    n_iters = checks.check_count(arguments["n_iters"], "n_iters")
    n_cycles = checks.check_count(arguments["n_cycles"], "n_cycles")
    if n_cycles > n_iters:
        raise ValueError(f"n_cycles={n_cycles} is more than n_iters={n_iters}: a cycle needs at least one iteration")
    beta = arguments["exploration"]
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not 0 <= beta < 1:
        raise ValueError(
            f"exploration must be a number in [0, 1) (the fraction of each cycle run without noise), got {beta!r}"
        )
    return n_iters, n_cycles, float(beta)


def _cyclical_arguments(arguments: Mapping[str, Any], context: KernelContext) -> dict[str, Any]:
    """The cyclical arguments checked: those of :func:`_cycle_arguments`, ``stepsize`` numbers (a
    schedule is refused)."""
    stepsize = arguments["stepsize"]
    values = stepsize.values() if isinstance(stepsize, Mapping) else [stepsize]
    if any(callable(v) for v in values):
        raise TypeError(
            "cyclical SG-MCMC takes no stepsize schedule: its cyclical schedule (Zhang et al. 2020, eq. 1) is the "
            "schedule. Give the largest stepsize, used at the first iteration of each cycle (a number, or a dict of "
            "numbers by parameter)"
        )
    n_iters, n_cycles, exploration = _cycle_arguments(arguments)
    return dict(
        stepsize=checks.per_parameter(stepsize, context.names, "stepsize"),
        n_iters=n_iters, n_cycles=n_cycles, exploration=exploration,
    )


# -- the public functions' documentation (sgmcmc/api/samplers.py is generated from it) ------------
_SCHEDULE = r"""
    Iteration k (1-based) of K = ``n_iters`` with M = ``n_cycles`` cycles of C = ⌈K/M⌉
    iterations uses :math:`\epsilon_k = \frac{\epsilon}{2}[\cos(\pi r_k) + 1]`,
    :math:`r_k = \mathrm{mod}(k - 1, C)/C` (Zhang et al. 2020, eq. 1; ε = ``stepsize``, a number
    or a dict of numbers by parameter — a schedule is refused: this is the schedule). While
    :math:`r_k <` ``exploration`` the step has no injected noise (the exploration stage), after it
    the sampler's own update at :math:`\epsilon_k` (the sampling stage). With K not divisible by M
    the last cycle is shorter; when ⌈K/C⌉ < M fewer than M cycles fit (K = 10, M = 6: five). The
    stepsize check before sampling judges the largest stepsize, ε. See
    :mod:`sgmcmc.step.dynamics.cyclical`.
"""

_STEP_BY_STEP = r"""
    The step-by-step API (:func:`~sgmcmc.init_sess`, :func:`~sgmcmc.sgmcmc_step`) follows the same
    schedule by the global iteration counter (past ``n_iters`` the cycles continue);
    :func:`~sgmcmc.sample_chain` on this sampler keeps by that counter like any sampler's
    (exploration iterations included), while the whole-chain function keeps sampling stages only.
"""

_KEPT = r"""
    Only sampling-stage iterations are kept: ``burn_in`` (default 0) and ``thin`` apply within
    each cycle's sampling stage (each cycle restarts from an exploration stage), so cycle c keeps
    its iterations e + burn_in + thin, e + burn_in + 2·thin, … (counted from the cycle's start,
    e its exploration iterations) up to the cycle's end. ``samples.cycle`` gives each kept draw's
    cycle (0-based); the kept draws of all cycles together are the ensemble. ``checkpoint_dir``
    is refused (not supported yet: the run is one segment per cycle).
"""

_CYCLE_PARAMETERS = {
    "n_iters": r"""    n_iters : int
        K, the iterations the cycles divide (a whole-chain run runs them).
""",
    "n_cycles": r"""    n_cycles : int
        M, a whole number at most ``n_iters``.
""",
    "exploration": r"""    exploration : float
        β in [0, 1): the fraction of each cycle run without noise.
""",
}


def _cyclical_public(plain: PublicFunctions, **own: Any) -> PublicFunctions:
    """The public functions' record of a cyclical sampler: its own label, argument types and
    docstrings, the hyperparameter entries of ``plain`` (the dynamics it switches: SGLD's,
    SGHMC's) and what both share (the schedule and kept-draw sections, ``n_iters``'s default)."""
    return PublicFunctions(
        leading=("stepsize",),
        argument_defaults={"n_iters": "Chain.n_iters"},
        setup_notes=_SCHEDULE + _STEP_BY_STEP,
        run_notes=_SCHEDULE + _KEPT,
        parameter_docs={**plain.parameter_docs, **_CYCLE_PARAMETERS},
        **own,
    )


class _Cyclical:
    """What cSGLD and cSGHMC add to SGLD and SGHMC: the schedule and the noise switch in
    ``one_step``, and one kept-draw segment per cycle."""

    n_iters: int
    n_cycles: int
    exploration: float
    stepsize_schedules: ClassVar[bool] = False

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        eps, noise_on = cyclical_schedule(
            self.stepsize, t, self.n_iters, self.n_cycles, self.exploration, {k: p.dtype for k, p in params.items()}
        )
        return self.update_at(params, aux, estimate, rng, eps, noise_on)

    @classmethod
    def segments(cls, arguments: Mapping[str, Any], n_iters: int, burn_in: int, thin: int) -> list[Segment]:
        """One segment per cycle (module docstring) of the schedule ``arguments`` give (their
        ``n_iters``, ``n_cycles``, ``exploration``, checked); refused when no cycle keeps a draw."""
        kernel_iters, n_cycles, exploration = _cycle_arguments(arguments)
        plan = cycle_segments(n_iters, kernel_iters, n_cycles, exploration, burn_in, thin)
        if not any(s.kept for s in plan):
            explore = exploration_iterations(kernel_iters, n_cycles, exploration)
            raise ValueError(
                f"no iteration would be kept: each cycle of {math.ceil(kernel_iters / n_cycles)} iterations "
                f"explores for {explore} (exploration={exploration}), then burn_in={burn_in} and thin={thin} "
                f"apply within its sampling stage. Give a smaller burn_in, thin or exploration, or fewer cycles"
            )
        return plan

    def stages(self, first: int, n_iters: int) -> list[Stage]:
        """Exploration and sampling stretches of iterations ``first … first + n_iters − 1``: r_k < β
        decides, as in the kernel (mod(k − 1, C) < the exploration length, past K too); a
        sampling stretch is labelled with its cycle, (k − 1) // C."""
        period = math.ceil(self.n_iters / self.n_cycles)
        explore = exploration_iterations(self.n_iters, self.n_cycles, self.exploration)
        out, t, end = [], first, first + n_iters
        while t < end:
            cycle, position = divmod(t - 1, period)
            keepable = position >= explore
            stop = min(end, cycle * period + 1 + (period if keepable else explore))
            out.append(Stage(stop - t, keepable, cycle if keepable else None))
            t = stop
        return out


@dataclass(frozen=True)
class CSGLD(_Cyclical, SGLD):
    """cSGLD (module docstring): SGD in each cycle's exploration stage, SGLD at ε_k after."""

    n_iters: int
    n_cycles: int
    exploration: float

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "n_iters", "n_cycles", "exploration")
    defaults: ClassVar[dict[str, Any]] = CYCLICAL_DEFAULTS
    public: ClassVar[PublicFunctions] = _cyclical_public(
        SGLD.public,
        label="cSGLD",
        argument_types={"n_iters": "int", "n_cycles": "int", "exploration": "float"},
        run_doc=r"""Run cSGLD for ``n_iters`` iterations: the set-up and update of :func:`csgld_setup`, then
    the whole chain in compiled chunks, one cycle after another.
    """,
        setup_doc=r"""Set up cyclical SGLD, cSGLD (Zhang et al. 2020, ICLR; SPEC §13): SGD
    :math:`\theta \leftarrow \theta + \frac{\epsilon_k}{2}g(\theta)` in each cycle's exploration
    stage, SGLD :math:`\theta \leftarrow \theta + \frac{\epsilon_k}{2}g(\theta) + N(0, \epsilon_k)`
    (as :func:`sgld_setup`) in its sampling stage.
    """,
    )

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "CSGLD":
        return cls(**_cyclical_arguments(arguments, context))


@dataclass(frozen=True)
class CSGHMC(_Cyclical, SGHMC):
    """cSGHMC (module docstring): SGD with momentum (SGHMC without its normal draws) in each
    cycle's exploration stage, SGHMC at ε_k after."""

    n_iters: int
    n_cycles: int
    exploration: float

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "alpha", "L", "n_iters", "n_cycles", "exploration", "noise_correction")
    defaults: ClassVar[dict[str, Any]] = {**SGHMC.defaults, **CYCLICAL_DEFAULTS}
    public: ClassVar[PublicFunctions] = _cyclical_public(
        SGHMC.public,
        label="cSGHMC",
        argument_types={
            "alpha": "PerParameter", "L": "int", "n_iters": "int", "n_cycles": "int", "exploration": "float",
            "noise_correction": "bool",
        },
        keyword_only=SGHMC.public.keyword_only,
        run_doc=r"""Run cSGHMC for ``n_iters`` iterations: the set-up and update of :func:`csghmc_setup`, then
    the whole chain in compiled chunks, one cycle after another.
    """,
        setup_doc=r"""Set up cyclical SGHMC, cSGHMC (Zhang et al. 2020, ICLR; SPEC §13). In each cycle's
    sampling stage an iteration is SGHMC's at :math:`\epsilon_k` (as :func:`sghmc_setup`:
    :math:`\nu \sim N(0, \epsilon_k)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon_k g(\theta) - \alpha\nu + N(0, 2(\alpha - \hat\beta)\epsilon_k)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick; :math:`\hat\beta = 0`, or
    :math:`\frac12\epsilon_k\hat V` with ``noise_correction=True``); in its exploration
    stage the same with every normal draw set to zero: :math:`\nu = 0`, then ``L`` kicks
    :math:`\nu \leftarrow \nu + \epsilon_k g(\theta) - \alpha\nu` (SGD with momentum 1 − α;
    with ``noise_correction`` V̂ is computed there too, and unused).
    """,
    )

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "CSGHMC":
        cyclical = _cyclical_arguments(arguments, context)
        sghmc = SGHMC.from_arguments(dict(arguments, stepsize=cyclical["stepsize"]), context)
        return cls(alpha=sghmc.alpha, L=sghmc.L, noise_correction=sghmc.noise_correction, **cyclical)
