"""Whole-chain runs: set up, prepare (:func:`~sgmcmc.api.session.init_sess`), run in compiled chunks
(:func:`~sgmcmc.run.chain.run_chain`) — on one device, over a strategy's replicas, with checkpoints,
or until OSGLD's burn-in criterion holds."""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

import numpy as np

from .. import checks
from ..run.chain import STEP_API_CONTINUATION, WHOLE_CHAIN_CONTINUATION, run_chain, run_until_ready
from ..run.checkpoints import CheckpointDirectory, fingerprint
from ..run.distributed_checkpoints import (
    ReplicaCheckpoints, agree_on_directory, agree_or_raise, combined_fingerprint, commit_on_chief, refuse_replica_layout,
)
from ..distribute.collective import Collective
from ..distribute.placement import Placement
from ..run.replicas import build_on_replicas, run_on_replicas
from ..errors import BurnInNotFound, DivergenceError, Interrupted, SamplingError, StepsizeWarning, user_stacklevel
from ..data.stream import is_batch_stream
from ..step.dynamics import Segment
from ..step.estimators import EstimatorSpec
from ..run.calls import Keep
from ..run.sampler import Sampler
from ..analysis.samples import Samples, concatenate_draws
from .session import init_sess
from .build import build_sampler, placement_of, shared_seed, whole_chain_sampler
from ..step.methods import Method
from .options import Chain, Model, Setup


def sample_chain(
    sampler: Sampler,
    n_iters: int,
    verbose: bool = True,
    *,
    burn_in: int = 0,
    thin: int = 1,
    store_gradients: bool = False,
) -> Samples:
    """Run ``n_iters`` iterations of a sampler made by a ``*_setup`` function, in compiled chunks.

    A sampler that :func:`~sgmcmc.init_sess` has not prepared is prepared first (for the CV
    samplers: the mode search). A prepared sampler *continues* from its current state, random
    stream and iteration count, so ``sample_chain(s, a)`` then ``sample_chain(s, b)`` give the
    samples of one run of ``a + b`` iterations. ``burn_in`` and ``thin`` count on the sampler's
    global iteration counter: the kept iterations are ``burn_in + thin``, ``burn_in + 2·thin``, ….
    A cyclical sampler (``csgld_setup``, ``csghmc_setup``) keeps only those in its cycles'
    sampling stages, ``samples.cycle`` naming each draw's cycle: exploration iterations are not
    draws of the posterior (:meth:`~sgmcmc.step.dynamics.base.Dynamics.stages`).

    Parameters
    ----------
    sampler : Sampler
        Made by a ``*_setup`` function.
    n_iters : int
        Iterations to run.
    verbose : bool
        Show progress.
    burn_in, thin : int, keyword-only
        Keep iterations ``burn_in + thin``, ``burn_in + 2·thin``, … (global counter).
    store_gradients : bool, keyword-only
        Also keep the estimator's gradient at every kept sample.

    Returns
    -------
    Samples
        As for :func:`sgmcmc.sgld`. Raises :class:`~sgmcmc.DivergenceError`,
        :class:`~sgmcmc.SamplingError` or :class:`~sgmcmc.Interrupted` carrying the samples kept
        so far.
    """
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sample_chain needs a sampler made by a *_setup function, got {type(sampler).__name__}")
    return _sample(sampler, n_iters, verbose, burn_in, thin, store_gradients, STEP_API_CONTINUATION)


def _sample(
    sampler: Sampler, n_iters: int, verbose: bool, burn_in: int, thin: int, store_gradients: bool, continuation: str
) -> Samples:
    """:func:`sample_chain`'s run; ``continuation`` says in an exception's message what the caller
    can do next (:func:`~sgmcmc.run.chain.run_chain`)."""
    chain = Chain(n_iters=n_iters, burn_in=burn_in, thin=thin, store_gradients=store_gradients, verbose=verbose)
    keep = chain.keep
    if chain.store_gradients and sampler.uses_no_gradient:
        raise ValueError(f"{sampler.method} uses no gradient: store_gradients does not apply; leave it False")
    # Before the mode search and before any iteration: refuse a run whose samples cannot be kept.
    it0 = sampler.iteration if sampler.initialised else 0
    checks.check_storage(
        keep.count_until(it0 + chain.n_iters) - keep.count_until(it0), sampler.n_chains, sampler.shapes,
        sampler.dtype, chain.store_gradients,
    )
    if not sampler.initialised:
        if keep.count_until(chain.n_iters) == 0:
            raise ValueError(f"burn_in={burn_in} with n_iters={n_iters} and thin={thin} keeps no iteration")
        init_sess(sampler, verbose)
    pieces, t = [], sampler.iteration
    for stage in sampler.kernel.stages(t + 1, chain.n_iters):  # one for most kernels
        t += stage.n_iters
        pieces.append((stage.n_iters, keep if stage.keepable else Keep(t, 1), stage.label))  # Keep(t, 1) keeps none
    samples = _run_pieces(sampler, pieces, chain, verbose, sampler.settings, continuation)
    warn_after_run(sampler)
    return samples


def _run_pieces(sampler: Sampler, pieces: list[tuple[int, Keep, int | None]], chain: Chain, verbose: bool,
                settings: dict, continuation: str) -> Samples:
    """Stretches of one chain run one after the other (each continues the state, the counter and
    so the draws), ``(n_iters, keep, label)`` each, their kept draws joined with ``Samples.cycle``
    holding each draw's label (−1: unlabelled) when any has one; one unlabelled stretch's
    draws as ``run_chain`` returned them (not copied). An exception in a stretch carries every
    draw kept so far, as from one run."""
    parts: list[Samples] = []
    labels: list[np.ndarray] = []
    labelled = any(label is not None for _, _, label in pieces)

    def joined(parts: list[Samples]) -> Samples:
        if len(parts) == 1 and not labelled:
            return parts[0]
        return concatenate_draws(parts, np.concatenate(labels[:len(parts)]) if labelled else None, settings=settings)

    for n_iters, keep, label in pieces:
        try:
            part = run_chain(
                sampler, n_iters, keep, store_gradients=chain.store_gradients, verbose=verbose, settings=settings,
                continuation=continuation,
            )
        except (DivergenceError, SamplingError, Interrupted) as error:
            if isinstance(error.samples, Samples):
                labels.append(np.full(error.samples.n_kept, -1 if label is None else label, np.int64))
                error.samples = joined([*parts, error.samples])
            raise
        parts.append(part)
        labels.append(np.full(part.n_kept, -1 if label is None else label, np.int64))
    return joined(parts)


def warn_after_run(sampler: Sampler) -> None:
    """The kernel's end-of-run warning (:meth:`~sgmcmc.step.dynamics.base.Dynamics.after_run`)
    as a :class:`~sgmcmc.StepsizeWarning` at the user's line."""
    message = sampler.kernel.after_run(sampler.kernel_state())
    if message is not None:
        warnings.warn(f"{sampler.method}: {message}", StepsizeWarning, stacklevel=user_stacklevel())


def run_whole_chain(
    method: Method, arguments: dict[str, Any], model: Model, setup: Setup, estimator: EstimatorSpec, chain: Chain
) -> Samples:
    """What every whole-chain public function does: check, set up, prepare, run. The run options
    of OSGLD's whole-chain function arrive with its ``arguments``: ``auto_burn_in`` (the kernel
    finds the burn-in; :func:`run_until_burned_in`) and ``max_burn_in``."""
    arguments = dict(arguments)
    max_burn_in = arguments.pop("max_burn_in", None)
    if arguments.get("auto_burn_in"):
        return run_until_burned_in(method, arguments, model, setup, estimator, chain, max_burn_in)
    if max_burn_in is not None:
        raise ValueError("max_burn_in bounds the search of auto_burn_in=True; without it give burn_in= (or drop max_burn_in)")
    if chain.keep.count_until(chain.n_iters) == 0:
        raise ValueError(
            f"burn_in={chain.burn_in} is not less than n_iters={chain.n_iters}: no iteration would be kept; "
            f"give burn_in < n_iters"
        )
    # The dynamics' plan of kept draws from the arguments alone: a plan keeping nothing is refused
    # here, before the set-up's model and stepsize checks.
    plan = method.dynamics.segments(arguments, chain.n_iters, chain.burn_in, chain.thin)
    segmented = plan != [Segment(chain.n_iters, chain.burn_in, chain.thin)]
    place = placement_of(method, setup, estimator)
    if chain.checkpoint_dir is not None:
        if is_batch_stream(model.dataset):
            raise ValueError(
                "checkpoint_dir is not supported with a tf.data.Dataset: a checkpoint directory checks on resuming "
                "that the data are the same (a digest of the rows), which a pipeline cannot give, and resuming would "
                f"re-read the pipeline up to the checkpoint. Run without checkpoint_dir, or step {method.name}_setup's "
                f"sampler with sample_chain and save it between calls (sampler.save / sampler.restore; a restore "
                f"re-reads the pipeline from its start to the saved iteration: the same elements when it is deterministic)"
            )
        if segmented:  # before the directory is made
            raise ValueError(
                f"checkpoint_dir is not supported with {method.name} (not yet): its whole chain is run as several "
                f"segments (its cycles) whose kept draws are joined, and a checkpoint directory holds one run. Run "
                f"without checkpoint_dir, or step {method.name}_setup's sampler with sample_chain and save it "
                f"between calls (sampler.save / sampler.restore)"
            )
        if place.shard_rows and estimator.state_per_worker:
            raise ValueError(
                f"checkpoint_dir with shard_rows=True cannot hold estimator={estimator.name!r}: its state differs "
                f"between the workers (each holds its own rows' part) and the chief writes the one checkpoint. "
                f"Run without checkpoint_dir, or with estimator='svrg'"
            )
        if place.splits_chains:
            return _run_split_with_checkpoints(method, arguments, model, setup, estimator, chain, place)
        return _run_with_checkpoints(method, arguments, model, setup, estimator, chain, place)

    def run(sampler: Sampler, verbose: bool) -> Samples:
        if not segmented:
            return _sample(
                sampler, chain.n_iters, verbose, chain.burn_in, chain.thin, chain.store_gradients, WHOLE_CHAIN_CONTINUATION
            )
        return run_segments(sampler, plan, chain, verbose)

    if place.splits_chains:
        setup = dataclasses.replace(setup, seed=shared_seed(place, setup.seed))
        samplers = build_on_replicas(
            place, lambda j: build_sampler(method, arguments, model, setup, estimator, replica=j, place=place)
        )
        return run_on_replicas(place, samplers, lambda j, sampler, verbose: run(sampler, verbose), chain.verbose)
    with whole_chain_sampler(method, arguments, model, setup, estimator, place) as sampler:
        return run(sampler, chain.verbose)


def run_segments(sampler: Sampler, plan: list[Segment], chain: Chain, verbose: bool) -> Samples:
    """A whole chain run as the dynamics' segments (:meth:`~sgmcmc.step.dynamics.base.Dynamics.segments`),
    one after the other on the same sampler (each continues the state, the iteration counter and
    so the random draws: the chain is the one an unsegmented run gives), their kept draws joined;
    ``samples.cycle`` holds each kept draw's segment label. An exception in a segment carries
    every draw kept so far, as from one run."""
    checks.check_storage(
        sum(s.kept for s in plan), sampler.n_chains, sampler.shapes, sampler.dtype, chain.store_gradients
    )
    init_sess(sampler, verbose)
    settings = dict(sampler.settings, burn_in=chain.burn_in, thin=chain.thin, n_iters=chain.n_iters)
    pieces, start = [], sampler.iteration
    for segment in plan:
        pieces.append((segment.n_iters, Keep(start + segment.skip, segment.thin), segment.label))
        start += segment.n_iters
    samples = _run_pieces(sampler, pieces, chain, verbose, settings, WHOLE_CHAIN_CONTINUATION)
    warn_after_run(sampler)
    return samples


class _CheckpointedRun:
    """One sampler's run with checkpoints in one :class:`CheckpointDirectory`: the fingerprint
    check (before any compute), then the run, resumed from the directory's last checkpoint (a
    finished run's directory: its result at once). ``combine`` turns this process's fingerprint
    into the run's (rows sharded: every worker's), ``commit`` wraps each write (rows sharded: the
    chief writes, every worker agrees); see :mod:`sgmcmc.run.distributed_checkpoints`."""

    def __init__(self, store: CheckpointDirectory, sampler: Sampler, method: Method, model: Model, chain: Chain,
                 given_seed: int | None, combine=None, commit=None):
        self.store, self.sampler, self.chain, self.commit = store, sampler, chain, commit
        options = dict(
            n_iters=chain.n_iters, burn_in=chain.burn_in, thin=chain.thin, store_gradients=chain.store_gradients,
            seed=given_seed,
        )
        if sampler.chain_ids != list(range(sampler.n_chains)):  # a replica's share of the chains
            options["chains"] = sampler.chain_ids
        self.print_ = fingerprint(
            method.name, sampler.settings, sampler.shapes, sampler.n_rows, sampler.n_chains, options,
            data=model.dataset, functions={"log_lik": model.log_lik, "log_prior": model.log_prior}, starts=model.params,
        )
        if combine is not None:
            self.print_ = combine(self.print_)
        store.check(self.print_)
        checks.check_storage(
            chain.keep.count_until(chain.n_iters), sampler.n_chains, sampler.shapes, sampler.dtype, chain.store_gradients
        )

    def run(self, verbose: bool) -> Samples:
        store, sampler, chain = self.store, self.sampler, self.chain
        preloaded = None
        if store.manifest is not None:
            sampler.restore(store.state_prefix)
            preloaded = store.load_arrays()
        else:
            init_sess(sampler, verbose)
        finished = store.manifest is not None and store.manifest["finished"]

        def checkpoint(storage, done: bool) -> None:
            n_draws, n_estimates = storage.counts()
            if done:
                n_estimates = n_draws
            shard = storage.new_shard(n_draws, n_estimates)
            write = lambda: store.commit(sampler, self.print_, shard, n_draws, n_estimates, done)  # noqa: E731
            if self.commit is None:
                write()
            else:
                self.commit(write)

        return run_chain(
            sampler, chain.n_iters, chain.keep, store_gradients=chain.store_gradients, verbose=verbose,
            settings=sampler.settings, run_start=0, preloaded=preloaded, checkpoint=None if finished else checkpoint,
            checkpoint_every=chain.checkpoint_every,
        )


def _run_with_checkpoints(
    method: Method, arguments: dict[str, Any], model: Model, setup: Setup, estimator: EstimatorSpec, chain: Chain,
    place: Placement,
) -> Samples:
    """A whole-chain run (one process, or rows sharded across workers) that saves its state and
    kept samples every ``checkpoint_every`` iterations to ``checkpoint_dir`` and, called again
    with the same arguments, resumes from the last checkpoint (a finished run's directory
    returns its result at once). See :mod:`sgmcmc.run.checkpoints`; with rows sharded the chief
    alone writes and every worker resumes from its checkpoint, :mod:`sgmcmc.run.distributed_checkpoints`."""
    collective = Collective(place.n_workers, place.worker) if place.n_workers > 1 else None
    if collective is not None:  # first: what follows (the seed exchange among it) depends on the files
        agree_on_directory(collective, os.fspath(chain.checkpoint_dir))
    refuse_replica_layout(os.fspath(chain.checkpoint_dir))
    store = CheckpointDirectory(chain.checkpoint_dir, writer=place.worker == 0)
    given_seed = setup.seed
    if given_seed is None and store.manifest is not None:  # a seed=None run resumes with the seed it drew
        setup = dataclasses.replace(setup, seed=store.manifest["seed"])
    sampler = build_sampler(method, arguments, model, setup, estimator, place=place)
    combine = commit = None
    if collective is not None:
        combine = lambda own: combined_fingerprint(collective, own)  # noqa: E731
        commit = lambda write: commit_on_chief(collective, sampler, write, store.directory)  # noqa: E731
    return _CheckpointedRun(store, sampler, method, model, chain, given_seed, combine, commit).run(chain.verbose)


def _run_split_with_checkpoints(
    method: Method, arguments: dict[str, Any], model: Model, setup: Setup, estimator: EstimatorSpec, chain: Chain,
    place: Placement,
) -> Samples:
    """A whole-chain run whose chains are split over replicas, each replica checkpointing and
    resuming its own chains in ``checkpoint_dir/replica-<r>/`` (:mod:`sgmcmc.run.distributed_checkpoints`)."""
    collective = Collective(place.n_workers, place.worker) if place.n_workers > 1 else None
    layout = ReplicaCheckpoints(chain.checkpoint_dir, place, collective)
    given_seed = setup.seed
    seed = shared_seed(place, given_seed if given_seed is not None else layout.seed)
    layout.start(seed)
    setup = dataclasses.replace(setup, seed=seed)
    samplers = build_on_replicas(
        place, lambda j: build_sampler(method, arguments, model, setup, estimator, replica=j, place=place)
    )
    runs, error = [], None
    try:
        runs = [_CheckpointedRun(layout.replica(j), s, method, model, chain, given_seed) for j, s in enumerate(samplers)]
    except ValueError as refusal:  # another worker must not wait for this one's samples
        error = refusal
    if collective is not None:
        agree_or_raise(collective, error, f"checkpoint_dir={layout.directory!r}")
    elif error is not None:
        raise error
    return run_on_replicas(place, samplers, lambda j, sampler, verbose: runs[j].run(verbose), chain.verbose)


def run_until_burned_in(
    method: Method,
    arguments: dict[str, Any],
    model: Model,
    setup: Setup,
    estimator: EstimatorSpec,
    chain: Chain,
    max_burn_in: int | None,
) -> Samples:
    """A whole chain whose burn-in is found by the kernel's criterion (``kernel.ready``): run until
    it holds for every chain (at most ``max_burn_in`` iterations, default 10·``n_iters``), then
    ``n_iters`` iterations kept with ``thin``; ``samples.burn_in_found`` is the iteration at which
    it first held for all."""
    if chain.checkpoint_dir is not None:
        raise ValueError(
            "auto_burn_in=True cannot be combined with checkpoint_dir (not supported yet): run once with "
            "auto_burn_in=True to find the burn-in (samples.burn_in_found), then pass burn_in=<that "
            "number> with checkpoint_dir"
        )
    if chain.burn_in:
        raise ValueError(f"give either burn_in={chain.burn_in} or auto_burn_in=True, not both")
    max_burn_in = 10 * chain.n_iters if max_burn_in is None else checks.check_count(max_burn_in, "max_burn_in")
    sampler = build_sampler(method, arguments, model, setup, estimator)
    keep = chain.keep
    checks.check_storage(
        keep.count_until(chain.n_iters), sampler.n_chains, sampler.shapes, sampler.dtype, chain.store_gradients
    )
    init_sess(sampler, chain.verbose)
    if not run_until_ready(sampler, max_burn_in, chain.verbose):
        chains = [int(i) for i in np.flatnonzero(~sampler.ready())]
        which = f" for chain{'s' if len(chains) > 1 else ''} {', '.join(map(str, chains))}" if sampler.n_chains > 1 else ""
        raise BurnInNotFound(
            f"{method.name}: the burn-in criterion (El hanchi 2018 Eq. 17) did not hold{which} within "
            f"max_burn_in={max_burn_in} iterations. Give a larger max_burn_in=, start nearer the mode "
            f"(e.g. at an optimiser's estimate), or set burn_in= yourself with auto_burn_in=False",
            iteration=sampler.iteration,
            chains=chains,
        )
    found = sampler.iteration
    settings = dict(sampler.settings, auto_burn_in=True, max_burn_in=max_burn_in)
    try:
        samples = run_chain(
            sampler, chain.n_iters, Keep(found, chain.thin), store_gradients=chain.store_gradients,
            verbose=chain.verbose, settings=settings, continuation=WHOLE_CHAIN_CONTINUATION,
        )
    except (DivergenceError, SamplingError, Interrupted) as error:
        if isinstance(error.samples, Samples):
            error.samples.burn_in_found = found
        raise
    samples.burn_in_found = found
    return samples
