"""What the rest of the library reads from a dynamics: its traits and its constructor from the
public arguments (:class:`Dynamics`) — never the method's name. The kernel protocol itself (what
``one_step`` is given and returns) is :mod:`sgmcmc.step.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, NamedTuple

from ... import checks


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
    stepsize_stability, preconditioned
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
    shard_refusal: ClassVar[str | None] = None
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

    def segments(self, n_iters: int, burn_in: int, thin: int) -> list[Segment]:
        """The whole-chain run's plan of kept draws: segments run one after the other on the same
        chain, their kept draws concatenated (:func:`sgmcmc.api.runs.run_whole_chain`). The
        default is one unlabelled segment: iterations ``burn_in + thin``, ``burn_in + 2·thin``, …
        of ``n_iters``."""
        return [Segment(n_iters, burn_in, thin)]

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "Dynamics":
        """The kernel from the user's arguments (``arguments[name]`` for each of
        :attr:`hyperparameters`), checked; clear errors for bad values."""
        return cls(checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True))
