"""What every dynamics shares: the kernel protocol, the gradient estimate, stepsizes at t.

A kernel is a frozen dataclass of hyperparameters with two methods:

``init_aux(params, rng) -> aux``
    the auxiliary state (momenta, thermostats, preconditioner statistics; ``{}`` if none);
``one_step(params, aux, estimate, rng, t) -> (params, aux, est)``
    one iteration. ``est`` is the estimate the iteration made *at the state it started from*
    (for several inner steps: the first), which the chain stores as the gradient at the
    previous sample.
``ready(aux) -> [K] bool`` (optional)
    a kernel that detects the end of its own burn-in (OSGLD, Eq. 17) says per chain whether it
    has; :meth:`sgmcmc.sampler.Sampler.advance_until_ready` stops on it.

Every tensor carries a leading chain axis ``K`` (``params[name]`` is ``[K, *shape]``); updates
are elementwise, and a reduction over a parameter's elements must keep that axis
(:func:`reduce_per_chain`). ``estimate(params)`` draws a fresh minibatch per chain.
``t`` is the 1-based global iteration (a scalar int64 tensor), for stepsize schedules.

What the rest of the library needs to know about a dynamics it reads from the kernel class
(:class:`Dynamics`): its public arguments and their checks (``from_arguments``), how many
gradient evaluations an iteration costs, whether XLA suits it, which estimators it takes and
whether rows can be sharded — never from the method's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, NamedTuple, Protocol

import tensorflow as tf

from .. import inputs

Params = dict[str, tf.Tensor]


class Estimate(NamedTuple):
    """A gradient estimate for K chains: ``log_post`` ``[K]``, ``grads`` like the params."""

    log_post: tf.Tensor
    grads: Params


class BoundEstimator:
    """What a kernel's ``estimate`` is: the sampler's estimator bound to its random draws and the
    iteration. ``estimate(params)`` draws a fresh minibatch per chain; ``estimate.on_one_batch()``
    draws one and returns ``params -> Estimate`` evaluating any point on it (HAMCMC's pairs)."""

    def __init__(self, estimator, rng, t):
        self.estimator, self.rng, self.t = estimator, rng, t

    def __call__(self, params: Params) -> Estimate:
        return self.estimator(params, self.rng, self.t)

    def on_one_batch(self) -> Callable[[Params], Estimate]:
        return self.estimator.on_one_batch(self.rng, self.t)

    def with_rows(self, params: Params) -> tuple[Estimate, Params]:
        """The estimate and the per-row log-likelihood gradients of the same fresh minibatch
        (plain estimator only; OSGLD)."""
        return self.estimator.estimate_and_rows(params, self.rng)


Estimator = BoundEstimator


class Kernel(Protocol):
    def init_aux(self, params: Params, rng) -> Any: ...

    def one_step(self, params: Params, aux: Any, estimate: Estimator, rng, t: tf.Tensor) -> tuple[Params, Any, Estimate]: ...


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
    shard_refusal
        Why its rows cannot be sharded across workers, or None (SPEC §12).
    """

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize",)
    #: The public functions' defaults for the hyperparameters that have one.
    defaults: ClassVar[dict[str, Any]] = {}
    xla: ClassVar[bool] = True
    estimators: ClassVar[tuple[str, ...] | None] = None
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
        return cls(inputs.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True))


def stepsize_at(value: Any, t: tf.Tensor, dtype: tf.DType) -> Any:
    """A stepsize at iteration ``t``: a number as it is, a schedule (callable of ``t``) evaluated
    in-graph."""
    if callable(value):
        return tf.cast(value(t), dtype)
    return value


def reduce_per_chain(fn: Callable, x: tf.Tensor) -> tf.Tensor:
    """``fn`` (e.g. ``tf.reduce_mean``) over every axis but the leading chain axis, kept as a
    broadcastable ``[K, 1, …]``."""
    return fn(x, axis=list(range(1, x.shape.rank)), keepdims=True)
