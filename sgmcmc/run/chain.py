"""Running compiled chunks of iterations from Python: storage, progress, divergence, Ctrl-C.

The chain never leaves TensorFlow within a chunk, and only kept iterations leave the chunk;
between chunks Python copies them into preallocated numpy storage and updates the progress
bar. Chunk lengths adapt so a chunk takes about :data:`SECONDS_PER_CHUNK`.

Nothing computed is lost: a divergence, an op error or Ctrl-C raises an exception carrying every
kept sample (:class:`~sgmcmc.DivergenceError`, :class:`~sgmcmc.SamplingError`,
:class:`~sgmcmc.Interrupted`). Ctrl-C is deferred to the end of the running chunk (at most about
half a second with progress shown, two without), so that chunk is kept too; a second Ctrl-C
interrupts at once.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from typing import Callable, Iterator, TypeVar

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from ..distribute.collective import failed_worker
from ..errors import DivergenceError, Interrupted, SamplingError
from .calls import Keep
from .sampler import Sampler
from ..analysis.samples import Samples

T = TypeVar("T")

SECONDS_PER_CHUNK = 0.5
FIRST_CHUNK = 100
MAX_CHUNK = 50_000
#: Upper bound on one chunk's kept samples held in TensorFlow before the copy to numpy.
MAX_CHUNK_BYTES = 256 * 2**20


def _next_chunk_len(n: int, elapsed: float, first: bool, target: float, max_chunk: int) -> int:
    """The next chunk's length, aiming at ``target`` seconds a chunk. The first call includes
    tracing and compilation, so its time says nothing: it only grows the chunk 4×."""
    growth = 4.0 if first else min(4.0, max(0.25, target / max(elapsed, 1e-6)))
    return int(min(max_chunk, max(1, n * growth)))


class _Pacer:
    """Chunk lengths for one loop: each aims at :data:`SECONDS_PER_CHUNK` (four times longer
    without progress shown), at most ``max_chunk``; under rows sharding they grow 4x per chunk
    whatever the clock (:func:`_timed`)."""

    def __init__(self, sampler: Sampler, verbose: bool, max_chunk: int = MAX_CHUNK):
        self.sampler, self.max_chunk = sampler, max_chunk
        self.target = SECONDS_PER_CHUNK if verbose else 4 * SECONDS_PER_CHUNK
        self.length, self._first = min(FIRST_CHUNK, max_chunk), True

    def timed(self, n: int, call: Callable[[], T]) -> T:
        """``call()``, a chunk of ``n`` iterations; its time sets the next chunk's length."""
        start = time.perf_counter()
        out = call()
        elapsed = time.perf_counter() - start
        self.length = _next_chunk_len(n, elapsed, self._first or not _timed(self.sampler), self.target, self.max_chunk)
        self._first = False
        return out


def _progress(desc: str, total: int, initial: int, verbose: bool) -> tqdm:
    return tqdm(total=total, initial=initial, desc=desc, disable=not verbose, unit="it", dynamic_ncols=True)


def _chunk_or_sampling_error(
    call: Callable[[], T], desc: str, sampler: Sampler, it0: int, n: int, kept: str, samples,
    catch: type[Exception] = Exception,
) -> T:
    """``call()``, a compiled chunk of iterations ``it0 + 1 … it0 + n``; an error in it (not
    Ctrl-C; only ``catch`` es) becomes a :class:`~sgmcmc.SamplingError` naming those iterations
    (:func:`_or_sampling_error`)."""
    return _or_sampling_error(call, f"{desc} failed in iterations {it0 + 1}–{it0 + n}", sampler, it0, kept, samples, catch)


def _or_sampling_error(
    call: Callable[[], T], failed: str, sampler: Sampler, iteration: int, kept: str, samples,
    catch: type[Exception] = Exception,
) -> T:
    """``call()``; an error in it (not Ctrl-C; only ``catch`` es) becomes a
    :class:`~sgmcmc.SamplingError` that says ``failed`` (what failed), the worker that stopped
    answering with rows sharded, the error's gist and ``kept``, carrying ``samples()``."""
    try:
        return call()
    except KeyboardInterrupt:
        raise
    except catch as error:
        raise SamplingError(
            f"{failed}{_peer_failure(sampler, error)} ({type(error).__name__}: {_gist(error)}). {kept}",
            iteration=iteration,
            samples=samples(),
        ) from error


def _gist(error: BaseException) -> str:
    """The line of an error's message that says what happened: the first line, except that a
    graph execution error's banner and traceback ("Graph execution error:", "Detected at node
    …", the indented "File …" lines) are skipped, and a ``{{function_node …}}`` tag is dropped."""
    lines = str(error).splitlines()
    said = [
        line.strip() for line in lines
        if line.strip() and not line[:1].isspace() and not line.startswith(("Graph execution error", "Detected at node"))
    ]
    line = said[0] if said else next((line.strip() for line in lines if line.strip()), "")
    return line.split("}} ", 1)[1] if line.startswith("{{function_node") and "}} " in line else line


NO_SAMPLES_YET = "No samples exist yet: the exception's `samples` is empty"


def before_sampling(prepare: Callable[..., T]) -> Callable[..., T]:
    """Decorator of what a sampler does before its first iteration (``prepare(sampler, …)``: the
    control variate's mode search, the curvature's Hessian-vector products, the anchor's full-data
    gradient, the checks): an operation that fails in it — with rows sharded, a collective whose
    peer died, which the coordination service reports within its heartbeat timeout — raises
    :class:`~sgmcmc.SamplingError` with empty ``samples``, naming the worker that stopped
    answering, the TensorFlow error as its ``__cause__``, like a failed sampling chunk (a raw
    ``UnavailableError`` before). Other exceptions (the checks' refusals, a divergence, Ctrl-C)
    pass unchanged."""

    @functools.wraps(prepare)
    def guarded(sampler: Sampler, *args, **kwargs):
        try:
            return prepare(sampler, *args, **kwargs)
        except tf.errors.OpError as error:
            raise SamplingError(
                f"{sampler.method}: the set-up before sampling (mode search, curvature, full-data gradient, "
                f"checks) failed{_peer_failure(sampler, error)} ({type(error).__name__}: {_gist(error)}). "
                f"{NO_SAMPLES_YET}",
                iteration=0,
                samples={},
            ) from error

    return guarded


def _peer_failure(sampler: Sampler, error: BaseException) -> str:
    """With rows sharded: ", worker w stopped answering" when a collective error names a peer."""
    if sampler.shard is None:
        return ""
    who = failed_worker(error, sampler.shard.collective.worker)
    return "" if who is None else f": worker {who} stopped answering"


def _timed(sampler: Sampler) -> bool:
    """Whether chunk lengths may follow the clock. Not with rows sharded across workers: every
    worker must make the same compiled calls (their collective ops pair up call by call), so the
    chunks grow 4x per chunk up to the cap, the same everywhere."""
    return sampler.shard is None


class _InterruptFlag:
    """SIGINT sets a flag instead of raising, while a run is in progress in the main thread."""

    def __init__(self):
        self.raised = False

    def handler(self, signum, frame):
        if self.raised:  # a second Ctrl-C: the user does not want to wait for the chunk
            raise KeyboardInterrupt
        self.raised = True


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[_InterruptFlag]:
    flag = _InterruptFlag()
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield flag  # not ours to change: Ctrl-C behaves as the program set it up
        return
    signal.signal(signal.SIGINT, flag.handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class _Storage:
    """Preallocated arrays for one run's kept samples, in ``(K, n_kept, …)`` layout."""

    def __init__(self, sampler: Sampler, keep: Keep, n_iters: int, store_gradients: bool, run_start: int):
        self.sampler, self.keep = sampler, keep
        k, dtype = sampler.n_chains, np.dtype(sampler.dtype.as_numpy_dtype)
        self.first = keep.count_until(run_start)
        self.n_kept = keep.count_until(run_start + n_iters) - self.first
        self.saved_draws = self.saved_estimates = 0  # what checkpoint shards already hold
        self.draws = {name: np.empty((k, self.n_kept, *shape), dtype) for name, shape in sampler.shapes.items()}
        self.log_posterior = np.full((k, self.n_kept), np.nan, dtype)
        self.gradients = (
            {name: np.full((k, self.n_kept, *shape), np.nan, dtype) for name, shape in sampler.shapes.items()}
            if store_gradients
            else None
        )
        self.store_gradients = store_gradients

    def add_chunk(self, it0: int, chunk, group_len: int) -> None:
        """A chunk of groups of ``group_len`` iterations from ``it0``: group j ends at iteration
        ``it0 + (j + 1)·group_len`` (its state is kept if that iteration is) and its first
        iteration made the estimate at the state ``it0 + j·group_len`` (kept with the sample there,
        unless an earlier run — continuation — kept that sample)."""
        j = np.arange(len(chunk.log_posts))
        ends = it0 + (j + 1) * group_len
        ok = (ends - it0 <= chunk.done) & (ends > self.keep.burn_in) & ((ends - self.keep.burn_in) % self.keep.thin == 0)
        where = (ends[ok] - self.keep.burn_in) // self.keep.thin - 1 - self.first
        for name, values in chunk.samples.items():
            self.draws[name][:, where] = np.swapaxes(values[ok], 0, 1)
        starts = it0 + j * group_len
        ok = (starts - it0 < chunk.done) & (starts > self.keep.burn_in) & ((starts - self.keep.burn_in) % self.keep.thin == 0)
        where = (starts - self.keep.burn_in) // self.keep.thin - 1 - self.first
        ok &= where >= 0
        self.log_posterior[:, where[ok]] = chunk.log_posts[ok].T
        if self.gradients is not None:
            for name, values in chunk.grads.items():
                self.gradients[name][:, where[ok]] = np.swapaxes(values[ok], 0, 1)

    def preload(self, draws, log_posterior, gradients, n_draws: int, n_estimates: int) -> None:
        """The samples of a resumed run's checkpoint shards."""
        for name, values in draws.items():
            self.draws[name][:, :n_draws] = values
        if log_posterior is not None:
            self.log_posterior[:, :n_estimates] = log_posterior
        if self.gradients is not None and gradients is not None:
            for name, values in gradients.items():
                self.gradients[name][:, :n_estimates] = values
        self.saved_draws, self.saved_estimates = n_draws, n_estimates

    def counts(self) -> tuple[int, int]:
        """Kept draws so far, and how many of them have their estimate (made by the iteration
        after the draw, or by :meth:`finish`)."""
        t = self.sampler.iteration
        n_draws = self.keep.count_until(t) - self.first
        n_estimates = max(0, self.keep.count_until(t - 1) - self.first)
        return n_draws, n_estimates

    def new_shard(self, n_draws: int, n_estimates: int) -> dict[str, np.ndarray]:
        """What checkpoint shards do not hold yet."""
        a, e = self.saved_draws, self.saved_estimates
        shard = {f"draws/{name}": v[:, a:n_draws] for name, v in self.draws.items()}
        shard["log_posterior"] = self.log_posterior[:, e:n_estimates]
        if self.gradients is not None:
            shard.update({f"grads/{name}": v[:, e:n_estimates] for name, v in self.gradients.items()})
        self.saved_draws, self.saved_estimates = n_draws, n_estimates
        return shard

    def finish(self) -> None:
        """The estimate at the last kept sample, when no iteration after it has run."""
        t = self.sampler.iteration
        if self.saved_estimates >= self.n_kept:
            return  # a finished run read back from its checkpoint directory
        if self.n_kept and self.keep.count_until(t) > self.keep.count_until(t - 1):
            est = self.sampler.calls.estimate_for_storage(self.keep.thin, self.store_gradients)
            self.log_posterior[:, -1] = est.log_post
            if self.gradients is not None:
                for name, g in est.grads.items():
                    self.gradients[name][:, -1] = g

    def samples(self, settings: dict, until: int | None = None) -> Samples:
        """What is kept so far (up to iteration ``until``, default the sampler's), as
        :class:`~sgmcmc.Samples` (R layout for one chain)."""
        m = self.keep.count_until(self.sampler.iteration if until is None else until) - self.first

        def layout(a):
            a = a[:, :m]
            return a[0] if self.sampler.n_chains == 1 else a

        draws, unconstrained = {name: layout(a) for name, a in self.draws.items()}, None
        if self.sampler.constraints is not None:  # the chain ran on the unconstrained scale
            draws, unconstrained = self.sampler.constraints.to_constrained(draws), draws
        return Samples(
            draws,
            unconstrained=unconstrained,
            n_chains=self.sampler.n_chains,
            gradients=None if self.gradients is None else {n: layout(a) for n, a in self.gradients.items()},
            log_posterior=layout(self.log_posterior),
            method=self.sampler.method,
            seed=self.sampler.seed,
            settings=settings,
        )


#: What an exception of a run on a ``*_setup`` sampler says the caller can do next.
STEP_API_CONTINUATION = "sample_chain(sampler, n) continues the chain"

#: The same for a whole-chain call (``sgld(...)``), whose sampler the caller does not hold.
WHOLE_CHAIN_CONTINUATION = (
    "this call made its own sampler, so it cannot be continued: to make a long run resumable give it "
    "checkpoint_dir= (run again, the same call resumes from its last checkpoint), or step a sampler from the "
    "*_setup function with sample_chain(sampler, n), which continues where it stopped"
)


def _checkpoint_continuation(last_checkpoint: int, run_start: int, checkpoint_every: int | None) -> str:
    """What an exception of a run with ``checkpoint_dir`` says the caller can do next."""
    if last_checkpoint > run_start:
        return f"run again, the same call resumes from its last checkpoint (iteration {last_checkpoint})"
    return (
        f"no checkpoint was written yet (the first comes at iteration {run_start + (checkpoint_every or 0)}): "
        f"run again, the same call starts afresh"
    )


def run_chain(
    sampler: Sampler,
    n_iters: int,
    keep: Keep,
    *,
    store_gradients: bool = False,
    verbose: bool = True,
    settings: dict | None = None,
    run_start: int | None = None,
    preloaded: tuple | None = None,
    checkpoint=None,
    checkpoint_every: int | None = None,
    continuation: str = STEP_API_CONTINUATION,
) -> Samples:
    """Run ``n_iters`` more iterations of ``sampler`` in compiled chunks and return the kept ones.

    ``run_start`` (default: the sampler's iteration now) is where the run began: a run resumed
    from a checkpoint began before the sampler's current iteration, and ``preloaded`` holds what
    its shards kept (``CheckpointDirectory.load_arrays``). ``checkpoint(storage,
    finished)``, if given, is called every ``checkpoint_every`` iterations and at the end.
    ``continuation`` ends the messages of ``Interrupted`` and of an end-of-run failure: what the
    caller can do next (:data:`STEP_API_CONTINUATION` for a ``*_setup`` sampler,
    :data:`WHOLE_CHAIN_CONTINUATION` for a whole-chain call; with ``checkpoint``, the
    checkpoint to resume from).

    Raises
    ------
    DivergenceError
        At the first NaN/Inf in a state or log-posterior estimate, carrying every earlier kept
        sample and naming the chain(s).
    SamplingError
        When an operation fails mid-run, carrying every kept sample of the completed chunks.
    Interrupted
        On Ctrl-C, after the running chunk, carrying every kept sample.
    """
    settings = dict(settings or {}, burn_in=keep.burn_in, thin=keep.thin, n_iters=n_iters)
    run_start = sampler.iteration if run_start is None else run_start
    storage = _Storage(sampler, keep, n_iters, store_gradients, run_start)
    if preloaded is not None:
        storage.preload(*preloaded)
    return _continue(
        sampler, storage, n_iters, keep, store_gradients, verbose, settings, run_start, checkpoint, checkpoint_every,
        continuation,
    )


def _continue(
    sampler, storage, n_iters, keep, store_gradients, verbose, settings, run_start, checkpoint, checkpoint_every,
    continuation,
):
    """The chunk loop of :func:`run_chain`, from the sampler's current iteration to the run's end."""
    max_chunk = max(1, min(MAX_CHUNK, keep.thin * (MAX_CHUNK_BYTES // sampler.calls.bytes_per_kept(store_gradients))))
    xla_groups = sampler.calls.max_groups_per_call(store_gradients)
    if xla_groups is not None:  # XLA's sampling call has fixed storage
        max_chunk = max(1, min(max_chunk, keep.thin * xla_groups))
    if checkpoint_every:
        max_chunk = max(1, min(max_chunk, checkpoint_every))
    pacer = _Pacer(sampler, verbose, max_chunk)
    done = sampler.iteration - run_start
    last_checkpoint = sampler.iteration
    desc = sampler.method
    bar = _progress(desc, n_iters, done, verbose)
    try:
        with _deferred_interrupt() as interrupt:
            while done < n_iters:
                it0 = sampler.iteration
                remaining = n_iters - done
                to_boundary = keep.to_boundary(it0)
                # Sampling chunks are groups ending on kept iterations; see _Storage.add_chunk.
                groups, group_len = 0, keep.thin
                if it0 < keep.burn_in:  # burn-in: nothing kept
                    n = min(pacer.length, keep.burn_in - it0, remaining)
                elif to_boundary and to_boundary <= remaining:  # continuing mid-group: finish it
                    groups, group_len = 1, to_boundary
                elif to_boundary:
                    n = remaining  # ends before the next kept iteration: nothing kept
                elif remaining >= keep.thin:
                    groups = max(1, min(pacer.length, remaining) // keep.thin)
                else:  # a tail shorter than thin: no sample, but the estimate at the last kept one
                    groups, group_len = 1, remaining
                if groups:
                    n = groups * group_len
                chunk = pacer.timed(n, lambda: _chunk_or_sampling_error(
                    lambda: sampler.sample_groups(groups, group_len, store_gradients) if groups else sampler.advance(n, store_gradients),
                    desc, sampler, it0, n, f"The samples kept until iteration {it0} are in the exception's `samples` attribute",
                    # Not the sampler's iteration: a chunk runs as several compiled calls, and
                    # those before the failing one advanced it without their samples stored.
                    lambda: storage.samples(settings, until=it0),
                ))
                if groups:
                    storage.add_chunk(it0, chunk, group_len)
                if chunk.diverged_at:
                    at = chunk.diverged_at
                    # The run's chain indices (a replica's sampler holds some of the run's chains).
                    chains = [sampler.chain_ids[i] for i in np.flatnonzero(~chunk.finite_chains)]
                    some = 0 < len(chains) < sampler.n_chains or sampler.chain_ids != list(range(sampler.n_chains))
                    where = f" in chain{'s' if len(chains) > 1 else ''} {', '.join(map(str, chains))}" if some else ""
                    raise DivergenceError(
                        f"{desc} diverged at iteration {at}{where}: the state or the log-posterior estimate "
                        f"became NaN or Inf; try a smaller stepsize. The samples kept before it are in the "
                        f"exception's `samples` attribute",
                        iteration=at,
                        samples=storage.samples(settings),
                    )
                done += n
                bar.update(n)
                last = chunk.last_log_post
                bar.set_postfix(log_post=f"{last[0]:.6g}" if len(last) == 1 else f"{np.median(last):.6g} (median)", refresh=False)
                if interrupt.raised:
                    if checkpoint is not None:
                        continuation = _checkpoint_continuation(last_checkpoint, run_start, checkpoint_every)
                    raise Interrupted(
                        f"{desc} interrupted after iteration {sampler.iteration}: the samples kept so far are "
                        f"in the exception's `samples` attribute (except sgmcmc.Interrupted as e: samples = "
                        f"e.samples); {continuation}",
                        iteration=sampler.iteration,
                        samples=storage.samples(settings),
                    )
                if checkpoint is not None and done < n_iters and sampler.iteration - last_checkpoint >= checkpoint_every:
                    checkpoint(storage, False)
                    last_checkpoint = sampler.iteration
    finally:
        bar.close()
    _or_sampling_error(
        storage.finish,
        f"{desc}: the log-posterior estimate at the last kept sample (iteration {sampler.iteration}) failed",
        sampler,
        sampler.iteration,
        "Every kept sample is in the exception's `samples` attribute; the last entry of its "
        "log_posterior (and gradients) is NaN; "
        + (_checkpoint_continuation(last_checkpoint, run_start, checkpoint_every) if checkpoint is not None else continuation),
        lambda: storage.samples(settings),
    )
    if checkpoint is not None:
        checkpoint(storage, True)
    return storage.samples(settings)


def run_until_ready(sampler: Sampler, max_iters: int, verbose: bool) -> bool:
    """Burn-in found by the kernel (OSGLD's Eq. 17): run compiled chunks until the kernel's
    ``ready(aux)`` holds for every chain or the sampler's iteration reaches ``max_iters``; returns
    whether it holds. The chain is the same as without the search (only the loop's stopping point
    depends on it), so a later run continues it exactly. Nothing is kept during the search: a
    divergence, an op error or Ctrl-C raises with empty ``samples``."""
    desc = f"{sampler.method}: burn-in"
    pacer = _Pacer(sampler, verbose)
    bar = _progress(desc, max_iters, sampler.iteration, verbose)
    try:
        with _deferred_interrupt() as interrupt:
            while not sampler.ready().all() and sampler.iteration < max_iters:
                it0 = sampler.iteration
                n = min(pacer.length, max_iters - it0)
                chunk = pacer.timed(n, lambda: _chunk_or_sampling_error(
                    lambda: sampler.advance_until_ready(n), desc, sampler, it0, n,
                    "No samples are kept during the burn-in search", dict,
                ))
                if chunk.diverged_at:
                    raise DivergenceError(
                        f"{desc}: the chain diverged at iteration {chunk.diverged_at} (NaN or Inf) before the "
                        f"burn-in criterion held; no samples are kept during the burn-in search",
                        iteration=chunk.diverged_at,
                    )
                bar.update(chunk.done)
                if interrupt.raised:
                    raise Interrupted(
                        f"{desc} interrupted after iteration {sampler.iteration}, before the burn-in criterion "
                        f"held: no samples yet",
                        iteration=sampler.iteration,
                        samples={},
                    )
    finally:
        bar.close()
    return bool(sampler.ready().all())
