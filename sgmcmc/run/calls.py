"""The whole-chain API's compiled calls: the variables read, a chain program run, written back.

One loop over iterations (:func:`~sgmcmc.run.program.run`) serves burn-in and sampling at every
thinning: each call runs the iterations of one block (:mod:`sgmcmc.run.feeds`) and keeps the last
state of each group of ``thin`` and the estimate made at each group's first state. Under XLA a
call stores into a fixed number of slots (:data:`XLA_MAX_GROUPS`, within
:data:`XLA_BUFFER_BYTES`), so every chunk length shares one compiled program. Graph mode's
burn-in runs :func:`~sgmcmc.run.program.advance`, a loop without the storage's writes, and so
does OSGLD's automatic burn-in, which stops when the kernel's ``ready`` holds. A run that ends
on a kept sample stores the estimate its next iteration would make (:meth:`WholeChainCalls.estimate_for_storage`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

from ..data.pipeline import iteration_of
from ..graph_options import own_function, package_call_options
from ..step.contract import Estimate, Minibatches
from ..step.random import ChainRandom
from . import program
from .compiled import CompiledPrograms
from .feeds import ChainFeeds, run_blocks
from .variables import ChainVariables, nbytes, read_now

#: Kept groups one XLA-compiled sampling call can hold: XLA needs a TensorArray's size at compile
#: time, so the call stores into this many slots (bounded by :data:`XLA_BUFFER_BYTES` too) and
#: every chunk length shares one compiled program.
XLA_MAX_GROUPS = 4096
XLA_BUFFER_BYTES = 16 * 2**20
#: Limits of the end-of-run estimate by one more sampling group (:meth:`WholeChainCalls.estimate_for_storage`):
#: the state copied and put back, and the group's iterations, at most these.
STORAGE_SNAPSHOT_BYTES = 64 * 2**20
STORAGE_GROUP_ITERATIONS = 100


class Keep(NamedTuple):
    """Which iterations a run keeps: ``burn_in + thin, burn_in + 2 thin, …`` (global counter)."""

    burn_in: int
    thin: int

    def count_until(self, t: int) -> int:
        """How many kept iterations are ≤ ``t``."""
        return max(0, (t - self.burn_in) // self.thin)

    def is_kept(self, t: int) -> bool:
        return t > self.burn_in and (t - self.burn_in) % self.thin == 0

    def to_boundary(self, t: int) -> int:
        """Iterations from ``t`` to the end of burn-in or the next kept iteration (0 if ``t`` is
        on one): sampling chunks start on such a boundary."""
        if t < self.burn_in:
            return self.burn_in - t
        return (-(t - self.burn_in)) % self.thin


class ChunkResult(NamedTuple):
    samples: dict[str, np.ndarray]  # [groups, K, *shape]: the state at the end of each group
    log_posts: np.ndarray | None  # [groups, K]: the estimate at the state each group started from
    grads: dict[str, np.ndarray]  # [groups, K, *shape] or {}
    last_log_post: np.ndarray  # [K]
    done: int  # iterations completed (< n on divergence)
    diverged_at: int  # 0, or the global iteration that produced a non-finite value
    finite_chains: np.ndarray  # [K] bool, at the divergence


class WholeChainCalls:
    """``step(state, t, batches) -> (state, estimate)`` run on ``variables`` in compiled calls of
    many iterations. ``ready``: the kernel's burn-in criterion (OSGLD), or None. For the end-of-run
    estimate: the chains' ``estimator``, the storage stream ``storage_rng``, and
    ``state_variables()``, every variable the chain's future depends on (put back after it)."""

    def __init__(self, step: Callable, variables: ChainVariables, feeds: ChainFeeds, programs: CompiledPrograms,
                 ready: Callable | None, estimator: Callable, storage_rng: ChainRandom,
                 state_variables: Callable[[], list]):
        self._step = step
        self._estimator = estimator
        self._storage_rng = storage_rng
        self._state_variables = state_variables
        self.storage_program = None  # the estimate's separate program, made on first use
        self._variables = variables
        self._feeds = feeds
        self._programs = programs
        self._ready = ready

    def ready(self) -> np.ndarray:
        """``[K]`` bools: the kernel's ``ready(aux)`` at the current state (all True for a kernel
        without one, or before the auxiliary state exists)."""
        if self._variables.aux is None or self._ready is None:
            return np.ones(self._variables.n_chains, bool)
        return np.asarray(self._ready(self._variables.read_aux()))

    def bytes_per_kept(self, store_gradients: bool = False) -> int:
        """Bytes one kept group adds to a sampling call's output, all chains: the state, its
        gradient if stored, and the log-posterior estimate."""
        per_chain = self._variables.bytes_per_chain() * (2 if store_gradients else 1) + self._variables.dtype.size
        return per_chain * self._variables.n_chains

    def max_groups_per_call(self, store_gradients: bool = False) -> int | None:
        """The most kept groups one :meth:`sample_groups` call may hold: under XLA its fixed
        storage (:data:`XLA_MAX_GROUPS` slots within :data:`XLA_BUFFER_BYTES`), else None."""
        if not self._programs.jit_compile:
            return None
        return max(1, min(XLA_MAX_GROUPS, XLA_BUFFER_BYTES // self.bytes_per_kept(store_gradients)))

    def advance(self, n: int, store_gradients: bool = False, until_ready: bool = False) -> ChunkResult:
        """``n`` iterations, nothing kept. Under XLA the whole-chain program of
        :meth:`sample_groups` with no group, so burn-in and sampling share one compilation
        (``store_gradients``: that of the sampling calls that store gradients); in graph mode,
        which compiles nothing, a loop without the storage's writes (they made a graph-mode
        iteration ~20 % slower: 351–358 against 417–432 µs, 4 chains of a 5-parameter logistic
        regression; RESULTS.md, round 6 session 9). ``until_ready``: also stop after the iteration
        at which ``ready(aux)`` holds for every chain (``done`` says how many ran)."""
        if self._programs.jit_compile and not until_ready:
            return self._run_groups(n, 0, 1, store_gradients)
        return self.advance_loop(n, until_ready)

    def advance_loop(self, n: int, until_ready: bool = False) -> ChunkResult:
        """:meth:`advance` by :func:`~sgmcmc.run.program.advance` in either mode (compiled as
        ``"advance"`` or ``"advance_until_ready"``)."""
        key = "advance_until_ready" if until_ready else "advance"
        ready = self._ready if until_ready else None
        feed = self._feeds.get("chain")

        def advance(n, block):
            state, done, diverged_at = program.advance(self._step, self._variables.read(), n, block, ready)
            self._variables.write(state)
            return done, diverged_at, state.log_post

        def call(m, block):
            return self._programs.call(key, advance, tf.constant(m, tf.int64), block)

        results = run_blocks(n, feed, feed.capacity, call, self._iteration())
        done = sum(int(r[0]) for r in results)
        return self._result({}, None, {}, results[-1][2], done, results[-1][1])

    def sample_groups(self, groups: int, thin: int, store_gradients: bool = False) -> ChunkResult:
        """``groups × thin`` iterations from a thinning boundary, keeping the last state of each
        group of ``thin`` and the estimate made at each group's first state. Under XLA
        ``groups`` is at most :meth:`max_groups_per_call`."""
        capacity = self.max_groups_per_call(store_gradients)
        if capacity is not None and groups > capacity:
            raise ValueError(f"{groups} groups in one XLA call; at most {capacity} (max_groups_per_call)")
        return self._run_groups(groups * thin, groups, thin, store_gradients)

    def _iteration(self) -> int:
        return int(read_now(self._variables.iteration))

    def _run_groups(self, n: int, groups: int, thin: int, store_gradients: bool) -> ChunkResult:
        """``n`` iterations with nothing kept (``groups`` = 0), or ``groups`` groups of ``thin``
        (n = groups × thin), as calls of the whole-chain program, one block each. Its key does
        not hold ``thin``: under XLA the storage has a slot per iteration of a block (at most
        :meth:`max_groups_per_call`), whatever the thinning."""
        feed = self._feeds.for_sampling(thin)
        per_call = (feed.capacity // thin) * thin
        capacity = self.max_groups_per_call(store_gradients)
        storage = None if capacity is None else min(capacity, feed.capacity)
        key = ("chunk", bool(store_gradients), storage, feed.capacity)

        def run(n, g, th, block):
            state, kept, done, diverged_at = program.run(
                self._step, self._variables.read(), n, g, th, block, bool(store_gradients), storage
            )
            self._variables.write(state)
            return kept.samples, kept.log_posts, kept.grads, state.log_post, done, diverged_at

        def call(m, block):
            g = m // thin if groups else 0
            samples, log_posts, grads, last, done, diverged_at = self._programs.call(
                key, run, tf.constant(m, tf.int64), tf.constant(g, tf.int64), tf.constant(thin, tf.int64), block
            )
            return done, diverged_at, last, g, samples, log_posts, grads

        results = run_blocks(n, feed, per_call if groups else feed.capacity, call, self._iteration())
        parts = [
            self._result(samples, log_posts, grads, last, done, diverged_at)
            for done, diverged_at, last, g, samples, log_posts, grads in results
        ]
        sizes = [r[3] for r in results]
        return parts[-1]._replace(  # XLA's storage has `storage` slots: keep the groups asked for
            samples={name: np.concatenate([p.samples[name][:g] for p, g in zip(parts, sizes)]) for name in parts[0].samples},
            log_posts=np.concatenate([p.log_posts[:g] for p, g in zip(parts, sizes)]),
            grads={name: np.concatenate([p.grads[name][:g] for p, g in zip(parts, sizes)]) for name in parts[0].grads},
            done=sum(p.done for p in parts),
        )

    def _result(self, samples, log_posts, grads, last, done, diverged_at) -> ChunkResult:
        last = last.numpy()
        at = int(diverged_at)
        # At a divergence the chains that broke are those whose log-posterior estimate is not
        # finite (the state the failing iteration made is not kept).
        finite = np.isfinite(last) if at else np.ones(self._variables.n_chains, bool)
        return ChunkResult(
            {name: s.numpy() for name, s in samples.items()},
            None if log_posts is None else log_posts.numpy(),
            {name: g.numpy() for name, g in grads.items()},
            last,
            int(done),
            at,
            finite,
        )

    def estimate_for_storage(self, thin: int, store_gradients: bool) -> Estimate:
        """The estimator's estimate at the current state, for a kept sample whose next iteration
        has not run (the end of a run).

        ``thin`` is the run's (the current iteration on a thinning boundary). One more group
        of the run's own sampling program, whose first iteration makes exactly the estimate a
        continuing run would store; then every state variable is put back (``state_variables``), so
        the chain is as before. No new program: a separate one, traced and compiled for this
        single estimate, cost 0.15-0.45 s of a fresh sampler's 1-3 s first call (benchmarks/
        RESULTS.md, round 5 session 6). Used when the copy of the state is at most
        :data:`STORAGE_SNAPSHOT_BYTES` and a group is at most :data:`STORAGE_GROUP_ITERATIONS`.

        Otherwise: a separate program on the storage stream (the chain's
        own random stream untouched, and the estimator's state: an estimator with state has a
        ``for_storage`` method that changes none, SVRG's anchor, SAGA's table). ``t`` is the
        next iteration's."""
        variables = self._state_variables()
        if thin <= STORAGE_GROUP_ITERATIONS and nbytes(variables) <= STORAGE_SNAPSHOT_BYTES:
            saved = [v.read_value() for v in variables]
            try:
                group = self.sample_groups(1, thin, store_gradients)
            finally:
                for v, value in zip(variables, saved):
                    v.assign(value)
            return Estimate(group.log_posts[0], {k: g[0] for k, g in group.grads.items()})
        if self.storage_program is None:
            evaluate = getattr(self._estimator, "for_storage", self._estimator)

            @own_function
            def estimate(block):
                t = self._variables.iteration.read_value() + 1
                self._storage_rng.begin(t)
                minibatch = Minibatches(iteration_of(block, 0)).next()
                return evaluate(self._variables.read_params(), minibatch, self._storage_rng, t)

            self.storage_program = estimate
        block = self._feeds.get("storage").block(self._iteration(), 1)
        with package_call_options():
            est = self.storage_program(block)
        return Estimate(est.log_post.numpy(), {k: g.numpy() for k, g in est.grads.items()})
