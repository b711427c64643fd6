"""The sampler object: chain state in variables, and the one compiled step both APIs share.

``Sampler._step`` is the only place one iteration is written. The whole-chain API traces it
once, inside one loop (:meth:`Sampler._run_chunk`, called by :meth:`Sampler.advance` for
iterations kept by nobody and by :meth:`Sampler.sample_groups` for groups of ``thin`` iterations
ending in a kept one: many iterations per call, kept values written to ``TensorArray`` s); the
step-by-step API runs one iteration (:meth:`Sampler.step`). Both pass the same global iteration
``t`` to the same counter-based draws (:class:`~sgmcmc.step.random.ChainRandom`: Philox keyed by
the seed and stream, counter (chain, t, call)) and read the same minibatch rows (a function of
(seed, stream, chain, t), :mod:`sgmcmc.data.minibatch`; from a ``tf.data`` pipeline, its
elements in order, :mod:`sgmcmc.data.stream`), so the same seed gives the same chain.

K chains are stepped together: every state tensor has a leading chain axis (see
:mod:`sgmcmc.step.dynamics.base`). ``sampler.params`` holds the user's layout: the parameter's shape
for one chain (R), ``[K, *shape]`` for several.

With ``constraints`` the sampler is built on the unconstrained scale (starts, wrapped
``log_lik``/``log_prior``, :mod:`sgmcmc.constraints`): its state, ``shapes`` and stored
gradients are unconstrained, and only :meth:`Sampler.get_params` and the returned samples map
back to the constrained scale.

Compilation mode (:attr:`Sampler.jit_compile`): XLA (``tf.function(jit_compile=True)``) by
default, except SAGA and OSGLD, which XLA slows down (10× and 5×), the count models (not
measured) and ``tune_stepsize``'s short candidate runs (``GRAPH_MODE_ITERATIONS``);
``SGMCMC_XLA=0``/``1`` in the environment forces graph mode / XLA. The minibatches
arrive as blocks gathered on the host (:mod:`sgmcmc.data.pipeline`), so the loop has no sampler of its
own and XLA fuses the iteration (benchmarks/bench_modes.py: XLA at least as fast as graph mode
for every minibatch kind and chain count measured). The step API calls a program of one step
(:meth:`Sampler._checked_step`) in either mode: since XLA's code is capped at AVX (no FMA
contraction, :mod:`sgmcmc._xla_flags`) it gives the whole-chain program's bits
(tests/test_step_api.py, benchmarks/xla_step_identity.py); Grappler's rewrites are off for
both (:mod:`sgmcmc.graph_options`). A model XLA cannot compile (an op with no XLA kernel, e.g. ``tf.print``) falls back to graph mode at the
first call, with a :class:`~sgmcmc.CompilationWarning`. XLA clamps out-of-range ``tf.gather``
indices where graph mode raises.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops
from tqdm.auto import tqdm

from ..step.contract import BoundEstimator, Estimate, Minibatches
from ..errors import CompilationWarning, DivergenceError, NotInitialisedError
from ..step.estimators import MinibatchGradient
from ..step.estimators.assemble import Estimators
from ..distribute.placement import RowShard
from ..graph_options import bound_once, own_function, package_call_options
from ..data.minibatch import CHAIN_STREAM, MODE_SEARCH_STREAM, STORAGE_STREAM, MinibatchIndices
from ..data.pipeline import BlockFeed, iteration_of, iterations_per_block
from ..data.stream import BatchStream, StreamFeed, StreamReader
from ..step.random import ChainRandom
from ..data.rows import Rows
from . import program
from .program import ChainState, finite_per_chain

#: Kept groups one XLA-compiled sampling call can hold: XLA needs a TensorArray's size at compile
#: time, so the call stores into this many slots (bounded by :data:`XLA_BUFFER_BYTES` too) and
#: every chunk length shares one compiled program.
XLA_MAX_GROUPS = 4096
XLA_BUFFER_BYTES = 16 * 2**20
#: Limits of the end-of-run estimate by one more sampling group (:meth:`Sampler.estimate_for_storage`):
#: the state copied and put back, and the group's iterations, at most these.
STORAGE_SNAPSHOT_BYTES = 64 * 2**20
STORAGE_GROUP_ITERATIONS = 100


def default_jit_compile(xla_by_default: bool) -> bool:
    """``xla_by_default`` (where XLA measured faster: ``sgmcmc.api.build``) unless the environment
    says ``SGMCMC_XLA=0`` (graph) or ``1`` (XLA) (module docstring)."""
    value = os.environ.get("SGMCMC_XLA", "auto").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    if value not in ("", "auto"):
        raise ValueError(f"SGMCMC_XLA={value!r}: use 0 (graph mode), 1 (XLA) or auto (the default)")
    return xla_by_default


def read_now(variable: tf.Variable) -> np.ndarray:
    """A plain variable's value as a new numpy array, by one eager ``ReadVariableOp``.

    ``variable.numpy()`` also runs an ``Identity`` op and the tape's and the distribution
    strategy's bookkeeping: 4–5× the cost (benchmarks/bench_step.py: what ``get_params`` costs
    per parameter in a user's step loop). A strategy's variable takes the usual path."""
    if type(variable) is not resource_variable_ops.ResourceVariable:
        return np.array(variable.numpy())
    return np.array(gen_resource_variable_ops.read_variable_op(variable.handle, variable.dtype))


@dataclass(frozen=True)
class ControlVariateSettings:
    """What the control-variate samplers add: the mode search before sampling."""

    opt_stepsize: dict[str, float]
    n_iters_opt: int
    verbose: bool


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


def _check_minibatches_taken(minibatches: Minibatches, batches: dict | None, method: str) -> None:
    """At trace time: the kernel used every minibatch its ``minibatches_per_iteration`` announced
    (a kernel that takes fewer would leave rows drawn for nothing, and its chain would change if
    the count were corrected)."""
    if batches is not None and minibatches.taken != batches["indices"].shape[0]:
        raise RuntimeError(
            f"{method}: the kernel used {minibatches.taken} minibatches in an iteration but announced "
            f"{batches['indices'].shape[0]} (minibatches_per_iteration)"
        )


@dataclass
class ModeSearchStream:
    """What the control variate's SGD mode search (:mod:`sgmcmc.run.mode_search`) keeps between
    its calls: its noise stream (one chain), the search steps taken so far, and its compiled
    program (made on first use)."""

    rng: ChainRandom
    iteration: int = 0
    program: Any = None


class Sampler:
    """One or more SG-MCMC chains: what ``*_setup`` returns.

    Attributes
    ----------
    params : dict[str, tf.Variable]
        The current state, ``shape`` per parameter for one chain, ``(n_chains, *shape)`` for
        several. User code may read it (e.g. a test-set log-loss) after every step. With
        ``constraints`` these are the UNconstrained values ξ the chain moves;
        :meth:`get_params` gives the constrained θ = b(ξ).
    constraints : sgmcmc.constraints.Constrained or None
        The bijectors and shapes when the sampler was set up with ``constraints``.
    method : str
        ``"sgld"``, ``"sghmccv"``, …
    seed : int
        The seed in use (drawn at random when none was given).
    n_chains : int
    iteration : int
        Iterations run since :func:`sgmcmc.init_sess` (the global counter burn-in and thinning
        count on).
    jit_compile : bool
        Whether the chain runs as XLA programs (see the module docstring); becomes False if XLA
        cannot compile the model.
    """

    def __init__(
        self,
        method: str,
        kernel,
        estimators: Estimators,
        dataset: dict[str, np.ndarray],
        starts: list[dict[str, np.ndarray]],
        batch_size: int,
        seed: int | None,
        dtype: tf.DType,
        control_variate: ControlVariateSettings | None = None,
        *,
        starts_given_per_chain: bool = False,
        settings: dict | None = None,
        constraints=None,
        minibatch_replace: bool = False,
        xla_by_default: bool = False,
        chains: list[int] | None = None,
        shard: RowShard | None = None,
        mode_start: dict[str, np.ndarray] | None = None,
        stepsize_check: bool = True,
        rows: Rows | BatchStream,
    ):
        """``estimators``: what the iterations and the full-data passes call, made before the
        sampler (:func:`sgmcmc.step.estimators.assemble.assemble_estimators`).
        ``minibatch_replace``: minibatch rows i.i.d. with replacement.
        ``xla_by_default``: the compilation mode when ``SGMCMC_XLA`` does not force one.
        ``chains``: the global indices of the chains this sampler steps (default 0 … K − 1; a
        replica's share under a strategy, :mod:`sgmcmc.distribute.placement`). ``shard``: this
        worker's part when the rows are sharded across workers (``dataset`` is then its rows,
        ``batch_size`` its n_w; every gradient evaluation is all-reduced). ``mode_start``: where
        the CV mode search starts (default ``starts[0]``; chain 0's start when ``starts`` are
        another replica's share). ``stepsize_check``: check the stepsize against the curvature
        before sampling (:mod:`sgmcmc.stability.check`). ``rows``: ``dataset`` as
        :class:`~sgmcmc.data.rows.Rows` in ``dtype`` (the estimators' own), or the user's
        ``tf.data`` pipeline as a :class:`~sgmcmc.data.stream.BatchStream` (``dataset`` is then
        empty; the minibatches are its elements, :mod:`sgmcmc.data.stream`)."""
        self.method = method
        #: Whether init_sess checks the stepsize before sampling (:mod:`sgmcmc.stability.check`).
        self.stepsize_check = bool(stepsize_check)
        #: A model with no gradient (the count models of scir/sgrld): ``store_gradients`` is refused.
        self.uses_no_gradient = estimators.plain is None
        self.kernel = kernel
        self.dtype = dtype
        self.seed = int(seed) if seed is not None else secrets.randbits(63)
        self.batch_size = batch_size
        self.n_chains = len(starts)
        self.n_rows = int(rows.n_rows)
        self.control_variate = control_variate
        self.settings = dict(settings or {})
        self.constraints = constraints  # starts and functions are already unconstrained (api.build)
        self.shapes = {k: tuple(np.shape(v)) for k, v in starts[0].items()}
        self._starts = starts
        self._mode_start = starts[0] if mode_start is None else mode_start
        self._starts_given_per_chain = starts_given_per_chain
        self.chain_ids = list(range(self.n_chains)) if chains is None else [int(c) for c in chains]
        if len(self.chain_ids) != self.n_chains:
            raise ValueError(f"{len(self.chain_ids)} chain indices for {self.n_chains} starts")
        self.shard = shard
        self._make_random_streams()
        self.params = {k: tf.Variable(self._user_layout(k, starts), name=k) for k in self.shapes}
        self._iteration = tf.Variable(0, dtype=tf.int64, name="iteration")
        self._seed_variable = tf.Variable(self.seed, dtype=tf.int64, trainable=False, name="seed")
        self._last_log_post = tf.Variable(tf.zeros([self.n_chains], dtype), name="log_posterior")
        # The rows are read where they are (sgmcmc.data.rows): the estimators get the entries, and the
        # minibatches reach the compiled loop as blocks gathered ahead (sgmcmc.data.pipeline).
        self.rows = rows
        per_iteration = int(getattr(kernel, "minibatches_per_iteration", 1))
        self._minibatches = MinibatchIndices(self.n_rows, batch_size, minibatch_replace, per_iteration)
        self._feeds: dict = {}
        self._reader: StreamReader | None = None  # a tf.data pipeline's iterator (feed)
        self._plain = estimators.plain
        self.estimator = estimators.chain
        #: The plain estimator for one chain: the mode search and the full-data passes (CV only).
        self.one_chain_estimator = estimators.one_chain
        self._aux: dict | None = None
        self.initialised = False
        self._jit_compile = False
        self.jit_compile = default_jit_compile(xla_by_default)
        self._xla_ran: set = set()  # compiled functions XLA has compiled and run once
        self._compiled_step = None  # the step API's call (_make_step)
        self._step_function = None  # the concrete function it runs
        self._functions: dict = {}
        self._estimate_for_storage = None
        self._held_step_block = None  # the step API's block: (feed, its calls then, block, its first iteration)

    def _make_random_streams(self) -> None:
        """The noise streams of :attr:`seed` (the minibatch streams are made from it by ``feed``)."""
        self.rng = ChainRandom(self.seed, CHAIN_STREAM, self.dtype, self.n_chains, self.chain_ids)
        self._storage_rng = ChainRandom(self.seed, STORAGE_STREAM, self.dtype, self.n_chains, self.chain_ids)
        #: The CV mode search's own stream, counter and program (:mod:`sgmcmc.run.mode_search`).
        self.mode_search = ModeSearchStream(ChainRandom(self.seed, MODE_SEARCH_STREAM, self.dtype, 1))

    def _adopt_seed(self, seed: int) -> None:
        """Continue the streams of ``seed`` (a restored state's, or a reused sampler's new one):
        every draw is a function of the seed and the iteration. The compiled functions read the
        noise streams' keys from variables when they run, so they stay; the minibatch feeds,
        which draw on the host, are made again on their next use."""
        if seed == self.seed:
            return
        self.seed = int(seed)
        for rng in (self.rng, self._storage_rng, self.mode_search.rng):
            rng.reseed(self.seed)
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()

    def start_again(
        self,
        starts: list[dict[str, np.ndarray]],
        seed: int | None,
        *,
        starts_given_per_chain: bool,
        mode_start: dict[str, np.ndarray] | None,
        stepsize_check: bool,
        verbose: bool,
        settings: dict,
    ) -> None:
        """Become the sampler a new set-up with these starts and seed would make, keeping the
        compiled functions: the whole-chain call that reuses this sampler (:mod:`sgmcmc.api.reuse`,
        same model, shapes and settings) then prepares it with :func:`~sgmcmc.init_sess`, which
        resets every state variable from the starts. Nothing compiled holds a start or the seed."""
        shapes = {k: tuple(np.shape(v)) for k, v in starts[0].items()}
        if shapes != self.shapes or len(starts) != self.n_chains:
            raise ValueError(f"start_again needs {self.n_chains} starts of shapes {self.shapes}, got {len(starts)} of {shapes}")
        self._starts = starts
        self._mode_start = starts[0] if mode_start is None else mode_start
        self._starts_given_per_chain = bool(starts_given_per_chain)
        if self.control_variate is not None:
            self.estimator.mode_start = self._mode_start
            self.control_variate = dataclasses.replace(self.control_variate, verbose=verbose)
        self.stepsize_check = bool(stepsize_check)
        self.settings = dict(settings)  # the earlier runs' samples keep their own
        self._adopt_seed(int(seed) if seed is not None else secrets.randbits(63))
        self.initialised = False

    def release_buffers(self) -> None:
        """Free the minibatch feeds' block buffers (made again on next use): for a sampler kept
        between whole-chain calls (:mod:`sgmcmc.api.reuse`), which would otherwise hold up to
        two blocks per feed."""
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()
        self._held_step_block = None
        if self._reader is not None:
            self._reader.close()

    def state_bytes(self) -> int:
        """Bytes of the variables a checkpoint holds (:meth:`_state`): the parameters, the
        kernel's state, the estimator's (CV mode and anchor, SVRG anchors, SAGA's table)."""
        return sum(int(np.prod(v.shape)) * v.dtype.size for v in tf.nest.flatten(self._state()))

    @property
    def jit_compile(self) -> bool:
        return self._jit_compile

    @jit_compile.setter
    def jit_compile(self, value: bool) -> None:
        """The compilation mode of every compiled function of this sampler."""
        self._jit_compile = bool(value)

    # -- layout -----------------------------------------------------------------------------
    def _user_layout(self, name: str, starts: list[dict[str, np.ndarray]]) -> np.ndarray:
        if self.n_chains == 1:
            return starts[0][name]
        return np.stack([s[name] for s in starts])

    def _read_params(self) -> dict[str, tf.Tensor]:
        """The state with the chain axis, ``[K, *shape]``."""
        if self.n_chains == 1:
            return {k: v.read_value()[None] for k, v in self.params.items()}
        return {k: v.read_value() for k, v in self.params.items()}

    def _write_params(self, params: dict[str, tf.Tensor]) -> None:
        for k, v in self.params.items():
            v.assign(params[k][0] if self.n_chains == 1 else params[k])

    def _read_state(self):
        return self._read_params(), tf.nest.map_structure(lambda v: v.read_value(), self._aux)

    def _write_state(self, state) -> None:
        params, aux = state
        self._write_params(params)
        tf.nest.map_structure(lambda var, value: var.assign(value), self._aux, aux)

    # -- one iteration -------------------------------------------------------------------
    def _step(self, state, t: tf.Tensor, batches: dict):
        """One iteration of the chains, a pure function of the state ``(params, aux)``, the
        global iteration ``t`` and its minibatches ``batches`` (one iteration of a block,
        :mod:`sgmcmc.data.pipeline`): returns the new state and the estimate made at the state it
        started from."""
        params, aux = state
        self.rng.begin(t)
        minibatches = Minibatches(batches)
        estimate = BoundEstimator(self.estimator, minibatches, self.rng, t)
        new_params, new_aux, est = self.kernel.one_step(params, aux, estimate, self.rng, t)
        _check_minibatches_taken(minibatches, batches, self.method)
        return (new_params, new_aux), est

    def _read_chain_state(self) -> ChainState:
        params, aux = self._read_state()
        return ChainState(params, aux, self._iteration.read_value(), self._last_log_post.read_value())

    def _write_chain_state(self, state: ChainState) -> None:
        self._write_state((state.params, state.aux))
        self._iteration.assign(state.t)
        self._last_log_post.assign(state.log_post)

    # -- compiled entry points: the variables read, a chain program (run/program.py), written back
    def _advance_chunk(self, n, block, offset, until_ready: bool = False):
        """``n`` iterations from the current one, the first reading ``block[offset]``, nothing
        kept (:func:`~sgmcmc.run.program.advance`): the step API's program, and graph mode's
        burn-in; ``until_ready``: OSGLD's automatic burn-in."""
        ready = self.kernel.ready if until_ready else None
        state, done, diverged_at = program.advance(self._step, self._read_chain_state(), n, block, offset, ready)
        self._write_chain_state(state)
        return done, diverged_at, state.log_post

    def _run_chunk(self, n, groups, thin, block, store_gradients: bool, capacity: int | None = None):
        """The whole-chain program (:func:`~sgmcmc.run.program.run`): ``n`` iterations, kept in
        ``groups`` groups of ``thin`` (none: burn-in)."""
        state, kept, done, diverged_at = program.run(
            self._step, self._read_chain_state(), n, groups, thin, block, store_gradients, capacity
        )
        self._write_chain_state(state)
        return kept.samples, kept.log_posts, kept.grads, state.log_post, done, diverged_at

    def _compiled(self, key, make):
        if key not in self._functions:
            self._functions[key] = own_function(make, jit_compile=self.jit_compile or None)
        return self._functions[key]

    def _call(self, key, make, *args):
        """Call the compiled function ``key`` (made by ``make`` on first use) with Grappler's
        rewrites off. Under XLA, an error at a function's first call — before any of its ops
        has run, as XLA compiles the whole function first — switches this sampler to graph mode
        for good (every function, so both APIs stay in one mode) and retries once; an error
        that graph mode raises too is the model's own and propagates."""
        with package_call_options():
            if not self.jit_compile or key in self._xla_ran:
                return self._compiled(key, make)(*args)
            try:
                result = self._compiled(key, make)(*args)
            except tf.errors.OpError as error:
                self.jit_compile = False
                self._functions.clear()
                self._compiled_step = self._step_function = None
                result = self._compiled(key, make)(*args)
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                warnings.warn(
                    f"{self.method}: XLA could not compile this model ({reason[:300]}); the chain runs in "
                    f"TensorFlow's graph mode instead (the same algorithm, slower per iteration). "
                    f"SGMCMC_XLA=0 selects graph mode from the start.",
                    CompilationWarning,
                    stacklevel=3,
                )
                return result
            self._xla_ran.add(key)
            return result

    def bytes_per_kept(self, store_gradients: bool = False) -> int:
        """Bytes one kept group adds to a sampling call's output, all chains: the state, its
        gradient if stored, and the log-posterior estimate."""
        per_chain = sum(int(np.prod(s)) for s in self.shapes.values()) * (2 if store_gradients else 1) + 1
        return per_chain * self.n_chains * self.dtype.size

    def max_groups_per_call(self, store_gradients: bool = False) -> int | None:
        """The most kept groups one :meth:`sample_groups` call may hold: under XLA its fixed
        storage (:data:`XLA_MAX_GROUPS` slots within :data:`XLA_BUFFER_BYTES`), else None."""
        if not self.jit_compile:
            return None
        return max(1, min(XLA_MAX_GROUPS, XLA_BUFFER_BYTES // self.bytes_per_kept(store_gradients)))

    def feed(self, kind: str = "chain", capacity: int | None = None) -> BlockFeed:
        """The block feed (:mod:`sgmcmc.data.pipeline`) of the chains' own minibatches (``"chain"``),
        of the storage stream (``"storage"``, one iteration) or of the mode search (``"mode"``,
        one chain); ``capacity`` overrides the iterations per block."""
        key = (kind, capacity)
        if key not in self._feeds and isinstance(self.rows, BatchStream):
            self._feeds[key] = self._stream_feed(kind, capacity)
        if key not in self._feeds:
            if kind == "chain":
                indices, chains, stream = self._minibatches, self.chain_ids, CHAIN_STREAM
            else:
                indices = MinibatchIndices(self.n_rows, self.batch_size, self._minibatches.replace, 1)
                chains = [0] if kind == "mode" else self.chain_ids
                stream = MODE_SEARCH_STREAM if kind == "mode" else STORAGE_STREAM
                capacity = 1 if kind == "storage" else capacity
            if self.shard is not None:  # each worker draws from its own rows, on its own stream
                stream += self.shard.stream_offset
            if capacity is None:  # with rows sharded: from the total n, the same on every worker
                sizing = indices if self.shard is None else MinibatchIndices(
                    self.shard.n_rows, self.shard.batch_size, indices.replace, indices.per_iteration
                )
                capacity = iterations_per_block(sizing, len(chains), self.rows.row_bytes)
            self._feeds[key] = BlockFeed(self.rows, indices, self.seed, stream, chains, capacity)
        return self._feeds[key]

    def _stream_feed(self, kind: str, capacity: int | None) -> StreamFeed:
        """A feed of the user's ``tf.data`` pipeline (:mod:`sgmcmc.data.stream`): every kind
        reads the chains' own elements through one reader, so the storage estimate at a run's
        end is made on the minibatch of the iteration that follows, as a continuing run makes it."""
        if kind == "mode":
            raise RuntimeError("a tf.data dataset has no mode search (the control variate is refused at set-up)")
        if self._reader is None:
            self._reader = StreamReader(self.rows, self._minibatches.per_iteration, self.n_chains)
        if capacity is None:  # as for arrays: the same compiled programs
            capacity = iterations_per_block(self._minibatches, self.n_chains, self.rows.row_bytes)
        capacity = 1 if kind == "storage" else capacity
        return StreamFeed(self._reader, self._minibatches, self.chain_ids, capacity)

    def _sampling_feed(self, thin: int) -> BlockFeed:
        """The chains' feed for sampling calls: a block holds at least one group of ``thin``."""
        feed = self.feed("chain")
        return feed if thin <= feed.capacity else self.feed("chain", thin)

    def run_blocks(self, n: int, feed: BlockFeed, per_call: int, call, start: int | None = None) -> list:
        """Run ``n`` iterations from ``start`` (default the chain's current iteration; the mode
        search passes its own counter) as calls of at most ``per_call`` iterations, each given its
        block (the next one gathered meanwhile); ``call(m, block)`` runs m of them and returns
        ``(done, diverged_at, …)``. Stops at a divergence or when a call completes fewer
        iterations than asked (a kernel's ``ready``). Returns every call's result."""
        results, t, remaining = [], self.iteration if start is None else start, n
        while True:
            m = min(remaining, per_call)
            after = min(remaining - m, per_call)
            block = feed.block(t, max(m, 1), prefetch=(t + m, after) if after else None)
            result = call(m, block)
            results.append(result)
            done = int(result[0])
            t, remaining = t + done, remaining - done
            if int(result[1]) or remaining <= 0 or done < m:
                feed.cancel()
                return results

    def advance(self, n: int, store_gradients: bool = False) -> ChunkResult:
        """``n`` iterations in compiled calls, nothing stored (burn-in, or up to the next thinning
        boundary). Under XLA the whole-chain program of :meth:`sample_groups` with no group, so
        burn-in and sampling share one compilation (``store_gradients``: that of the sampling
        calls that store gradients); in graph mode, which compiles nothing, a loop without the
        storage's writes (they made a graph-mode iteration ~20 % slower: 351–358 against
        417–432 µs, 4 chains of a 5-parameter logistic regression; RESULTS.md, round 6 session 9)."""
        self.require_initialised()
        if not self.jit_compile:
            return self._advance(n, until_ready=False)
        return self._run_groups(n, 0, 1, store_gradients)

    def advance_until_ready(self, n: int) -> ChunkResult:
        """Like :meth:`advance`, but the compiled loop also stops after the iteration at which
        the kernel's ``ready(aux)`` (e.g. OSGLD's burn-in criterion) holds for every chain;
        ``done`` says how many iterations ran. The chain is the same as with :meth:`advance`."""
        self.require_initialised()
        if not hasattr(self.kernel, "ready"):
            raise TypeError(f"{self.method}'s kernel has no burn-in criterion (no ready(aux))")
        return self._advance(n, until_ready=True)

    def _advance(self, n: int, until_ready: bool) -> ChunkResult:
        key = "advance_until_ready" if until_ready else "advance"
        feed = self.feed("chain")

        def call(m, block):
            return self._call(
                key, lambda n, block, offset: self._advance_chunk(n, block, offset, until_ready=until_ready),
                tf.constant(m, tf.int64), block, tf.constant(0, tf.int64),
            )

        results = self.run_blocks(n, feed, feed.capacity, call)
        done = sum(int(r[0]) for r in results)
        return self._result({}, None, {}, results[-1][2], done, results[-1][1])

    def ready(self) -> np.ndarray:
        """``[K]`` bools: the kernel's ``ready(aux)`` at the current state (all True for a kernel
        without one)."""
        if self._aux is None or not hasattr(self.kernel, "ready"):
            return np.ones(self.n_chains, bool)
        return np.asarray(self.kernel.ready(tf.nest.map_structure(lambda v: v.read_value(), self._aux)))

    def sample_groups(self, groups: int, thin: int, store_gradients: bool = False) -> ChunkResult:
        """``groups × thin`` iterations in compiled calls from a thinning boundary, keeping the
        last state of each group of ``thin`` and the estimate made at each group's first state.
        Under XLA ``groups`` is at most :meth:`max_groups_per_call`."""
        return self._sample_groups(groups, thin, store_gradients)

    def _sample_groups(self, groups: int, thin: int, store_gradients: bool) -> ChunkResult:
        """:meth:`sample_groups`; also the put-back group of :meth:`estimate_for_storage`, which
        is no iteration of the chain (so not one of the chain's calls)."""
        self.require_initialised()
        capacity = self.max_groups_per_call(store_gradients)
        if capacity is not None and groups > capacity:
            raise ValueError(f"{groups} groups in one XLA call; at most {capacity} (max_groups_per_call)")
        return self._run_groups(groups * thin, groups, thin, store_gradients)

    def _run_groups(self, n: int, groups: int, thin: int, store_gradients: bool) -> ChunkResult:
        """``n`` iterations with nothing kept (``groups`` = 0), or ``groups`` groups of ``thin``
        (n = groups × thin), as calls of the whole-chain program (:meth:`_run_chunk`),
        one block each. Its key does not hold ``thin``: under XLA the storage has a slot per
        iteration of a block (at most :meth:`max_groups_per_call`), whatever the thinning."""
        feed = self._sampling_feed(thin)
        per_call = (feed.capacity // thin) * thin
        capacity = self.max_groups_per_call(store_gradients)
        storage = None if capacity is None else min(capacity, feed.capacity)
        key = ("chunk", bool(store_gradients), storage, feed.capacity)

        def call(m, block):
            g = m // thin if groups else 0
            out = self._call(
                key,
                lambda n, g, th, block: self._run_chunk(n, g, th, block, bool(store_gradients), storage),
                tf.constant(m, tf.int64),
                tf.constant(g, tf.int64),
                tf.constant(thin, tf.int64),
                block,
            )
            samples, log_posts, grads, last, done, diverged_at = out
            return done, diverged_at, last, g, samples, log_posts, grads

        results = self.run_blocks(n, feed, per_call if groups else feed.capacity, call)
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
        if at:
            # Which chains broke: recompute the flags on the state the failing iteration made is
            # not possible any more, so report those whose log-posterior estimate is not finite.
            finite = np.isfinite(last)
        else:
            finite = np.ones(self.n_chains, bool)
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
        continuing run would store; then every state variable is put back (:meth:`_state`), so
        the chain is as before. No new program: a separate one, traced and compiled for this
        single estimate, cost 0.15-0.45 s of a fresh sampler's 1-3 s first call (benchmarks/
        RESULTS.md, round 5 session 6). Used when the copy of the state is at most
        :data:`STORAGE_SNAPSHOT_BYTES` and a group is at most :data:`STORAGE_GROUP_ITERATIONS`.

        Otherwise: a separate program on the storage stream (the chain's
        own random stream untouched, and the estimator's state: an estimator with state has a
        ``for_storage`` method that changes none, SVRG's anchor, SAGA's table). ``t`` is the
        next iteration's."""
        if thin <= STORAGE_GROUP_ITERATIONS and self.state_bytes() <= STORAGE_SNAPSHOT_BYTES:
            variables = tf.nest.flatten(self._state())
            saved = [v.read_value() for v in variables]
            try:
                group = self._sample_groups(1, thin, store_gradients)
            finally:
                for v, value in zip(variables, saved):
                    v.assign(value)
            return Estimate(group.log_posts[0], {k: g[0] for k, g in group.grads.items()})
        if self._estimate_for_storage is None:
            evaluate = getattr(self.estimator, "for_storage", self.estimator)

            @own_function
            def estimate(block):
                t = self._iteration.read_value() + 1
                self._storage_rng.begin(t)
                minibatch = Minibatches(iteration_of(block, 0)).next()
                return evaluate(self._read_params(), minibatch, self._storage_rng, t)

            self._estimate_for_storage = estimate
        block = self.feed("storage").block(self.iteration, 1)
        with package_call_options():
            est = self._estimate_for_storage(block)
        return Estimate(est.log_post.numpy(), {k: g.numpy() for k, g in est.grads.items()})

    def _checked_step(self, block, first) -> tf.Tensor:
        """The step API's step: one iteration reading its minibatch from ``block``, whose first
        iteration is ``first``; the state is written only if it and the log-posterior estimate
        are finite (so a divergence leaves the last finite state in place). Returns 1 (stepped),
        0 (diverged: nothing written) or -1 (the current iteration is not in the block: nothing
        done). The place in the block comes from the iteration counter inside the program, so a
        step reads no variable on the host."""
        t = self._iteration.read_value()
        offset = t - first
        inside = tf.logical_and(offset >= 0, offset < self.feed("chain").capacity)

        def step() -> tf.Tensor:
            state, est = self._step(self._read_state(), t + 1, iteration_of(block, tf.maximum(offset, 0)))
            finite = tf.reduce_all(finite_per_chain(state[0], est.log_post))

            def write() -> tf.Tensor:
                self._write_state(state)
                self._iteration.assign(t + 1)
                self._last_log_post.assign(est.log_post)
                return tf.constant(1, tf.int32)

            return tf.cond(finite, write, lambda: tf.constant(0, tf.int32))

        return tf.cond(inside, step, lambda: tf.constant(-1, tf.int32))

    def _make_step(self):
        """The step API's compiled call ``(block, first) -> status`` (:meth:`_checked_step`),
        compiled on its own: under XLA a call of it costs ~230 µs against ~420 for the loop's
        ``advance`` program with n = 1, with the same bits (benchmarks/RESULTS.md "Round 6,
        session 10"). Its first call compiles it through :meth:`_call` (XLA's fallback to graph
        mode); later calls bind their arguments once (:func:`~sgmcmc.graph_options.bound_once`)."""
        call = None

        def run(block, first) -> int:
            nonlocal call
            if call is None:
                status = self._call("step", self._checked_step, block, first)
                if self._compiled_step is not None:  # None: XLA fell back; the next step remakes it
                    self._step_function = self._compiled("step", self._checked_step).get_concrete_function(block, first)
                    call = bound_once(self._step_function)
                return int(status)
            return int(call(block, first))

        return run

    def _step_block(self, refill: bool = False) -> tuple[dict, tf.Tensor]:
        """The block holding the step API's minibatches and its first iteration. The step API
        gathers a whole block of the loop's capacity at once (the next one on the feed's thread
        meanwhile) and reads one iteration of it per step: a step costs a compiled call, not a
        gather and a block's conversion. The block is gathered again when its feed served anyone
        else since (a whole-chain run reuses the feed's buffers) or, with ``refill``, at the
        current iteration (the step found it outside the block: a restore, a reset, a run)."""
        feed = self.feed("chain")
        held = self._held_step_block
        if refill or held is None or held[0] is not feed or held[1] != feed.calls:
            t = self.iteration
            block = feed.block(t, feed.capacity, prefetch=(t + feed.capacity, feed.capacity))
            held = self._held_step_block = (feed, feed.calls, block, tf.constant(t, tf.int64))
        return held[2], held[3]

    def step(self) -> None:
        """One iteration as one call of a compiled function (traced once), its minibatch read
        from a block gathered ahead (:meth:`_step_block`)."""
        self.require_initialised()
        if self._compiled_step is None:
            self._compiled_step = self._make_step()
        with package_call_options():
            status = self._compiled_step(*self._step_block())
            if status < 0:
                status = self._compiled_step(*self._step_block(refill=True))
        if status < 0:
            raise RuntimeError(f"{self.method}: the step API's block does not hold iteration {self.iteration}")
        if status == 0:
            it = self.iteration
            raise DivergenceError(
                f"{self.method} diverged at iteration {it + 1}: the log-posterior estimate or a "
                f"parameter became NaN or Inf; try a smaller stepsize. sampler.params still holds the state "
                f"after iteration {it}",
                iteration=it + 1,
            )

    # -- state -----------------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        return int(read_now(self._iteration))

    @property
    def log_posterior(self) -> np.ndarray | float:
        """The minibatch log-posterior estimate the last iteration made (at the state it started
        from): a float for one chain, ``(n_chains,)`` for several."""
        value = read_now(self._last_log_post)
        return float(value[0]) if self.n_chains == 1 else value

    def reset(self) -> None:
        """Back to the starting values and iteration 0 (the draws are a function of the seed
        and the iteration, :mod:`sgmcmc.step.random`)."""
        self.mode_search.iteration = 0
        if self._reader is not None:  # a tf.data pipeline starts again from its first element
            for feed in self._feeds.values():
                feed.cancel()
            self._reader.close()
            self._held_step_block = None
        for k, v in self.params.items():
            v.assign(self._user_layout(k, self._starts))
        if hasattr(self.estimator, "reset"):  # the CV mode; SVRG's anchor, SAGA's table (at the starts)
            with package_call_options():
                self.estimator.reset(self._read_params())
        self._iteration.assign(0)
        self._last_log_post.assign(tf.zeros([self.n_chains], self.dtype))

    def init_aux(self) -> None:
        """Draw the kernel's auxiliary state (momenta, thermostats) at the current parameters."""
        self.rng.begin(self._iteration.read_value())  # iteration 0's draws (or the current one's)
        aux = self.kernel.init_aux(self._read_params(), self.rng)
        if self._aux is None:
            self._aux = tf.nest.map_structure(tf.Variable, aux)
        else:
            tf.nest.map_structure(lambda var, value: var.assign(value), self._aux, aux)

    def full_data_gradient_at_mode(self) -> dict[str, tf.Tensor]:
        r""":math:`\nabla\log p(\hat\theta|x)` at the mode-search state, streamed over all rows
        in blocks, with a progress bar when the mode search shows its progress."""
        with tqdm(
            total=self.n_rows, desc=f"{self.method}: full-data gradient", unit="rows", unit_scale=True,
            disable=not self.control_variate.verbose, leave=False,
        ) as bar, package_call_options():
            mode = {k: v.read_value() for k, v in self.estimator.mode.items()}
            return self.one_chain_estimator.full_data_gradient(mode, bar.update)

    def set_anchor(self, anchor_grad: dict[str, tf.Tensor]) -> None:
        """Fix the control variate at the mode-search state with its full-data gradient; with one
        start for all chains (R), every chain starts at the mode."""
        self.estimator.set_anchor(anchor_grad)
        if not self._starts_given_per_chain:
            mode = {k: v.numpy() for k, v in self.estimator.mode.items()}
            for k, v in self.params.items():
                v.assign(self._user_layout(k, [mode] * self.n_chains))

    # -- checkpoints (SPEC §10) -------------------------------------------------------------
    def state_checkpoint(self, with_seed: bool = True) -> tf.train.Checkpoint:
        """Everything the chain's future depends on: the seed, parameters, the kernel's auxiliary
        state (momenta, thermostats, preconditioners), the iteration counter (which, with the seed,
        fixes every draw),
        the last log-posterior estimate, for CV samplers the mode, anchor and its gradient, and
        a stateful estimator's variables (SVRG's anchors, SAGA's table)."""
        if self._aux is None:
            self.init_aux()  # creates the variables a restore fills
        return tf.train.Checkpoint(**self._state(with_seed))

    def _state(self, with_seed: bool = True) -> dict[str, Any]:
        """The variables of :meth:`_checkpoint`, by checkpoint key (the kernel's state only once
        :meth:`init_aux` has made it)."""
        parts = dict(
            params=self.params,
            aux=tf.nest.flatten(self._aux or {}),
            iteration=self._iteration,
            log_posterior=self._last_log_post,
        )
        if with_seed:
            parts.update(seed=self._seed_variable)
        if self.control_variate is not None:  # top-level keys, as the CV state always had
            parts.update(self.estimator.variables())
        elif hasattr(self.estimator, "variables"):
            parts.update(estimator=self.estimator.variables())
        return parts

    def save(self, directory: str) -> str:
        """Write the whole state to ``directory`` (``tf.train.Checkpoint``); returns the path
        prefix. A later :meth:`restore` (in this or another process, on a sampler made by the same
        ``*_setup`` call) continues the chain exactly where it was."""
        self.require_initialised()
        os.makedirs(directory, exist_ok=True)
        self._seed_variable.assign(self.seed)
        return self.state_checkpoint().write(os.path.join(directory, "sampler"))

    def restore(self, directory_or_prefix: str) -> None:
        """Read a state written by :meth:`save` (a directory, or the prefix ``save`` returned); the
        sampler is then initialised at that state (no mode search, no reset) and continues that
        chain exactly: it adopts the saved seed (its minibatches and noise are keyed by it), so a
        sampler set up with another seed, or with ``seed=None``, continues the saved chain, and
        :attr:`seed` says which. A checkpoint written before the seed was saved keeps this
        sampler's seed (the chain continues only if the set-up's seed was the saved run's)."""
        prefix = directory_or_prefix
        if os.path.isdir(prefix):
            prefix = os.path.join(prefix, "sampler")
        saved = {name for name, _ in tf.train.list_variables(prefix)}
        with_seed = "seed/.ATTRIBUTES/VARIABLE_VALUE" in saved
        self.state_checkpoint(with_seed).read(prefix).assert_existing_objects_matched()
        if with_seed:
            self._adopt_seed(int(self._seed_variable.numpy()))
        self.initialised = True

    def stepsize_check_point(self) -> dict[str, tf.Tensor]:
        """Where the stepsize check looks: the CV mode, else the first chain's current state."""
        if self.control_variate is not None:
            return {k: v.read_value() for k, v in self.estimator.mode.items()}
        return {k: v.read_value() if self.n_chains == 1 else v.read_value()[0] for k, v in self.params.items()}

    @property
    def noise_kind(self) -> str:
        """How the gradient estimate's noise arises, for the stepsize check: ``"plain"`` (the
        rows' gradients), ``"difference"`` (the control variate: differences from the mode) or
        ``"anchor_draw"`` (SVRG/SAGA: differences from an anchor that is itself a chain state)."""
        if self.control_variate is not None:
            return "difference"
        return "plain" if self.estimator is self._plain else "anchor_draw"

    @property
    def plain_estimator(self) -> MinibatchGradient | None:
        """The plain minibatch estimator of the user's model (``log_lik``, ``log_prior``,
        ``dataset``), which the other estimators wrap; None for the count models."""
        return self._plain

    def kernel_state(self) -> Any:
        """The kernel's auxiliary state now (momenta, preconditioner statistics, L-BFGS pairs),
        as tensors with the leading chain axis; None before :func:`~sgmcmc.init_sess`."""
        return None if self._aux is None else tf.nest.map_structure(lambda v: v.read_value(), self._aux)

    def get_params(self) -> dict[str, np.ndarray]:
        """The current state on the user's (constrained) scale, as numpy arrays."""
        self.require_initialised()
        values = {k: read_now(v) for k, v in self.params.items()}
        return values if self.constraints is None else self.constraints.to_constrained(values)

    def require_initialised(self) -> None:
        if not self.initialised:
            raise NotInitialisedError(
                f"this {self.method} sampler is not initialised: call sess = sgmcmc.init_sess(sampler) first"
            )
