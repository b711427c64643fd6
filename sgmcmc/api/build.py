"""From the public arguments to a :class:`~sgmcmc.run.sampler.Sampler`: every check that needs the
data or the model, in one pass, before anything is compiled.

``log_lik`` travels from the public function in :class:`~sgmcmc.api.options.Model` to
:func:`build_sampler`, which hands it to
:func:`~sgmcmc.step.estimators.assemble.assemble_estimators`; the estimators made there
(:class:`~sgmcmc.step.estimators.plain.MinibatchGradient`) call it under a gradient tape, and the
Sampler receives the estimators, not the model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import zlib
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np
import tensorflow as tf

from .. import checks, programs, tempering

from ..constraints import Constrained, check_constraints
from ..data.rows import Rows
from ..data.stream import BatchStream, is_batch_stream
from ..distribute.collective import Collective, unreached_worker
from ..distribute.placement import Placement, RowShard, placement, stratified_batch_sizes
from ..step.dynamics import KernelContext
from ..step.estimators import ControlVariate, EstimatorSpec, MinibatchCounts
from ..step.estimators.assemble import Estimators, assemble_estimators
from ..step.posterior import Posterior
from ..run.control_variate import ControlVariateSettings
from ..run.sampler import Sampler
from ..step.methods import Method
from . import reuse
from .options import Model, Setup


def chain_starts(params: Any, n_chains: int, dtype: tf.DType) -> tuple[list[dict[str, np.ndarray]], bool]:
    """The K starting dicts, and whether they were given one per chain."""
    if isinstance(params, (list, tuple)):
        if params and not all(isinstance(p, Mapping) for p in params):
            kinds = sorted({type(p).__name__ for p in params if not isinstance(p, Mapping)})
            raise TypeError(
                f"params must be a dict name -> starting value (or a list of such dicts, one per chain), got a list "
                f"of {len(params)} values ({', '.join(kinds)}). Name the arrays, e.g. "
                f"{{f'w{{i}}': w for i, w in enumerate(model.get_weights())}}, and refer to them by name in "
                f"log_lik; for a Keras model, sgmcmc.keras.from_model(model, ...) makes params, log_lik and log_prior"
            )
        if len(params) != n_chains:
            raise ValueError(
                f"params is a list of {len(params)} starting dicts but n_chains={n_chains}: give one dict per chain "
                f"(n_chains={len(params)}), or one dict for every chain to start at"
            )
        starts = [checks.check_params(p, dtype) for p in params]
        first = starts[0]
        for i, s in enumerate(starts[1:], start=1):
            if list(s) != list(first) or any(s[n].shape != first[n].shape for n in first):
                raise ValueError(
                    f"params[{i}] has names/shapes {({n: v.shape for n, v in s.items()})} but params[0] has "
                    f"{({n: v.shape for n, v in first.items()})}: every chain needs the same parameters"
                )
        return starts, True
    one = checks.check_params(params, dtype)
    return [one] * n_chains, False


def placement_of(method: Method, setup: Setup, estimator: EstimatorSpec) -> Placement:
    """Who computes what under ``setup.strategy`` (:mod:`sgmcmc.distribute.placement`). The
    starts are checked by :func:`build_sampler` (a list of them must have ``n_chains`` dicts)."""
    refusal = method.dynamics.shard_refusal or estimator.shard_refusal
    what = method.name if method.dynamics.shard_refusal else f"estimator={estimator.name!r}"
    return placement(setup.strategy, setup.shard_rows, setup.n_chains, what, refusal)


def shared_seed(place: Placement, seed: int | None) -> int | None:
    """With ``seed=None`` under a strategy: one seed drawn for every replica and worker (worker
    0's draw, gathered), so that the replicas' chains belong to one run and the workers of a
    rows-sharded run draw the same noise. A given seed is kept (the workers' seeds are compared
    at the end of set-up, :func:`_row_shard`)."""
    if seed is not None or not place.distributed:
        return seed
    seed = secrets.randbits(63)
    if place.n_workers > 1:
        seed = int(Collective(place.n_workers, place.worker).all_gather(np.array([seed], np.int64))[0, 0])
    return seed


def _row_shard(place: Placement, data: dict, minibatch_size: Any, seed: int) -> tuple[RowShard, int]:
    """With rows sharded: check that every worker passed the same entries (names, row shapes,
    dtypes) and the same seed, find N = Σ N_w and n, and this worker's n_w
    (:func:`stratified_batch_sizes`)."""
    collective = Collective(place.n_workers, place.worker)
    schema = repr(sorted((k, tuple(v.shape[1:]), np.dtype(v.dtype).str) for k, v in data.items()))
    n_local = len(next(iter(data.values())))
    try:
        status = collective.all_gather(np.array([n_local, zlib.crc32(schema.encode()), seed], np.int64))
    except tf.errors.OpError as error:
        raise RuntimeError(
            f"worker {unreached_worker(error, collective)} did not finish its set-up (a check failed there, "
            f"or it stopped; see its output): the workers exchange their row counts once every worker's "
            f"checks have passed, and this one waited {collective.timeout:g} s at most "
            f"(SGMCMC_COLLECTIVE_TIMEOUT)"
        ) from error
    differ = [w for w in range(place.n_workers) if status[w, 1] != status[place.worker, 1]]
    if differ:
        raise ValueError(
            f"with shard_rows=True every worker passes the same entries (names, shapes after the first axis, "
            f"dtypes); worker(s) {', '.join(map(str, differ))} passed others than this worker's {schema}"
        )
    seeds = sorted({int(v) for v in status[:, 2]})
    if len(seeds) > 1:
        raise ValueError(
            f"with shard_rows=True every worker must pass the same seed (they must draw the same noise); "
            f"got {seeds}. Pass one seed to all workers, or seed=None (one is drawn and shared)"
        )
    counts = [int(c) for c in status[:, 0]]
    n_rows = sum(counts)
    n = checks.batch_size(minibatch_size, n_rows)
    return RowShard(collective, n_rows, n), stratified_batch_sizes(n, counts)[place.worker]


def _constrained(method: Method, constraints: Any, start: dict[str, np.ndarray], dtype: tf.DType):
    """The :class:`~sgmcmc.constraints.Constrained` map of ``constraints``, or None."""
    if constraints is not None and not method.supports_constraints:
        raise ValueError(
            f"{method.name} does not take constraints: its parameters already live on their support "
            f"(the simplex); remove constraints=..."
        )
    bijectors = check_constraints(constraints, list(start))
    if not bijectors:
        return None
    return Constrained(bijectors, {k: v.shape for k, v in start.items()}, dtype)


def _control_variate(spec: ControlVariate, names: list[str], verbose: bool, temperature: float) -> ControlVariateSettings:
    """The mode search's settings; ``opt_stepsize=None`` is chosen from the curvature
    (:func:`sgmcmc.run.mode_search.auto_opt_stepsize`); a given one times the temperature (the
    same search on log p / T, :mod:`sgmcmc.tempering`)."""
    opt = None if spec.opt_stepsize is None else checks.per_parameter(spec.opt_stepsize, names, "opt_stepsize")
    return ControlVariateSettings(tempering.scaled(opt, temperature), spec.n_iters_opt, verbose)


#: Elements of a tf.data pipeline the trial evaluation looks at (:func:`checks.trial_evaluation`).
TRIAL_ELEMENTS = 2


def batch_stream(method: Method, model: Model, setup: Setup, estimator: EstimatorSpec) -> BatchStream:
    """The user's ``tf.data`` pipeline as the sampler reads it (:mod:`sgmcmc.data.stream`), after
    the refusals of what it cannot serve, each naming the fix; reads the element spec only."""
    name = method.name
    if not is_batch_stream(model.dataset):
        raise ValueError(
            f"n_rows={setup.n_rows!r} is given with a dataset of arrays, whose rows are counted: n_rows is N for a "
            f"tf.data.Dataset of minibatches only; remove n_rows"
        )
    arrays = "or pass the rows as a dict of name -> array"
    if method.model == "counts":
        raise ValueError(
            f"{name} does not take a tf.data.Dataset: its count estimator is not the plain minibatch estimate; "
            f"pass the rows as a dict of name -> array"
        )
    if estimator.stream_refusal is not None:
        raise ValueError(
            f"{name if method.control_variate else f'estimator={estimator.name!r}'} {estimator.stream_refusal}, which a "
            f"tf.data.Dataset of minibatches cannot give: use {checks.BATCH_STREAM_SAMPLERS} with estimator='plain', "
            f"{arrays}"
        )
    if setup.strategy is not None:
        raise ValueError(
            "a tf.data.Dataset cannot be used with strategy= (not built: with shard_rows each worker's pipeline "
            "would be its rows' stratum, and split chains would each need their share of the elements): run "
            f"without strategy, {arrays}"
        )
    if setup.minibatch_replace:
        raise ValueError(
            "minibatch_replace=True does not apply to a tf.data.Dataset: the pipeline makes the minibatches "
            "(.shuffle and .batch); leave minibatch_replace=False"
        )
    given = None if setup.minibatch_size == Setup.minibatch_size else setup.minibatch_size
    checks.check_batch_stream(model.dataset, setup.n_rows, given)
    return BatchStream(model.dataset, setup.n_rows, tf.as_dtype(setup.dtype).as_numpy_dtype)


def _counts_estimator(arguments: dict, model: Model, setup: Setup, starts: list, data: dict, n: int):
    """Checks of a counts-based model before compiling; its estimator factory for the Sampler."""
    for i, start in enumerate(starts):
        checks.check_simplex_params(start, setup.dtype, "params" if len(starts) == 1 else f"params[{i}]")
    alpha = checks.check_alpha(arguments["alpha"], starts[0], setup.dtype)
    checks.trial_counts(model.counts, data, starts[0], setup.dtype, n)
    return partial(MinibatchCounts, model.counts, alpha, replace=setup.minibatch_replace)


def build_sampler(
    method: Method,
    arguments: dict[str, Any],
    model: Model,
    setup: Setup,
    estimator: EstimatorSpec,
    *,
    replica: int | None = None,
    place: Placement | None = None,
) -> Sampler:
    """Check everything and make the sampler (nothing is compiled here); the arguments as for
    :func:`_checked_construction`."""
    return _checked_construction(method, arguments, model, setup, estimator, replica=replica, place=place).build()


@contextlib.contextmanager
def whole_chain_sampler(
    method: Method,
    arguments: dict[str, Any],
    model: Model,
    setup: Setup,
    estimator: EstimatorSpec,
    place: Placement,
) -> Iterator[Sampler]:
    """The sampler of one whole-chain run on one device, after every check: a kept sampler of
    an earlier call with the same model, shapes and settings started again, or a new one, kept
    after the run for the next (:mod:`sgmcmc.api.reuse`)."""
    construction = _checked_construction(method, arguments, model, setup, estimator, place=place)
    with reuse.reused_or_new(construction.reuse_key, construction.build, construction.start_again) as sampler:
        yield sampler


@dataclasses.dataclass
class _Construction:
    """A checked set-up: the :class:`Sampler`'s arguments, what a kept sampler needs to start
    again as this one, and what makes the reuse key (None: never reused; made only when a
    whole-chain run asks, :mod:`sgmcmc.api.reuse`)."""

    head: tuple
    args: tuple
    kwargs: dict
    estimators: Callable[[], Estimators]
    again: dict
    reuse_key: Callable[[], Any] | None = None

    def build(self) -> Sampler:
        """The estimators (their variables) and then the sampler: only when no kept sampler serves."""
        return Sampler(*self.head, self.estimators(), *self.args, **self.kwargs)

    def start_again(self, sampler: Sampler) -> None:
        reuse.start_again(sampler, **self.again)


def _checked_construction(
    method: Method,
    arguments: dict[str, Any],
    model: Model,
    setup: Setup,
    estimator: EstimatorSpec,
    *,
    replica: int | None = None,
    place: Placement | None = None,
) -> _Construction:
    """Check everything that needs the data or the model, and what makes the sampler.

    Parameters
    ----------
    method
        The row of :data:`~sgmcmc.step.methods.METHODS`.
    arguments
        The method's own arguments by name (``stepsize``, ``alpha``, …; its dynamics'
        ``hyperparameters`` and whatever else its ``from_arguments`` reads).
    model, setup, estimator
        The user's model, the set-up options and the estimator spec.
    replica
        Under a strategy that splits the chains: the local replica whose chains this sampler
        steps (the whole-chain run builds one sampler per replica).
    place
        The placement when the caller has it already (else worked out here).
    """
    dtype = setup.dtype
    place = placement_of(method, setup, estimator) if place is None else place
    if place.splits_chains and replica is None:
        raise ValueError(
            f"{method.name}_setup with this strategy would split the chains over {place.n_workers * len(place.devices)} "
            f"replicas; the step-by-step API steps one process's chains on one device (not supported yet). "
            f"Use the whole-chain {method.name}(...) with strategy=, or shard_rows=True under MultiWorkerMirroredStrategy"
        )
    all_starts, per_chain = chain_starts(model.params, setup.n_chains, dtype)
    chain_ids = place.chains[replica or 0]
    starts = [all_starts[c] for c in chain_ids]
    names = list(starts[0])
    constrained = _constrained(method, model.constraints, starts[0], dtype)
    if constrained is not None:  # before the trial evaluation: a start outside a support is refused here
        unconstrained = {id(s): constrained.to_unconstrained(s) for s in [all_starts[0], *starts]}
        starts = [unconstrained[id(s)] for s in starts]
        all_starts = [unconstrained[id(all_starts[0])]]
    if setup.n_rows is not None or is_batch_stream(model.dataset):
        rows = batch_stream(method, model, setup, estimator)
        data, n_rows, n = {}, rows.n_rows, rows.batch_size
    else:
        rows = Rows(checks.check_dataset(model.dataset), tf.as_dtype(dtype).as_numpy_dtype)
        data = rows.as_read()
        n_rows = len(next(iter(data.values())))
        n = None if place.shard_rows else checks.batch_size(setup.minibatch_size, n_rows)
    context = KernelContext(names, n_rows, n, estimator.name)
    kernel = method.make_kernel(arguments, context)  # checks the user's values (errors name them)
    temperature = tempering.check_temperature(model.temperature)
    if temperature != 1.0:
        kernel = method.make_kernel(tempering.tempered_arguments(arguments, method.dynamics.temperature_powers, temperature), context)
    cv = None
    if isinstance(estimator, ControlVariate):
        cv = _control_variate(estimator, names, setup.verbose, temperature)
    seed = shared_seed(place, setup.seed) if place.shard_rows else setup.seed
    estimator.check_size(len(starts), n_rows, {k: v.shape for k, v in starts[0].items()}, dtype)
    log_lik, log_prior, make_estimator = model.log_lik, model.log_prior, None
    if method.model == "counts":
        make_estimator = _counts_estimator(arguments, model, setup, starts, data, n)
    else:
        # The user's functions at the user's (constrained) start: errors name their own code.
        first = starts[0] if constrained is None else constrained.to_constrained(starts[0])
        trial = data
        if isinstance(rows, BatchStream):  # the pipeline's first elements: the rows the chains see first
            trial = checks.check_dataset(rows.first_rows(TRIAL_ELEMENTS * n), f" of the pipeline's first {TRIAL_ELEMENTS} elements")
        checks.trial_evaluation(log_lik, log_prior, trial, first, dtype, check_model=model.check_model)
    shard = None
    if place.shard_rows:  # last: a worker gets here only when all its own set-up checks passed
        shard, n = _row_shard(place, data, setup.minibatch_size, seed)
    # A keyword-only hyperparameter (an option added later, e.g. SGHMC's noise_correction) is
    # recorded only when it differs from its default: runs and checkpoints made before it
    # existed keep the settings they had.
    optional = method.dynamics.public.keyword_only
    settings = {
        h: arguments[h] for h in method.hyperparameters
        if h not in optional or arguments[h] != method.dynamics.defaults.get(h)
    }
    settings.update(minibatch_size=n if shard is None else shard.batch_size, dtype=dtype.name)
    if shard is not None:
        settings.update(shard_rows=True, workers=place.n_workers)
    estimator_settings = estimator.settings()
    if method.control_variate:
        estimator_settings.pop("estimator", None)
    settings.update(estimator_settings)
    if setup.minibatch_replace:
        settings.update(minibatch_replace=True)
    if isinstance(rows, BatchStream):
        settings.update(n_rows=n_rows)
    if temperature != 1.0:
        settings.update(temperature=temperature)
        log_lik, log_prior = tempering.tempered(log_lik, log_prior, temperature)
    if constrained is not None:
        settings.update(constraints=dict(constrained.bijectors))
        log_lik, log_prior = constrained.wrap(log_lik, log_prior)
    # XLA where it measured faster (docs/DESIGN.md): the minibatches arrive as blocks gathered on
    # the host, so the compiled loop has no sampler of its own and XLA fuses the iteration. The
    # dynamics and the estimator each say whether they suit it; not the count models (not
    # measured); not with rows sharded (the loop's collective ops run in graph mode); not when
    # the step reads all rows (SVRG's refresh) from entries TensorFlow cannot read in place
    # (memmaps, h5py, unaligned arrays: read by a host callback, which XLA cannot compile).
    xla = (
        method.dynamics.xla and estimator.xla and make_estimator is None and shard is None
        and (rows.shared_in_place or not estimator.reads_all_rows)
    )
    # The model, made once: every estimator of the sampler holds it (step/posterior.py).
    posterior = Posterior(log_lik, log_prior, data, rows, None if shard is None else shard.collective.all_reduce_sum)
    estimators = partial(
        assemble_estimators, estimator, posterior, n, len(starts), dtype,
        {k: np.shape(v) for k, v in starts[0].items()}, all_starts[0], replace=setup.minibatch_replace,
        own_estimator=make_estimator,
    )
    construction = _Construction(
        (method.name, kernel),
        (starts, n, seed, dtype, cv),
        dict(
            starts_given_per_chain=per_chain, settings=settings, constraints=constrained,
            minibatch_replace=setup.minibatch_replace,
            xla_by_default=xla, chains=chain_ids, shard=shard, mode_start=all_starts[0],
            stepsize_check=model.check_stepsize, rows=rows,
        ),
        estimators,
        dict(
            starts=starts, seed=seed, starts_given_per_chain=per_chain, mode_start=all_starts[0],
            stepsize_check=model.check_stepsize, verbose=setup.verbose, settings=settings,
        ),
    )
    if not place.distributed and replica is None:
        construction.reuse_key = lambda: (
            method.name, programs.snapshot(kernel), programs.snapshot(arguments), programs.snapshot(settings),
            programs.callable_record(model.log_lik), programs.callable_record(model.log_prior),
            programs.callable_record(model.counts), programs.snapshot(model.constraints),
            tuple((name, programs.entry_record(entry)) for name, entry in data.items()),
            programs.entry_record(model.dataset) if isinstance(rows, BatchStream) else None,
            {k: v.shape for k, v in starts[0].items()}, len(starts), per_chain, chain_ids, n, dtype.name,
            None if cv is None else (programs.snapshot(cv.opt_stepsize), cv.n_iters_opt),
            programs.snapshot(estimator), setup.minibatch_replace, xla, model.check_model,
        )
    return construction
