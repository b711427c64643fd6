"""The chain program: iterations of one step over explicit state (issue 45.1).

Pure functions, traced inside the sampler's compiled calls: they take a :class:`ChainState` and
a block of minibatches and return the new state and what was kept; they read and write no
variable. :class:`~sgmcmc.run.calls.WholeChainCalls` reads the sampler's variables into a
``ChainState`` (:class:`~sgmcmc.run.variables.ChainVariables`), calls one of them and writes the
result back, in the same compiled call.

``step(state, t, batches) -> (new_state, estimate)`` is one iteration
(:meth:`~sgmcmc.run.sampler.Sampler._step`): ``state = (params, aux)`` with a leading chain axis,
``t`` the global iteration it makes (1-based), ``batches`` its minibatches, and the estimate made
at the state it started from. An iteration whose new state or log-posterior estimate is not
finite stops the loop; the state returned is then the last finite one.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import tensorflow as tf

from ..data.pipeline import iteration_of
from ..step.contract import Estimate

Step = Callable[[tuple, tf.Tensor, dict], tuple[tuple, Estimate]]


class ChainState(NamedTuple):
    """What the chains carry from one call to the next."""

    params: dict[str, tf.Tensor]  #: name -> ``[K, *shape]``
    aux: Any  #: the dynamics' auxiliary state (momenta, preconditioners, …), chain axis first
    t: tf.Tensor  #: int64, iterations done (the global counter burn-in, thinning, schedules read)
    log_post: tf.Tensor  #: ``[K]``, the last iteration's log-posterior estimate


class Kept(NamedTuple):
    """Per kept group: the state after its last iteration and the estimate its first made."""

    samples: dict[str, tf.Tensor]  #: name -> ``[slots, K, *shape]``
    log_posts: tf.Tensor  #: ``[slots, K]``
    grads: dict[str, tf.Tensor]  #: name -> ``[slots, K, *shape]`` (empty unless stored)


def finite_per_chain(params: dict[str, tf.Tensor], log_post: tf.Tensor) -> tf.Tensor:
    """[K] flags: chain k's log-posterior estimate and every element of its state are finite (a
    sum is finite only if every term is, barring overflow of values that are diverging anyway)."""
    total = log_post
    for p in params.values():
        total = total + tf.reduce_sum(tf.reshape(p, [tf.shape(p)[0], -1]), axis=1)
    return tf.math.is_finite(total)


def _settled(start: ChainState, state, prev, diverged_at, last, ran) -> tuple[ChainState, tf.Tensor]:
    """The state to keep after a loop (the last finite one) and the iterations completed."""
    good = tf.nest.map_structure(lambda a, b: tf.where(diverged_at == 0, a, b), state, prev)
    done = tf.where(diverged_at == 0, ran, diverged_at - 1 - start.t)
    return ChainState(good[0], good[1], start.t + done, last), done


def advance(
    step: Step, state: ChainState, n: tf.Tensor, block: dict,
    ready: Callable[[Any], tf.Tensor] | None = None,
) -> tuple[ChainState, tf.Tensor, tf.Tensor]:
    """``n`` iterations with nothing kept (graph mode's burn-in, OSGLD's automatic burn-in),
    iteration i of the call reading ``block[i]``, stopping at the first non-finite value and,
    with ``ready`` (the kernel's burn-in criterion on ``aux``), after the iteration at which it
    holds for every chain. Returns ``(state, done, diverged_at)``: ``diverged_at`` is the
    iteration that was not finite (0: none)."""
    def body(i, current, prev, diverged_at, last):
        t = state.t + i + 1
        new, est = step(current, t, iteration_of(block, i))
        ok = tf.reduce_all(finite_per_chain(new[0], est.log_post))
        return i + 1, new, current, tf.where(ok, diverged_at, t), est.log_post

    def more(i, current, prev, diverged_at, last):
        go = (i < n) & (diverged_at == 0)
        return go & ~tf.reduce_all(ready(current[1])) if ready is not None else go

    start = (state.params, state.aux)
    ran, current, prev, diverged_at, last = tf.while_loop(
        more, body, (tf.constant(0, tf.int64), start, start, tf.constant(0, tf.int64), state.log_post)
    )
    settled, done = _settled(state, current, prev, diverged_at, last, ran)
    return settled, done, diverged_at


def run(
    step: Step, state: ChainState, n: tf.Tensor, groups: tf.Tensor, thin: tf.Tensor, block: dict,
    store_gradients: bool, capacity: int | None = None,
) -> tuple[ChainState, Kept, tf.Tensor, tf.Tensor]:
    """The whole-chain program: ``n`` iterations, iteration i of the call reading ``block[i]``;
    with ``groups`` > 0 (then n = groups × thin) they are groups of ``thin``, and per group the
    estimate its first iteration makes (at the group's starting state) and the state after its
    last iteration are kept (``groups`` = 0: nothing is kept, burn-in). One loop over
    iterations, so the step is traced and compiled once for burn-in and sampling at every
    ``thin`` (two loops, advance and sample, each with its own copy of the step and a second
    copy inside ``thin > 1``'s groups, were two or three XLA compilations of the iteration:
    benchmarks/RESULTS.md, round 6 session 9). A value not kept is written to a spare last slot
    instead of being skipped: no conditional per iteration; a call keeping nothing writes only
    there, whatever the storage's size. ``capacity`` (XLA: a compile-time size, ≥ ``groups``)
    sizes the storage; only the first ``groups`` slots are filled. Returns ``(state, kept, done,
    diverged_at)`` as :func:`advance`."""
    keep = groups > 0
    size = tf.cast(groups, tf.int32) + 1 if capacity is None else capacity + 1
    spare = size - 1

    def arrays(like: dict[str, tf.Tensor]) -> dict[str, tf.TensorArray]:
        return {name: tf.TensorArray(p.dtype, size=size, element_shape=p.shape) for name, p in like.items()}

    samples = arrays(state.params)
    grads = arrays(state.params) if store_gradients else {}
    log_posts = tf.TensorArray(state.log_post.dtype, size=size, element_shape=state.log_post.shape)

    def body(i, current, prev, diverged_at, last, samples, grads, log_posts):
        t = state.t + i + 1
        new, est = step(current, t, iteration_of(block, i))
        ok = tf.reduce_all(finite_per_chain(new[0], est.log_post))
        group = tf.cast(tf.math.floordiv(i, thin), tf.int32)
        first = tf.where(keep & (tf.math.floormod(i, thin) == 0), group, spare)
        kept = tf.where(keep & (tf.math.floormod(i, thin) == thin - 1), group, spare)
        log_posts = log_posts.write(first, est.log_post)
        grads = {name: ta.write(first, est.grads[name]) for name, ta in grads.items()}
        samples = {name: ta.write(kept, new[0][name]) for name, ta in samples.items()}
        return i + 1, new, current, tf.where(ok, diverged_at, t), est.log_post, samples, grads, log_posts

    start = (state.params, state.aux)
    ran, current, prev, diverged_at, last, samples, grads, log_posts = tf.while_loop(
        lambda i, current, prev, diverged_at, *_: (i < n) & (diverged_at == 0),
        body,
        (tf.constant(0, tf.int64), start, start, tf.constant(0, tf.int64), state.log_post, samples, grads, log_posts),
    )
    settled, done = _settled(state, current, prev, diverged_at, last, ran)
    stored = size - 1  # the spare slot is not returned
    kept = Kept(
        {name: ta.stack()[:stored] for name, ta in samples.items()},
        log_posts.stack()[:stored],
        {name: ta.stack()[:stored] for name, ta in grads.items()},
    )
    return settled, kept, done, diverged_at
