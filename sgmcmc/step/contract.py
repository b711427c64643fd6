"""The contract between dynamics and estimators: what a kernel is given and what an
estimator returns. Both :mod:`~sgmcmc.step.dynamics` and :mod:`~sgmcmc.step.estimators` import
it; neither imports the other.

A kernel is a frozen dataclass of hyperparameters with two methods:

``init_aux(params, rng) -> aux``
    the auxiliary state (momenta, thermostats, preconditioner statistics; ``{}`` if none);
``one_step(params, aux, estimate, rng, t) -> (params, aux, est)``
    one iteration. ``est`` is the estimate the iteration made *at the state it started from*
    (for several inner steps: the first), which the chain stores as the gradient at the
    previous sample.
``ready(aux) -> [K] bool`` (optional)
    a kernel that detects the end of its own burn-in (OSGLD, Eq. 17) says per chain whether it
    has; :meth:`sgmcmc.run.sampler.Sampler.advance_until_ready` stops on it.

An estimator is a callable ``estimator(params, minibatch, rng, t) -> Estimate`` (and
``on_one_batch(minibatch, rng, t) -> (params -> Estimate)``, for several points on one
minibatch). The minibatch is an argument, handed down from the sampler's block
(:class:`Minibatches`); ``rng`` makes random numbers only (:mod:`sgmcmc.step.random`).

Every tensor carries a leading chain axis ``K`` (``params[name]`` is ``[K, *shape]``); updates
are elementwise, and a reduction over a parameter's elements must keep that axis
(:func:`reduce_per_chain`). ``t`` is the 1-based global iteration (a scalar int64 tensor).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple, Protocol

import tensorflow as tf

Params = dict[str, tf.Tensor]


class Minibatch(NamedTuple):
    """One minibatch per chain: entries ``name -> [K, n, …]`` and their row indices ``[K, n]``."""

    rows: dict[str, tf.Tensor]
    indices: tf.Tensor


class Minibatches:
    """An iteration's minibatches, handed out in order: ``batches`` is one iteration of the
    sampler's block, ``{"rows": name -> [D, K, n, …], "indices": [D, K, n]}`` (D the dynamics'
    :attr:`~sgmcmc.step.dynamics.base.Dynamics.minibatches_per_iteration`)."""

    def __init__(self, batches: dict | None):
        self.batches, self.taken = batches, 0
        #: Added to ``taken`` inside a loop over repeated inner steps (a tensor there,
        #: :meth:`BoundEstimator.repeat`), else None.
        self.offset = None

    @property
    def available(self) -> int | None:
        """Minibatches the iteration holds (None: none given)."""
        return None if self.batches is None else int(self.batches["indices"].shape[0])

    def next(self) -> Minibatch:
        if self.batches is None:
            raise RuntimeError("this iteration was given no minibatches")
        d, indices = self.taken, self.batches["indices"]
        if d >= indices.shape[0]:
            raise RuntimeError(
                f"the kernel drew more minibatches per iteration than the {indices.shape[0]} its "
                "minibatches_per_iteration announced"
            )
        self.taken += 1
        if self.offset is None:
            return Minibatch({k: v[d] for k, v in self.batches["rows"].items()}, indices[d])
        d = d + self.offset
        return Minibatch({k: tf.gather(v, d) for k, v in self.batches["rows"].items()}, tf.gather(indices, d))

    def check_all_taken(self, method: str) -> None:
        """At trace time, after the iteration: the kernel used every minibatch it announced (a
        kernel that takes fewer would leave rows drawn for nothing, and its chain would change if
        the count were corrected)."""
        if self.batches is not None and self.taken != self.available:
            raise RuntimeError(
                f"{method}: the kernel used {self.taken} minibatches in an iteration but announced "
                f"{self.available} (minibatches_per_iteration)"
            )


class Estimate(NamedTuple):
    """A gradient estimate for K chains: ``log_post`` ``[K]``, ``grads`` like the params."""

    log_post: tf.Tensor
    grads: Params


class BoundEstimator:
    """What a kernel's ``estimate`` is: the sampler's estimator bound to the iteration's
    minibatches, its random draws and the iteration. ``estimate(params)`` evaluates on the next
    minibatch per chain; ``estimate.on_one_batch()`` takes one and returns ``params -> Estimate``
    evaluating any point on it (HAMCMC's pairs)."""

    def __init__(self, estimator, minibatches: Minibatches, rng, t):
        self.estimator, self.minibatches, self.rng, self.t = estimator, minibatches, rng, t

    def __call__(self, params: Params) -> Estimate:
        return self.estimator(params, self.minibatches.next(), self.rng, self.t)

    def on_one_batch(self) -> Callable[[Params], Estimate]:
        return self.estimator.on_one_batch(self.minibatches.next(), self.rng, self.t)

    def repeat(self, step: Callable[[Any, tf.Tensor], tuple[Any, Estimate]], state: Any, times: int, rng) -> tuple[Any, Estimate]:
        """``state, est = step(state, first)`` ``times`` times, ``first`` a scalar boolean tensor
        (true the first time): the final state and the first time's estimate. ``state[0]`` is the
        parameters (``[K, …]`` by name), which give the estimate's shapes.

        Every step runs in one ``tf.while_loop``, so ``step`` (with the estimator and its
        vectorisation over chains) is traced once whatever ``times`` is. Step k takes the
        minibatches and random draws that writing the steps out would give it (the same bits):
        the loop carries how many of each the steps before it took (what one step takes is
        counted while its body is traced; a retraced body must take as many). ``rng`` must be the
        estimator's own. (Written
        out, SGHMC traced its estimator L times: a fresh SGHMC-CV at L = 5 cost 6.5 CPU s, with
        the first step written out and the rest in a loop 4.1; benchmarks/RESULTS.md, "SGHMC's
        kicks in a loop". One trace: see "Round 6, session 8".)
        """
        if rng is not self.rng:
            raise ValueError("repeat needs the estimator's own random-number source")
        minibatches = self.minibatches
        taken, calls = minibatches.taken, rng.calls
        per_step: list[tuple[int, int]] = []
        params = state[0]
        like = next(iter(params.values()))
        first = Estimate(tf.zeros(tf.shape(like)[:1], like.dtype), {k: tf.zeros_like(v) for k, v in params.items()})

        def body(k, batches_before, calls_before, state, first):
            minibatches.taken, minibatches.offset = taken, batches_before
            rng.seek(calls, calls_before)
            is_first = tf.equal(k, 0)
            state, est = step(state, is_first)
            per_step.append((minibatches.taken - taken, rng.calls - calls))
            first = tf.nest.map_structure(lambda kept, new: tf.where(is_first, new, kept), first, est)
            batches, draws = per_step[-1]
            return k + 1, batches_before + batches, calls_before + tf.constant(draws, tf.uint64), state, first

        start = (tf.constant(0, tf.int64), tf.constant(0, tf.int64), tf.constant(0, tf.uint64), state, first)
        try:
            _, _, _, state, first = tf.while_loop(lambda k, *_: k < times, body, start)
        finally:
            minibatches.offset = None
            rng.seek(calls)
        if len(set(per_step)) != 1:
            raise RuntimeError("a repeated step took a different number of minibatches or random draws than the first")
        batches, draws = per_step[0]
        available = minibatches.available
        if available is not None and taken + times * batches > available:
            raise RuntimeError(
                f"the kernel drew more minibatches per iteration than the {available} its "
                "minibatches_per_iteration announced"
            )
        minibatches.taken = taken + times * batches
        rng.seek(calls + times * draws)
        return state, first

    def with_rows(self, params: Params) -> tuple[Estimate, Params]:
        """The estimate and the per-row log-likelihood gradients of the same next minibatch
        (plain estimator only; OSGLD)."""
        return self.estimator.estimate_and_rows(params, self.minibatches.next())


Estimator = BoundEstimator


class Kernel(Protocol):
    def init_aux(self, params: Params, rng) -> Any: ...

    def one_step(self, params: Params, aux: Any, estimate: Estimator, rng, t: tf.Tensor) -> tuple[Params, Any, Estimate]: ...


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


def map_over_chains(fn: Callable, args, n_chains: int):
    """``fn`` applied to each slice of ``args`` along the leading chain axis, results stacked.

    One chain calls ``fn`` directly (no vectorisation overhead). Several chains use
    ``tf.vectorized_map`` (ops without a vectorised form run in a while loop inside it); if the
    user's code cannot be vectorised at all, ``tf.map_fn`` runs the chains one after another in
    the graph, with a warning. Both give each chain's own result.
    """
    if n_chains == 1:
        one = fn(tf.nest.map_structure(lambda x: x[0], args))
        return tf.nest.map_structure(lambda x: x[None], one)
    try:
        return tf.vectorized_map(fn, args, fallback_to_while_loop=True, warn=False)
    except tf.errors.OperatorNotAllowedInGraphError:
        raise  # a trace without AutoGraph that needs it: graph_options.AutographIfNeeded retraces with it
    except Exception as error:  # the user's ops may not vectorise in any form
        warnings.warn(
            f"the model could not be vectorised over chains ({type(error).__name__}: {error}); the "
            f"{n_chains} chains are stepped one after another inside the compiled loop",
            RuntimeWarning,
            stacklevel=2,
        )
        probe = fn(tf.nest.map_structure(lambda x: x[0], args))
        signature = tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, x.dtype), probe)
        return tf.map_fn(fn, args, fn_output_signature=signature)
