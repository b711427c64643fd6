"""What the rest of the library reads from a dynamics: its traits and its constructor from the
public arguments (:class:`Dynamics`) — never the method's name. The kernel protocol itself (what
``one_step`` is given and returns) is :mod:`sgmcmc.step.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

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

    @property
    def gradient_evaluations(self) -> int:
        """Gradient evaluations (minibatches) per iteration: the cost of an iteration in SGLD
        iterations."""
        return 1

    @property
    def minibatches_per_iteration(self) -> int:
        """Fresh minibatches per chain and iteration, drawn ahead by the sampler."""
        return 1

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "Dynamics":
        """The kernel from the user's arguments (``arguments[name]`` for each of
        :attr:`hyperparameters`), checked; clear errors for bad values."""
        return cls(checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True))
