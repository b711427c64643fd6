"""The sampler object: what ``*_setup`` returns, and the one step both APIs share.

``Sampler._step`` is the only place one iteration is written: a pure function of the state
``(params, aux)``, the global iteration ``t`` and that iteration's minibatches. The sampler holds
the parts it assembles, one module each:

* :mod:`sgmcmc.run.variables` — the chains' state in variables (``params`` in the user's layout);
* :mod:`sgmcmc.run.feeds` — the minibatch feeds, blocks gathered on the host ahead of the calls;
* :mod:`sgmcmc.run.compiled` — the compiled programs, the compilation mode and XLA's fallback;
* :mod:`sgmcmc.run.calls` — the whole-chain API's calls of the chain program
  (:mod:`sgmcmc.run.program`: many iterations a call, burn-in and sampling in one loop);
* :mod:`sgmcmc.run.step_call` — the step API's call, one iteration a call;
* :mod:`sgmcmc.run.saved_state` — the whole state as a checkpoint (``save``, ``restore``).

Both APIs pass the same global iteration ``t`` to the same counter-based draws
(:class:`~sgmcmc.step.random.ChainRandom`: Philox keyed by the seed and stream, counter (chain, t,
call)) and read the same minibatch rows (a function of (seed, stream, chain, t),
:mod:`sgmcmc.data.minibatch`; from a ``tf.data`` pipeline, its elements in order), so the same
seed gives the same chain, bit for bit. K chains are stepped together: every state tensor has a
leading chain axis (:mod:`sgmcmc.step.dynamics.base`). With ``constraints`` the sampler is built
on the unconstrained scale (:mod:`sgmcmc.constraints`): its state, ``shapes`` and stored
gradients are unconstrained, and only :meth:`Sampler.get_params` and the returned samples map
back to the constrained scale.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
import tensorflow as tf

from ..data.minibatch import CHAIN_STREAM, MODE_SEARCH_STREAM, STORAGE_STREAM, MinibatchIndices
from ..data.rows import Rows
from ..data.stream import BatchStream
from ..distribute.placement import RowShard
from ..errors import NotInitialisedError
from ..graph_options import package_call_options
from ..step.contract import BoundEstimator, Minibatches
from ..step.estimators import MinibatchGradient
from ..step.estimators.assemble import Estimators
from ..step.random import ChainRandom
from . import saved_state
from .calls import ChunkResult, Keep, WholeChainCalls
from .control_variate import ControlVariateSettings, ModeSearchStream
from .compiled import CompiledPrograms, default_jit_compile
from .feeds import ChainFeeds
from .step_call import StepCall
from .variables import ChainVariables, read_now

__all__ = ["Sampler", "ControlVariateSettings", "ModeSearchStream", "ChunkResult", "Keep"]


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
        Whether the chain runs as XLA programs (:mod:`sgmcmc.run.compiled`); becomes False if XLA
        cannot compile the model.
    """

    def __init__(
        self,
        method: str,
        kernel,
        estimators: Estimators,
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
        worker's part when the rows are sharded across workers (``rows`` are then its rows,
        ``batch_size`` its n_w; every gradient evaluation is all-reduced). ``mode_start``: where
        the CV mode search starts (default ``starts[0]``; chain 0's start when ``starts`` are
        another replica's share). ``stepsize_check``: check the stepsize against the curvature
        before sampling (:mod:`sgmcmc.stability.check`). ``rows``: the dataset as
        :class:`~sgmcmc.data.rows.Rows` in ``dtype`` (the estimators' own), or the user's
        ``tf.data`` pipeline as a :class:`~sgmcmc.data.stream.BatchStream` (the minibatches are
        its elements, :mod:`sgmcmc.data.stream`)."""
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
        #: The chains' starts (one dict each) and where the CV mode search starts.
        self.starts = starts
        self.mode_start = starts[0] if mode_start is None else mode_start
        #: Whether the starts were given per chain (else every chain starts at a CV sampler's mode).
        self.starts_given_per_chain = bool(starts_given_per_chain)
        self.chain_ids = list(range(self.n_chains)) if chains is None else [int(c) for c in chains]
        if len(self.chain_ids) != self.n_chains:
            raise ValueError(f"{len(self.chain_ids)} chain indices for {self.n_chains} starts")
        self.shard = shard
        self._make_random_streams()
        self.variables = ChainVariables(starts, dtype, self.seed)
        self.params = self.variables.params
        per_iteration = int(getattr(kernel, "minibatches_per_iteration", 1))
        minibatches = MinibatchIndices(self.n_rows, batch_size, minibatch_replace, per_iteration)
        self.rows = rows
        self.feeds = ChainFeeds(rows, minibatches, self.seed, self.chain_ids, shard)
        #: The plain minibatch estimator of the user's model, which the other estimators wrap;
        #: None for the count models.
        self.plain_estimator: MinibatchGradient | None = estimators.plain
        self.estimator = estimators.chain
        #: The plain estimator for one chain: the mode search and the full-data passes (CV only).
        self.one_chain_estimator = estimators.one_chain
        self.initialised = False
        self.programs = CompiledPrograms(method, default_jit_compile(xla_by_default), lambda: self.step_call.forget_program())
        step = lambda state, t, batches: self._step(state, t, batches)  # noqa: E731 (tests patch Sampler._step)
        self.step_call = StepCall(method, step, self.variables, self.feeds, self.programs)
        ready = (lambda aux: self.kernel.ready(aux)) if hasattr(kernel, "ready") else None  # the tuner may replace the kernel
        self.calls = WholeChainCalls(step, self.variables, self.feeds, self.programs, ready,
                                     self.estimator, self._storage_rng, lambda: tf.nest.flatten(saved_state.checkpointed(self)))

    def _make_random_streams(self) -> None:
        """The noise streams of :attr:`seed` (the minibatch streams are made from it by the feeds)."""
        self.rng = ChainRandom(self.seed, CHAIN_STREAM, self.dtype, self.n_chains, self.chain_ids)
        self._storage_rng = ChainRandom(self.seed, STORAGE_STREAM, self.dtype, self.n_chains, self.chain_ids)
        #: The CV mode search's own stream, counter and program (:mod:`sgmcmc.run.mode_search`).
        self.mode_search = ModeSearchStream(ChainRandom(self.seed, MODE_SEARCH_STREAM, self.dtype, 1))

    def adopt_seed(self, seed: int) -> None:
        """Continue the streams of ``seed`` (a restored state's, or a reused sampler's new one):
        every draw is a function of the seed and the iteration. The compiled functions read the
        noise streams' keys from variables when they run, so they stay; the minibatch feeds,
        which draw on the host, are made again on their next use."""
        if seed == self.seed:
            return
        self.seed = int(seed)
        for rng in (self.rng, self._storage_rng, self.mode_search.rng):
            rng.reseed(self.seed)
        self.feeds.reseed(self.seed)

    def release_buffers(self) -> None:
        """Free the minibatch feeds' block buffers (made again on next use): for a sampler kept
        between whole-chain calls (:mod:`sgmcmc.api.reuse`), which would otherwise hold up to
        two blocks per feed."""
        self.feeds.close()
        self.step_call.forget_block()

    @property
    def jit_compile(self) -> bool:
        return self.programs.jit_compile

    @jit_compile.setter
    def jit_compile(self, value: bool) -> None:
        """The compilation mode of the functions this sampler compiles from now on."""
        self.programs.jit_compile = bool(value)

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
        minibatches.check_all_taken(self.method)
        return (new_params, new_aux), est

    # -- the whole-chain API's calls (run/calls.py) and the step API's (run/step_call.py) ----
    def ready(self) -> np.ndarray:
        """``[K]`` bools: the kernel's ``ready(aux)`` now (all True for a kernel without one)."""
        return self.calls.ready()

    def advance(self, n: int, store_gradients: bool = False) -> ChunkResult:
        """``n`` iterations in compiled calls, nothing stored (burn-in, or up to the next thinning
        boundary): :meth:`~sgmcmc.run.calls.WholeChainCalls.advance`."""
        self.require_initialised()
        return self.calls.advance(n, store_gradients)

    def advance_until_ready(self, n: int) -> ChunkResult:
        """Like :meth:`advance`, but the compiled loop also stops after the iteration at which
        the kernel's ``ready(aux)`` (e.g. OSGLD's burn-in criterion) holds for every chain;
        ``done`` says how many iterations ran. The chain is the same as with :meth:`advance`."""
        self.require_initialised()
        if not hasattr(self.kernel, "ready"):
            raise TypeError(f"{self.method}'s kernel has no burn-in criterion (no ready(aux))")
        return self.calls.advance(n, until_ready=True)

    def sample_groups(self, groups: int, thin: int, store_gradients: bool = False) -> ChunkResult:
        """``groups × thin`` iterations in compiled calls from a thinning boundary, keeping the
        last state of each group of ``thin`` and the estimate made at each group's first state.
        Under XLA ``groups`` is at most ``calls.max_groups_per_call``."""
        self.require_initialised()
        return self.calls.sample_groups(groups, thin, store_gradients)

    def step(self) -> None:
        """One iteration as one compiled call (:class:`~sgmcmc.run.step_call.StepCall`)."""
        self.require_initialised()
        self.step_call()

    @property
    def iteration(self) -> int:
        return int(read_now(self.variables.iteration))

    @property
    def log_posterior(self) -> np.ndarray | float:
        """The minibatch log-posterior estimate the last iteration made (at the state it started
        from): a float for one chain, ``(n_chains,)`` for several."""
        value = read_now(self.variables.last_log_post)
        return float(value[0]) if self.n_chains == 1 else value

    def reset(self) -> None:
        """Back to the starting values and iteration 0 (the draws are a function of the seed
        and the iteration, :mod:`sgmcmc.step.random`)."""
        self.mode_search.iteration = 0
        if self.feeds.restart_stream():  # a tf.data pipeline starts again from its first element
            self.step_call.forget_block()
        self.variables.restart(self.starts)
        if hasattr(self.estimator, "reset"):  # the CV mode; SVRG's anchor, SAGA's table (at the starts)
            with package_call_options():
                self.estimator.reset(self.variables.read_params())

    def init_aux(self) -> None:
        """Draw the kernel's auxiliary state (momenta, thermostats) at the current parameters."""
        self.rng.begin(self.variables.iteration.read_value())  # iteration 0's draws (or the current one's)
        self.variables.set_aux(self.kernel.init_aux(self.variables.read_params(), self.rng))

    # -- checkpoints (SPEC §10; run/saved_state.py) ---------------------------------------
    def save(self, directory: str) -> str:
        """Write the whole state to ``directory`` (``tf.train.Checkpoint``); returns the path
        prefix. A later :meth:`restore` (in this or another process, on a sampler made by the same
        ``*_setup`` call) continues the chain exactly where it was."""
        return saved_state.save(self, directory)

    def restore(self, directory_or_prefix: str) -> None:
        """Read a state written by :meth:`save` (a directory, or the prefix ``save`` returned); the
        sampler is then initialised at that state (no mode search, no reset) and continues that
        chain exactly: it adopts the saved seed (its minibatches and noise are keyed by it), so a
        sampler set up with another seed, or with ``seed=None``, continues the saved chain, and
        :attr:`seed` says which. A checkpoint written before the seed was saved keeps this
        sampler's seed (the chain continues only if the set-up's seed was the saved run's)."""
        saved_state.restore(self, directory_or_prefix)

    def kernel_state(self) -> Any:
        """The kernel's auxiliary state now (momenta, preconditioner statistics, L-BFGS pairs),
        as tensors with the leading chain axis; None before :func:`~sgmcmc.init_sess`."""
        return None if self.variables.aux is None else self.variables.read_aux()

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
