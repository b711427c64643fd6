"""The step API's call: one iteration as one compiled call (``sgmcmc_step``).

The program (:meth:`StepCall.checked_step`) is one step of the chain, compiled on its own in the
sampler's mode. Since XLA's code is capped at AVX (no FMA contraction, :mod:`sgmcmc._xla_flags`)
it gives the whole-chain program's bits (tests/test_step_api.py, benchmarks/xla_step_identity.py),
at ~255 µs a call against ~575 for the whole-chain loop's ``advance`` with n = 1 it replaced
(benchmarks/RESULTS.md, round 6 session 10). Its minibatch comes from a block of the loop's
capacity gathered ahead (the next block on the feed's thread), so a step costs a compiled call,
not a gather and a block's conversion.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from ..data.pipeline import iteration_of
from ..errors import DivergenceError
from ..graph_options import bound_once, package_call_options
from .compiled import CompiledPrograms
from .feeds import ChainFeeds
from .program import ChainState, finite_per_chain
from .variables import ChainVariables, read_now

#: The outcomes :meth:`StepCall.checked_step` returns.
STEPPED, DIVERGED, NOT_IN_BLOCK = 1, 0, -1


class StepCall:
    """``step(state, t, batches) -> (state, estimate)`` (the sampler's one iteration) called on
    ``variables``, one iteration at a time, its minibatches from ``feeds``' chain feed."""

    def __init__(self, method: str, step: Callable, variables: ChainVariables, feeds: ChainFeeds,
                 programs: CompiledPrograms):
        self.method = method
        self._step = step
        self._variables = variables
        self._feeds = feeds
        self._programs = programs
        self._call = None  # the concrete program, its arguments bound once (graph_options.bound_once)
        self.concrete_function = None
        self._held = None  # (feed, its calls then, block, the block's first iteration)

    def checked_step(self, block, first) -> tf.Tensor:
        """One iteration reading its minibatch from ``block``, whose first iteration is
        ``first``; the state is written only if it and the log-posterior estimate are finite (so a
        divergence leaves the last finite state in place). Returns :data:`STEPPED`,
        :data:`DIVERGED` (nothing written) or :data:`NOT_IN_BLOCK` (the current iteration is not in
        the block: nothing done). The place in the block comes from the counter inside the
        program, so a step reads no variable on the host."""
        state = self._variables.read()
        offset = state.t - first
        inside = tf.logical_and(offset >= 0, offset < self._feeds.get("chain").capacity)

        def step() -> tf.Tensor:
            t = state.t + 1
            (params, aux), est = self._step((state.params, state.aux), t, iteration_of(block, tf.maximum(offset, 0)))

            def write() -> tf.Tensor:
                self._variables.write(ChainState(params, aux, t, est.log_post))
                return tf.constant(STEPPED, tf.int32)

            finite = tf.reduce_all(finite_per_chain(params, est.log_post))
            return tf.cond(finite, write, lambda: tf.constant(DIVERGED, tf.int32))

        return tf.cond(inside, step, lambda: tf.constant(NOT_IN_BLOCK, tf.int32))

    def _run(self, block, first) -> int:
        if self._call is None:  # the first call compiles it (XLA may fall back to graph mode)
            status = self._programs.call("step", self.checked_step, block, first)
            self.concrete_function = self._programs.function("step", self.checked_step).get_concrete_function(block, first)
            self._call = bound_once(self.concrete_function)
            return int(status)
        return int(self._call(block, first))

    def forget_program(self) -> None:
        """Drop the concrete program (XLA fell back to graph mode: every program is made again)."""
        self._call = self.concrete_function = None

    def forget_block(self) -> None:
        """Drop the held block (its feed's buffers were freed, or a stream restarted)."""
        self._held = None

    def _block(self, refill: bool = False) -> tuple[dict, tf.Tensor]:
        """The held block and its first iteration. Gathered again when its feed served anyone
        else since (a whole-chain run reuses the feed's buffers) or, with ``refill``, at the
        current iteration (the step found it outside the block: a restore, a reset or a run)."""
        feed = self._feeds.get("chain")
        held = self._held
        if refill or held is None or held[0] is not feed or held[1] != feed.calls:
            t = int(read_now(self._variables.iteration))
            block = feed.block(t, feed.capacity, prefetch=(t + feed.capacity, feed.capacity))
            held = self._held = (feed, feed.calls, block, tf.constant(t, tf.int64))
        return held[2], held[3]

    def __call__(self) -> None:
        """One iteration; raises :class:`~sgmcmc.DivergenceError` (the state left at the last
        finite one) if it made a NaN or Inf."""
        with package_call_options():
            status = self._run(*self._block())
            if status == NOT_IN_BLOCK:
                status = self._run(*self._block(refill=True))
        if status == STEPPED:
            return
        it = int(read_now(self._variables.iteration))
        if status == NOT_IN_BLOCK:
            raise RuntimeError(f"{self.method}: the step API's block does not hold iteration {it}")
        raise DivergenceError(
            f"{self.method} diverged at iteration {it + 1}: the log-posterior estimate or a "
            f"parameter became NaN or Inf; try a smaller stepsize. sampler.params still holds the state "
            f"after iteration {it}",
            iteration=it + 1,
        )
