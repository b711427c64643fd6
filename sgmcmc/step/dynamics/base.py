"""What the rest of the library reads from a dynamics: its traits and its constructor from the
public arguments (:class:`Dynamics`) — never the method's name. The kernel protocol itself (what
``one_step`` is given and returns) is :mod:`sgmcmc.step.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, NamedTuple

import numpy as np

from ... import checks
from . import distortion as _distortion


Arrays = dict[str, np.ndarray]
#: A linear map on parameter-shaped arrays (name -> array), e.g. x ↦ Ax with A the negative Hessian.
Operator = Callable[[Arrays], Arrays]


def scaled_operator(hess: Operator, root: Mapping[str, Any]) -> Operator:
    r"""The operator :math:`x \mapsto E^{1/2} A E^{1/2} x` for :math:`E^{1/2}` = ``root`` (name ->
    √stepsize: a number, or an array of the parameter's shape) and A = ``hess``."""
    return lambda x: {k: root[k] * y for k, y in hess({k: root[k] * x[k] for k in root}).items()}


@dataclass(frozen=True)
class PublicFunctions:
    """What the public functions of a dynamics say and take beyond the shared arguments: the
    source of ``sgmcmc/api/samplers.py`` is generated from it and the method table
    (``python -m sgmcmc.api.generate``; docs/DESIGN.md, "Adding a sampler").

    Attributes
    ----------
    label
        The name in prose ("pSGLD"); the CV twin is ``label + "-CV"``.
    setup_doc
        The ``*_setup`` docstring: the update, its equation and paper, its own arguments.
    argument_types
        Annotation (source text) of each hyperparameter; ``stepsize`` is ``PerParameter``.
    leading
        Hyperparameters placed right after ``params`` (positional, R's order); the others follow
        ``minibatch_size``. None: those without a default.
    cv_setup_doc
        The control-variate twin's ``*_setup`` docstring, where the table has one.
    run_doc
        The whole-chain docstring when the standard sentence is not enough.
    run_options
        Extra keyword-only arguments of the whole-chain function: name -> (annotation, default
        source), passed on to the run with the hyperparameters.
    run_option_docs
        Numpy-style entries for ``run_options``, in the whole-chain docstring's "Chain options".
    argument_defaults
        Default (source text) of a hyperparameter whose default is not in ``defaults``
        (cSGLD's ``n_iters``: ``Chain.n_iters``). A hyperparameter named ``n_iters`` is also the
        whole-chain function's length.
    setup_notes, run_notes
        Sections appended after the ``*_setup`` / whole-chain docstring, before the parameters.
    parameter_docs
        Each hyperparameter's numpy-style entry (``"    name : type\n        description\n"``),
        but ``stepsize``'s (shared, :mod:`sgmcmc.api.docs`): the generator places it in the
        "Parameters" section at the hyperparameter's place in the signature.
    other_parameter_docs
        Numpy-style entries for shared parameters whose meaning is the dynamics' own (OSGLD's
        ``estimator``), after the shared setup options.
    keyword_only
        Hyperparameters that are keyword-only in both functions (after ``check_stepsize``; their
        ``parameter_docs`` entries after the shared setup options): an option added to a dynamics
        later, which must not move the positional arguments of SPEC §2 (R's order).
    """

    label: str
    setup_doc: str
    argument_types: Mapping[str, str] = field(default_factory=dict)
    leading: tuple[str, ...] | None = None
    cv_setup_doc: str | None = None
    run_doc: str | None = None
    run_options: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    run_option_docs: str = ""
    argument_defaults: Mapping[str, str] = field(default_factory=dict)
    setup_notes: str = ""
    run_notes: str = ""
    parameter_docs: Mapping[str, str] = field(default_factory=dict)
    other_parameter_docs: str = ""
    keyword_only: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelContext:
    """What a kernel's argument checks may need besides its own arguments: the parameter names
    (per-parameter values), N and n (``batch_size`` None while the rows are sharded, before the
    workers have agreed on n), and the estimator's name."""

    names: list[str]
    n_rows: int
    batch_size: int | None
    estimator: str


class Segment(NamedTuple):
    """A stretch of a whole-chain run: ``n_iters`` iterations, of which those at positions
    ``skip + thin``, ``skip + 2·thin``, … (counted from the segment's start, at most ``n_iters``)
    are kept. ``label`` tags the segment's kept draws in ``Samples.cycle`` (None: untagged)."""

    n_iters: int
    skip: int
    thin: int
    label: int | None = None

    @property
    def kept(self) -> int:
        """How many of its iterations the segment keeps."""
        return max(0, (self.n_iters - self.skip) // self.thin)


class Stage(NamedTuple):
    """A stretch of iterations in one stage of the kernel (:meth:`Dynamics.stages`): its length,
    whether its iterations are draws that may be kept (False: cyclical SG-MCMC's exploration), and
    the label of its kept draws (None: untagged)."""

    n_iters: int
    keepable: bool
    label: int | None = None


class Dynamics:
    """The traits every kernel class declares (defaults here) and its constructor from the
    public arguments.

    Class attributes
    ----------------
    hyperparameters
        The public arguments that define the dynamics, recorded in ``Samples.settings``.
    defaults
        Their defaults in the public functions (named once, here).
    xla
        Whether the compiled loop uses XLA by default with it (where it measured faster,
        docs/DESIGN.md).
    estimators
        The estimator names it works with (None: all).
    stepsize_stability, preconditioned, diagonal_preconditioner, curvature_scale, preconditioner_snapshots
        How the stepsize check and ``tune_stepsize`` judge its stepsize.
    shard_refusal
        Why its rows cannot be sharded across workers, or None (SPEC §12).
    stepsize_schedules
        Whether its stepsize may be a schedule (:mod:`sgmcmc.schedules`); False where the
        dynamics is its own schedule (cyclical SG-MCMC). ``tune_stepsize`` tunes through a
        schedule, so only these.
    """

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize",)
    #: The public functions' defaults for the hyperparameters that have one.
    defaults: ClassVar[dict[str, Any]] = {}
    xla: ClassVar[bool] = True
    estimators: ClassVar[tuple[str, ...] | None] = None
    #: The stability model of :func:`sgmcmc.check_stepsize` that judges the stepsize
    #: (``"sgld"``, ``"sghmc"``, ``"sgnht"``), or None: not checked, not tunable.
    stepsize_stability: ClassVar[str | None] = None
    #: A preconditioned stepsize (pSGLD, HAMCMC): judged after a run, at the preconditioner reached.
    preconditioned: ClassVar[bool] = False
    #: The preconditioner is diagonal and :meth:`preconditioner_reached` reads it from the kernel
    #: state (pSGLD); False: no preconditioner, or not a diagonal one (HAMCMC's L-BFGS matrix).
    diagonal_preconditioner: ClassVar[bool] = False
    #: What multiplies the curvature in the scaled curvature μ, in the tuner's reasons for
    #: excluding a stepsize ("stepsize × preconditioner").
    curvature_scale: ClassVar[str] = "stepsize"
    #: The tuner's μ after a run is the median over this many preconditioners, read
    #: :meth:`preconditioner_renewal` iterations apart (where one is too noisy an estimate).
    preconditioner_snapshots: ClassVar[int] = 1
    shard_refusal: ClassVar[str | None] = None
    #: Under ``temperature=T`` the chain runs on log p / T, and each hyperparameter named here is
    #: multiplied by T to this power (:mod:`sgmcmc.tempering`): a fixed-metric stepsize by T,
    #: which keeps the drift and scales the injected noise by √T (Wenzel et al. 2020).
    temperature_powers: ClassVar[dict[str, float]] = {"stepsize": 1.0}
    #: The public functions' documentation and argument layout (None: no public functions).
    public: ClassVar[PublicFunctions | None] = None
    stepsize_schedules: ClassVar[bool] = True

    @property
    def gradient_evaluations(self) -> int:
        """Gradient evaluations (minibatches) per iteration: the cost of an iteration in SGLD
        iterations."""
        return 1

    @property
    def minibatches_per_iteration(self) -> int:
        """Fresh minibatches per chain and iteration, drawn ahead by the sampler."""
        return 1

    @property
    def moves_per_iteration(self) -> int:
        """How many SGLD-like moves an iteration makes along a soft direction (SGHMC: its ``L``
        leapfrog steps): the tuner's mixing estimate divides the autocorrelation time by it."""
        return 1

    #: The stepsize is on the standardised scale (HAMCMC: εHA ≈ εI), so the tuner's grid ends at
    #: the largest safe scaled curvature itself rather than at a stepsize.
    standardised_stepsize: ClassVar[bool] = False
    #: A hyperparameter that takes the plain dynamics' stepsize cap when the user gives none
    #: (HAMCMC's ``warmup_stepsize``: its warm-up runs SGLD steps).
    plain_cap_hyperparameter: ClassVar[str | None] = None

    @classmethod
    def predicted_preconditioner(
        cls, diag: Mapping[str, Any], n_rows: int, batch_rows: int, hyper: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The diagonal preconditioner G a preconditioned stepsize will reach at stationarity,
        from the diagonal ``diag`` of the negative Hessian (None: not predicted)."""
        return None

    def preconditioner_reached(self, kernel_state: Mapping[str, Any]) -> dict[str, Any] | None:
        """Per coordinate, the largest over chains of the preconditioner G a run has reached
        (from :meth:`sgmcmc.run.sampler.Sampler.kernel_state`), where
        :attr:`diagonal_preconditioner`; None otherwise."""
        return None

    def preconditioner_renewal(self, kernel_state: Mapping[str, Any]) -> int:
        """Iterations after which the preconditioner of ``kernel_state`` depends on none of the
        states it was built from (the spacing of :attr:`preconditioner_snapshots`)."""
        return 1

    def scaled_curvature_operators(
        self, hess: Operator, like: Arrays, kernel_state: Mapping[str, Any], eps: float
    ) -> list[tuple[Operator, Arrays | None]]:
        r"""Operators whose largest eigenvalue is the scaled curvature μ a run has reached with
        stepsize ``eps`` (:mod:`sgmcmc.tuning.stepsize_search`, the cap): one per chain, or one
        bounding every chain; μ is the largest of theirs. ``hess`` is x ↦ Ax (A the negative
        Hessian), ``like`` zeros of the parameters' shapes, ``kernel_state`` as
        :meth:`preconditioner_reached` reads it. Each comes with :math:`E^{1/2}` (name -> array)
        where it is the symmetric :math:`E^{1/2}AE^{1/2}` (the tuner then weighs the minibatch
        noise along its top direction), or None (the noise not modelled). The default: E = ε G with
        G the diagonal :meth:`preconditioner_reached` (its largest over chains: one operator);
        none without one."""
        g = self.preconditioner_reached(kernel_state)
        if g is None:
            return []
        root = {k: np.sqrt(eps * g[k]) for k in like}
        return [(scaled_operator(hess, root), root)]

    # -- what the stepsize check and the tuner read (classes with a stepsize_stability) ----------
    @classmethod
    def sd_ratio(cls, mu: float, noise: float = 0.0, **hyper: float) -> float:
        r"""Stationary sd of the discretised chain over the target's along a direction of scaled
        curvature μ = ελ with scaled gradient noise q = ``noise``, on a Gaussian
        (:mod:`sgmcmc.stability.curvature` derives each dynamics' formula); ``inf`` where the
        recursion grows, NaN where it neither grows nor settles. ``hyper``: the values of
        :meth:`distortion_hyperparameters` (others ignored)."""
        raise NotImplementedError(f"{cls.__name__} has no stationary-sd formula (stepsize_stability is None)")

    @classmethod
    def distortion_hyperparameters(cls, names: list[str], values: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        """Per parameter, the hyperparameters :meth:`sd_ratio` takes, from ``values`` (the
        sampler's or the public check's arguments; a per-parameter value gives each parameter
        its own)."""
        return {k: {} for k in names}

    @classmethod
    def stability_limit(cls, **hyper: float) -> float:
        """The scaled curvature μ at which the recursion becomes unstable."""
        return _distortion.stability_limit(cls.sd_ratio, **hyper)

    @classmethod
    def safe_factor(cls, mu: float, noise: float = 0.0, distortion: float = 0.1, **hyper: float) -> float:
        r"""The largest c such that the stepsize times c keeps :math:`|\rho - 1| \le \delta`."""
        return _distortion.safe_factor(cls.sd_ratio, mu, noise, distortion, **hyper)

    @classmethod
    def largest_safe_mu(cls, distortion: float = 0.1, **hyper: float) -> float:
        r"""The smallest μ at which :math:`|\rho(\mu) - 1|` reaches δ (exact gradients)."""
        return _distortion.largest_safe_mu(cls.sd_ratio, distortion, **hyper)

    @classmethod
    def segments(cls, arguments: Mapping[str, Any], n_iters: int, burn_in: int, thin: int) -> list[Segment]:
        """The whole-chain run's plan of kept draws: segments run one after the other on the same
        chain, their kept draws concatenated (:func:`sgmcmc.api.runs.run_whole_chain`). The
        default is one unlabelled segment: iterations ``burn_in + thin``, ``burn_in + 2·thin``, …
        of ``n_iters``. From the public ``arguments`` (as for :meth:`from_arguments`), before any
        sampler exists, so that a plan keeping nothing is refused before the set-up's checks."""
        return [Segment(n_iters, burn_in, thin)]

    def stages(self, first: int, n_iters: int) -> list[Stage]:
        """The iterations ``first … first + n_iters − 1`` (1-based, the global counter) cut where
        the kernel's stage changes: whether each stretch's iterations may be kept as draws, and
        the label of its kept draws (``Samples.cycle``). :func:`sgmcmc.sample_chain` keeps only
        from keepable stretches, so a ``*_setup`` sampler's run keeps what the whole-chain run
        keeps. The default is one keepable, unlabelled stretch."""
        return [Stage(n_iters, True, None)]

    def after_run(self, kernel_state: Any) -> str | None:
        """What a run's end should warn about, read from the kernel's auxiliary state
        (``sampler.kernel_state()``, counted since :func:`~sgmcmc.init_sess`), or None: a
        condition the compiled loop can count but not refuse (SGHMC's clipped noise correction).
        :mod:`sgmcmc.api.runs` warns with it (``StepsizeWarning``) after a whole-chain or
        ``sample_chain`` call."""
        return None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "Dynamics":
        """The kernel from the user's arguments (``arguments[name]`` for each of
        :attr:`hyperparameters`), checked; clear errors for bad values."""
        return cls(checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True))
