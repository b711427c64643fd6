"""The public samplers with the R package's names and argument order, in snake_case.

Adding a sampler is a kernel (:mod:`sgmcmc.dynamics`) plus one entry in :data:`METHODS`; each
public function keeps an explicit signature and docstring for the user's editor and hands its
arguments to :func:`_build` (``*_setup``) or :func:`_run` (whole chain).
"""

from __future__ import annotations

import secrets
import zlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from . import inputs
from .constraints import Constrained, check_constraints
from .chain import run_chain
from .distribute.collective import Collective, failed_worker
from .distribute.placement import Placement, RowShard, placement, stratified_batch_sizes
from .distribute.replicas import run_on_replicas
from .checkpoints import CheckpointDirectory, fingerprint
from .dynamics import SGHMC, SGLD, SGNHT
from .estimators import SAGAGradient, SVRGGradient
from .sampler import ControlVariateSettings, Keep, Sampler
from .samples import Samples
from .session import init_sess

DEFAULT_DTYPE = tf.float32


@dataclass(frozen=True)
class Method:
    """A public sampler: how to make its kernel from the user's arguments."""

    make_kernel: Callable[[dict[str, Any], list[str]], Any]
    control_variate: bool = False
    hyperparameters: tuple[str, ...] = ("stepsize",)
    #: "log_lik": the user gives log_lik and log_prior (gradient samplers); "counts": the user gives
    #: counts and alpha (simplex samplers, see the block at the end).
    model: str = "log_lik"
    #: False for samplers whose parameters already live on their support (scir, sgrld): passing
    #: ``constraints`` to them is refused (SPEC §10).
    supports_constraints: bool = True


def _sgld(args, names):
    return SGLD(inputs.per_parameter(args["stepsize"], names, "stepsize", schedules=True))


def _sghmc(args, names):
    return SGHMC(
        inputs.per_parameter(args["stepsize"], names, "stepsize", schedules=True),
        inputs.per_parameter(args["alpha"], names, "alpha"),
        inputs.check_count(args["L"], "L"),
    )


def _sgnht(args, names):
    return SGNHT(inputs.per_parameter(args["stepsize"], names, "stepsize", schedules=True), inputs.per_parameter(args["a"], names, "a"))


METHODS: dict[str, Method] = {
    "sgld": Method(_sgld),
    "sghmc": Method(_sghmc, hyperparameters=("stepsize", "alpha", "L")),
    "sgnht": Method(_sgnht, hyperparameters=("stepsize", "a")),
    "sgldcv": Method(_sgld, control_variate=True),
    "sghmccv": Method(_sghmc, control_variate=True, hyperparameters=("stepsize", "alpha", "L")),
    "sgnhtcv": Method(_sgnht, control_variate=True, hyperparameters=("stepsize", "a")),
}


def _starts(params: Any, n_chains: Any, dtype: tf.DType) -> tuple[list[dict[str, np.ndarray]], bool]:
    """The K starting dicts, and whether they were given one per chain."""
    k = inputs.check_count(n_chains, "n_chains")
    if isinstance(params, (list, tuple)):
        if len(params) != k:
            raise ValueError(
                f"params is a list of {len(params)} starting dicts but n_chains={k}: give one dict per chain "
                f"(n_chains={len(params)}), or one dict for every chain to start at"
            )
        starts = [inputs.check_params(p, dtype) for p in params]
        first = starts[0]
        for i, s in enumerate(starts[1:], start=1):
            if list(s) != list(first) or any(s[n].shape != first[n].shape for n in first):
                raise ValueError(
                    f"params[{i}] has names/shapes {({n: v.shape for n, v in s.items()})} but params[0] has "
                    f"{({n: v.shape for n, v in first.items()})}: every chain needs the same parameters"
                )
        return starts, True
    one = inputs.check_params(params, dtype)
    return [one] * k, False


ESTIMATORS = ("plain", "cv", "svrg", "saga")


@dataclass(frozen=True)
class EstimatorChoice:
    """The gradient estimator of a sampler (SPEC §8), checked before anything is computed."""

    name: str
    svrg_period: int = 100
    max_memory: float = 2 * 2**30

    def wrap(self) -> Callable | None:
        """``wrap_estimator(plain, like)`` for the Sampler, or None (plain, cv)."""
        if self.name == "svrg":
            return partial(SVRGGradient, period=self.svrg_period)
        if self.name == "saga":
            return SAGAGradient
        return None

    def settings(self) -> dict[str, Any]:
        """What the chain depends on, for ``Samples.settings`` and the checkpoint fingerprint
        (nothing for plain, so plain runs keep their fingerprints)."""
        if self.name == "svrg":
            return dict(estimator="svrg", svrg_period=self.svrg_period)
        return {} if self.name == "plain" else dict(estimator=self.name)

    def check_memory(self, n_chains: int, n_rows: int, shapes: dict[str, tuple], dtype: tf.DType) -> None:
        """SAGA's table must fit in ``max_memory`` bytes."""
        if self.name != "saga":
            return
        dim = sum(int(np.prod(shape)) for shape in shapes.values())
        need = SAGAGradient.table_bytes(n_chains, n_rows, dim, dtype)
        if need > self.max_memory:
            raise ValueError(
                f"estimator='saga' needs a table of {n_chains} chain(s) x {n_rows} rows x {dim} parameters x "
                f"{tf.as_dtype(dtype).size} bytes = {need:,} bytes ({need / 2**30:.3g} GiB), more than "
                f"max_memory={self.max_memory:,.0f} bytes. Raise max_memory= if the memory is there, use "
                f"estimator='svrg' (memory of one full-data gradient per chain), or a smaller model / fewer chains"
            )


def _estimator_choice(method: str, spec: Method, args: dict[str, Any]) -> EstimatorChoice:
    """The estimator the arguments ask for; clear errors for bad values."""
    name = args.get("estimator", "cv" if spec.control_variate else "plain")
    if name not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(map(repr, ESTIMATORS))}, got {name!r}")
    if name != "cv" and args.get("opt_stepsize") is not None:
        raise ValueError(
            f"opt_stepsize is the stepsize of the control variate's mode search: it applies only with "
            f"estimator='cv', not {name!r}"
        )
    replace = args.get("minibatch_replace", False)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"minibatch_replace must be True or False, got {replace!r}")
    choice = EstimatorChoice(name)
    if name == "svrg":
        choice = EstimatorChoice(name, svrg_period=inputs.check_count(args["svrg_period"], "svrg_period"))
    if name == "saga":
        choice = EstimatorChoice(name, max_memory=inputs.check_positive(args["max_memory"], "max_memory"))
    return choice


def _placement(method: str, args: dict[str, Any]) -> Placement:
    """Who computes what under ``args["strategy"]`` (:mod:`sgmcmc.distribute.placement`)."""
    spec = METHODS[method]
    starts, _ = _starts(args["params"], args["n_chains"], inputs.as_dtype(args["dtype"]))
    estimator = args.get("estimator", "cv" if spec.control_variate else "plain")
    return placement(args.get("strategy"), args.get("shard_rows"), len(starts), method, estimator)


def _check_seed(seed: Any) -> int | None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    return None if seed is None else int(seed)


def _shared_seed(place: Placement, seed: int | None) -> int | None:
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
        who = failed_worker(error, place.worker)
        if who is None and place.n_workers == 2:
            who = 1 - place.worker
        raise RuntimeError(
            f"worker {who if who is not None else '(one of the others)'} did not finish its set-up (a check failed there, "
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
    n = inputs.batch_size(minibatch_size, n_rows)
    return RowShard(collective, n_rows, n), stratified_batch_sizes(n, counts)[place.worker]


def _build(method: str, args: dict[str, Any], replica: int | None = None, place: Placement | None = None) -> Sampler:
    """Validate everything and make the sampler (nothing is compiled here). Under a strategy
    that splits the chains, ``replica`` (a local replica's index) selects its chains; the
    whole-chain run builds one sampler per replica (:func:`_run`). ``place``: the placement
    when the caller has it already (else worked out here)."""
    spec = METHODS[method]
    dtype = inputs.as_dtype(args["dtype"])
    place = _placement(method, args) if place is None else place
    if place.splits_chains and replica is None:
        raise ValueError(
            f"{method}_setup with this strategy would split the chains over {place.n_workers * len(place.devices)} "
            f"replicas; the step-by-step API steps one process's chains on one device (not supported yet). "
            f"Use the whole-chain {method}(...) with strategy=, or shard_rows=True under MultiWorkerMirroredStrategy"
        )
    all_starts, per_chain = _starts(args["params"], args["n_chains"], dtype)
    chain_ids = place.chains[replica or 0]
    starts = [all_starts[c] for c in chain_ids]
    names = list(starts[0])
    constrained = _constrained(method, spec, args.get("constraints"), starts[0], dtype)
    if constrained is not None:  # before the trial evaluation: a start outside a support is refused here
        unconstrained = {id(s): constrained.to_unconstrained(s) for s in [all_starts[0], *starts]}
        starts = [unconstrained[id(s)] for s in starts]
        all_starts = [unconstrained[id(all_starts[0])]]
    kernel = spec.make_kernel(args, names)
    choice = _estimator_choice(method, spec, args)
    cv = None
    if choice.name == "cv":
        # opt_stepsize=None: chosen from the curvature by the mode search (control_variates.py)
        opt = args["opt_stepsize"]
        if opt is None and place.shard_rows and args["n_iters_opt"]:
            raise ValueError(
                f"{method} with shard_rows=True needs an explicit opt_stepsize: the automatic one is chosen from "
                f"the curvature of the full data, which is not yet computed across workers (each worker would "
                f"see its own rows and choose another stepsize)"
            )
        cv = ControlVariateSettings(
            None if opt is None else inputs.per_parameter(opt, names, "opt_stepsize"),
            inputs.check_count(args["n_iters_opt"], "n_iters_opt", allow_zero=True),
            bool(args.get("verbose", True)),
        )
    seed = _check_seed(args["seed"])
    if place.shard_rows:
        seed = _shared_seed(place, seed)
    data = inputs.check_dataset(args["dataset"], dtype)
    n = None if place.shard_rows else inputs.batch_size(args["minibatch_size"], len(next(iter(data.values()))))
    choice.check_memory(len(starts), len(next(iter(data.values()))), {k: v.shape for k, v in starts[0].items()}, dtype)
    log_lik, log_prior = args.get("log_lik"), args.get("log_prior")
    model = None
    if spec.model == "counts":
        model = _counts_model(args, starts, data, n, dtype)
    else:
        # The user's functions at the user's (constrained) start: errors name their own code.
        first = starts[0] if constrained is None else constrained.to_constrained(starts[0])
        inputs.trial_evaluation(log_lik, log_prior, data, first, dtype, check_model=args["check_model"])
    shard = None
    if place.shard_rows:  # last: a worker gets here only when all its own set-up checks passed
        shard, n = _row_shard(place, data, args["minibatch_size"], seed)
    settings = {h: args[h] for h in spec.hyperparameters}
    settings.update(minibatch_size=n if shard is None else shard.batch_size, dtype=dtype.name)
    if shard is not None:
        settings.update(shard_rows=True, workers=place.n_workers)
    if cv is not None:
        settings.update(opt_stepsize=args["opt_stepsize"], n_iters_opt=cv.n_iters_opt)
    if not spec.control_variate:
        settings.update(choice.settings())
    if args.get("minibatch_replace", False):
        settings.update(minibatch_replace=True)
    if constrained is not None:
        settings.update(constraints=dict(constrained.bijectors))
        log_lik, log_prior = constrained.wrap(log_lik, log_prior)
    replace = bool(args.get("minibatch_replace", False))
    # XLA where it measured faster (docs/DESIGN.md): the minibatches arrive as blocks gathered on
    # the host, so the compiled loop has no sampler of its own and XLA fuses the iteration, with or
    # without replacement; not SAGA (its table is copied every iteration under XLA: 10x slower),
    # not OSGLD (XLA's eigendecompositions: 5x slower), not the count models (not measured).
    # Not with rows sharded: the loop's collective ops run in graph mode.
    xla = choice.name != "saga" and method != "osgld" and model is None and shard is None
    return Sampler(
        method, kernel, log_lik, log_prior, data, starts, n, seed, dtype, cv,
        starts_given_per_chain=per_chain, settings=settings, constraints=constrained,
        make_estimator=None if model is None else model.get("make_estimator"),
        wrap_estimator=choice.wrap(), minibatch_replace=replace, xla_by_default=xla,
        chains=chain_ids, shard=shard, mode_start=all_starts[0],
    )


def _constrained(method: str, spec: Method, constraints: Any, start: dict[str, np.ndarray], dtype: tf.DType):
    """The :class:`~sgmcmc.constraints.Constrained` map of ``constraints``, or None."""
    if constraints is not None and not spec.supports_constraints:
        raise ValueError(
            f"{method} does not take constraints: its parameters already live on their support "
            f"(the simplex); remove constraints=..."
        )
    bijectors = check_constraints(constraints, list(start))
    if not bijectors:
        return None
    return Constrained(bijectors, {k: v.shape for k, v in start.items()}, dtype)


def _keep(n_iters: Any, burn_in: Any, thin: Any) -> tuple[int, Keep]:
    n_iters = inputs.check_count(n_iters, "n_iters")
    thin = inputs.check_count(thin, "thin")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValueError(f"burn_in must be a whole number >= 0, got {burn_in!r}")
    return n_iters, Keep(int(burn_in), thin)


def sample_chain(
    sampler: Sampler, n_iters: int, verbose: bool = True, *, burn_in: int = 0, thin: int = 1, store_gradients: bool = False
) -> Samples:
    """Run ``n_iters`` iterations of a sampler made by a ``*_setup`` function, in compiled chunks.

    A sampler that :func:`~sgmcmc.init_sess` has not prepared is prepared first (for the CV
    samplers: the mode search). A prepared sampler *continues* from its current state, random
    stream and iteration count, so ``sample_chain(s, a)`` then ``sample_chain(s, b)`` give the
    samples of one run of ``a + b`` iterations. ``burn_in`` and ``thin`` count on the sampler's
    global iteration counter: the kept iterations are ``burn_in + thin``, ``burn_in + 2·thin``, ….

    Returns :class:`~sgmcmc.Samples` (see :func:`sgld`). Raises
    :class:`~sgmcmc.DivergenceError`, :class:`~sgmcmc.SamplingError` or
    :class:`~sgmcmc.Interrupted` carrying the samples kept so far.
    """
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sample_chain needs a sampler made by a *_setup function, got {type(sampler).__name__}")
    n_iters, keep = _keep(n_iters, burn_in, thin)
    if store_gradients and METHODS[sampler.method].model == "counts":
        raise ValueError(f"{sampler.method} uses no gradient: store_gradients does not apply; leave it False")
    # Before the mode search and before any iteration: refuse a run whose samples cannot be kept.
    it0 = sampler.iteration if sampler.initialised else 0
    inputs.check_storage(
        keep.count_until(it0 + n_iters) - keep.count_until(it0), sampler.n_chains, sampler.shapes,
        sampler.dtype, bool(store_gradients),
    )
    if not sampler.initialised:
        if keep.count_until(n_iters) == 0:
            raise ValueError(f"burn_in={burn_in} with n_iters={n_iters} and thin={thin} keeps no iteration")
        init_sess(sampler, verbose)
    return run_chain(sampler, n_iters, keep, store_gradients=bool(store_gradients), verbose=verbose, settings=sampler.settings)


def _run(method: str, args: dict[str, Any]) -> Samples:
    n_iters, keep = _keep(args["n_iters"], args["burn_in"], args["thin"])
    if keep.count_until(n_iters) == 0:
        raise ValueError(
            f"burn_in={keep.burn_in} is not less than n_iters={n_iters}: no iteration would be kept; "
            f"give burn_in < n_iters"
        )
    place = _placement(method, args)
    if place.distributed and args.get("checkpoint_dir") is not None:
        raise ValueError(
            "checkpoint_dir with a multi-replica strategy is not supported yet: run without checkpoint_dir, "
            "or checkpoint each worker's run without a strategy"
        )
    if place.splits_chains:
        def run(sampler, verbose):
            return sample_chain(
                sampler, n_iters, verbose, burn_in=keep.burn_in, thin=keep.thin,
                store_gradients=args.get("store_gradients", False),
            )

        args = dict(args, seed=_shared_seed(place, _check_seed(args["seed"])))
        return run_on_replicas(place, lambda j: _build(method, args, replica=j, place=place), run, args["verbose"])
    if args.get("checkpoint_dir") is None:
        sampler = _build(method, args, place=place)
        return sample_chain(
            sampler, n_iters, args["verbose"], burn_in=keep.burn_in, thin=keep.thin,
            store_gradients=args.get("store_gradients", False),
        )
    return _run_with_checkpoints(method, args, n_iters, keep)


def _run_with_checkpoints(method: str, args: dict[str, Any], n_iters: int, keep: Keep) -> Samples:
    """A whole-chain run that saves its state and kept samples every ``checkpoint_every``
    iterations to ``checkpoint_dir`` and, called again with the same arguments, resumes from the
    last checkpoint (a finished run's directory returns its result at once). See
    :mod:`sgmcmc.checkpoints`."""
    every = inputs.check_count(args["checkpoint_every"], "checkpoint_every")
    store = CheckpointDirectory(args["checkpoint_dir"])
    given_seed = args["seed"]
    if given_seed is None and store.manifest is not None:
        args = dict(args, seed=store.manifest["seed"])  # a seed=None run resumes with the seed it drew
    sampler = _build(method, args)
    store_gradients = bool(args.get("store_gradients", False))
    options = dict(n_iters=n_iters, burn_in=keep.burn_in, thin=keep.thin, store_gradients=store_gradients, seed=given_seed)
    print_ = fingerprint(
        method, sampler.settings, sampler.shapes, sampler.n_rows, sampler.n_chains, options, data=args.get("dataset"),
        functions={k: args.get(k) for k in ("log_lik", "log_prior")}, starts=args.get("params"),
    )
    store.check(print_)
    inputs.check_storage(keep.count_until(n_iters), sampler.n_chains, sampler.shapes, sampler.dtype, store_gradients)
    preloaded = None
    if store.manifest is not None:
        sampler.restore(store.state_prefix)
        preloaded = store.load_arrays()
    else:
        init_sess(sampler, args["verbose"])
    finished = store.manifest is not None and store.manifest["finished"]

    def checkpoint(storage, done: bool) -> None:
        n_draws, n_estimates = storage.counts()
        if done:
            n_estimates = n_draws
        store.commit(sampler, print_, storage.new_shard(n_draws, n_estimates), n_draws, n_estimates, done)

    return run_chain(
        sampler, n_iters, keep, store_gradients=store_gradients, verbose=args["verbose"], settings=sampler.settings,
        run_start=0, preloaded=preloaded, checkpoint=None if finished else checkpoint, checkpoint_every=every,
    )


# -- step-by-step set-up (R: sgldSetup, ...) ------------------------------------------------

_SETUP_PARAMETERS = """
    Parameters
    ----------
    log_lik : callable
        ``log_lik(params, dataset)``: the SUM of the log-likelihood over the rows of
        ``dataset`` it is given, a scalar tensor, written with TF/TFP ops.
    dataset : dict or pandas.DataFrame
        Name -> array-like, observations on the first axis (all the same length N).
        Floating entries are cast to ``dtype``; integer entries stay integers.
    params : dict or list of dicts
        Name -> starting value (scalar or array); its shape is the parameter's. A list of
        ``n_chains`` dicts starts chain k at dict k.
    stepsize : float or dict
        ε: one number for all parameters, or a dict with exactly the names of ``params``.
    log_prior : callable, optional
        ``log_prior(params)``, a scalar tensor; None is a flat prior.
    minibatch_size : float or int
        A proportion of N in (0, 1), or a count of rows.
    seed : int, optional
        Makes the run reproducible; None draws fresh randomness.
    dtype : tf.DType, keyword-only
        ``tf.float32`` (default) or ``tf.float64``.
    n_chains : int, keyword-only
        K chains stepped together in one compiled loop, each with its own minibatches and noise.
    constraints : dict, keyword-only
        Name -> ``tfp.bijectors.Bijector`` θ = b(ξ) (e.g. ``Softplus()`` for a positive
        parameter, ``SoftmaxCentered()`` for a simplex, ``CorrelationCholesky()``). Starting
        values and samples are on the constrained scale (θ) and ``log_lik``/``log_prior`` see
        θ; the chain moves ξ, and the log prior gains log|det J_b(ξ)|. ``log_prior`` is a
        density of θ, so ``log_prior=None`` is flat on the constrained scale (the Jacobian is
        still added). A start outside a bijector's support is refused. Stored gradients are
        with respect to ξ (``Samples.unconstrained``); ``get_params`` returns θ while
        ``sampler.params`` holds the chain's state ξ. See :mod:`sgmcmc.constraints`.
    minibatch_replace : bool, keyword-only
        False (default): each minibatch is n distinct rows (SPEC §3). True: n rows drawn i.i.d.
        uniformly with replacement (one random draw, as the JAX libraries do); the N/n scaling
        keeps the estimate unbiased.
"""

_ESTIMATOR_OPTIONS = r"""
    Gradient estimators (keyword-only; SPEC §8, :mod:`sgmcmc.estimators`)
    -----------------------------------------------------------------------
    estimator : {"plain", "cv", "svrg", "saga"}
        ``"plain"``: :math:`g = \nabla\log p(\theta) + \frac{N}{n}\sum_{i\in S}\nabla\log p(x_i|\theta)`.
        ``"cv"``: control variates at the mode (Baker et al. 2018; as ``sgldcv``): uses
        ``opt_stepsize`` (None: automatic) and ``n_iters_opt``.
        ``"svrg"``: :math:`g = \nabla\log p(\tilde\theta|x) + g_S(\theta) - g_S(\tilde\theta)`,
        the anchor :math:`\tilde\theta` (per chain) set to the state and its full-data gradient
        recomputed (in batches) at iterations 1, 1 + ``svrg_period``, 1 + 2·``svrg_period``, ….
        ``"saga"``: :math:`g = \nabla\log p(\theta) + \sum_i\phi_i + \frac{N}{n}\sum_{i\in S}(\nabla\log p(x_i|\theta) - \phi_i)`,
        then :math:`\phi_i \leftarrow \nabla\log p(x_i|\theta)` for i ∈ S; the table φ (N × dim per
        chain) starts at the per-row gradients at the start (Dubey et al. 2016).
    opt_stepsize, n_iters_opt
        The SGD mode search of ``"cv"`` (see :func:`sgldcv_setup`).
    svrg_period : int
        Iterations between SVRG's anchor refreshes (default 100).
    max_memory : float
        Bytes SAGA's table may use (default 2 GiB): K·N·dim·bytes-per-number above it is refused
        before anything is computed.
    With SGHMC's L inner steps SVRG refreshes at the first; with HAMCMC's two points on one
    minibatch the first point refreshes SVRG's anchor / updates SAGA's table and both see the
    state from before (see :mod:`sgmcmc.estimators.variance_reduced`).
"""


def sgld_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("sgld", locals())


sgld_setup.__doc__ = r"""Set up SGLD: :math:`\theta \leftarrow \theta + \frac{\epsilon}{2}g(\theta) + N(0, \epsilon)`.
""" + _SETUP_PARAMETERS + _ESTIMATOR_OPTIONS


def sghmc_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    r"""Set up SGHMC (Chen et al. 2014, :math:`\hat\beta = 0`): each iteration resamples
    :math:`\nu \sim N(0, \epsilon)`, then ``L`` times
    :math:`\nu \leftarrow \nu + \epsilon g(\theta) - \alpha\nu + N(0, 2\alpha\epsilon)`,
    :math:`\theta \leftarrow \theta + \nu`, the first kick a half kick (leapfrog; SPEC §3).
    An iteration costs about ``L`` SGLD iterations. ``alpha`` is a number or a dict like
    ``stepsize``; other arguments as :func:`sgld_setup`."""
    return _build("sghmc", locals())


def sgnht_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, a=0.01, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    r"""Set up SGNHT (Ding et al. 2014): momentum :math:`u \sim N(0, \epsilon)` once,
    thermostat :math:`\alpha = a` per parameter; each iteration
    :math:`u \leftarrow u + \epsilon g(\theta) - \alpha u + N(0, 2a\epsilon)`,
    :math:`\theta \leftarrow \theta + u`, :math:`\alpha \leftarrow \alpha + \overline{u^2} - \epsilon`.
    Other arguments as :func:`sgld_setup`."""
    return _build("sgnht", locals())


def sgldcv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    r"""Set up SGLD with control variates (Baker et al. 2018): the gradient is
    :math:`\nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta)`, :math:`\hat\theta` the
    mode found by ``n_iters_opt`` SGD steps of size ``opt_stepsize`` in :func:`init_sess` (None:
    chosen from the curvature, :func:`sgmcmc.control_variates.auto_opt_stepsize`; from
    the first start; one mode search and one full-data gradient shared by all chains);
    ``n_iters_opt=0`` anchors the control variate at the first start (no mode search).
    ``verbose`` here is the default for :func:`init_sess`'s progress (R). Other arguments as
    :func:`sgld_setup`."""
    return _build("sgldcv", locals())


def sghmccv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    """Set up SGHMC with control variates: :func:`sghmc_setup` dynamics with the gradient of
    :func:`sgldcv_setup`."""
    return _build("sghmccv", locals())


def sgnhtcv_setup(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, a=0.01, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    """Set up SGNHT with control variates: :func:`sgnht_setup` dynamics with the gradient of
    :func:`sgldcv_setup`."""
    return _build("sgnhtcv", locals())


# -- whole chains (R: sgld, ...) --------------------------------------------------------------

_CHAIN_OPTIONS = """
    Chain options (keyword-only, SPEC §7): ``n_chains`` (K chains in one compiled loop; ``params``
    one dict or a list of K dicts), ``burn_in`` and ``thin`` (kept iterations ``burn_in + thin``,
    ``burn_in + 2·thin``, …), ``store_gradients`` (also keep the estimator's gradient at every
    kept sample), ``constraints`` as for the ``*_setup`` functions: with constraints the draws
    are constrained, ``Samples.unconstrained`` holds the chain's values and
    ``settings["constraints"]`` the bijectors. ``minibatch_replace`` and, for the non-CV
    samplers, ``estimator``, ``opt_stepsize``, ``n_iters_opt``, ``svrg_period``, ``max_memory``
    as for :func:`sgld_setup`.

    Long runs (SPEC §10): with ``checkpoint_dir``, the state and the samples kept so far are
    saved there every ``checkpoint_every`` iterations (atomically, appended as shards); the same
    call again resumes from the last checkpoint, giving the result of an uninterrupted run, and
    a finished run's directory returns its result at once. A directory written with other
    arguments is refused.

    Returns
    -------
    Samples
        A dict name -> array, ``(n_kept, *shape)`` for one chain (R's layout), ``(n_chains,
        n_kept, *shape)`` for several; with ``log_posterior``, ``gradients`` and the settings.
"""


def sgld(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    return _run("sgld", locals())


sgld.__doc__ = """Run SGLD for ``n_iters`` iterations. Arguments as :func:`sgld_setup`.
""" + _CHAIN_OPTIONS


def sghmc(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    """Run SGHMC; arguments as :func:`sghmc_setup`, chain options and output as :func:`sgld`."""
    return _run("sghmc", locals())


def sgnht(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, a=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    """Run SGNHT; arguments as :func:`sgnht_setup`, chain options and output as :func:`sgld`."""
    return _run("sgnht", locals())


def sgldcv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    """Run SGLD-CV: the mode search, then ``n_iters`` iterations. Arguments as
    :func:`sgldcv_setup`, chain options and output as :func:`sgld`."""
    return _run("sgldcv", locals())


def sghmccv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, alpha=0.01, L=5, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    """Run SGHMC-CV; arguments as :func:`sghmccv_setup`, chain options and output as :func:`sgld`."""
    return _run("sghmccv", locals())


def sgnhtcv(log_lik, dataset, params, stepsize, opt_stepsize=None, log_prior=None, minibatch_size=0.01, a=0.01, n_iters=10_000, n_iters_opt=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    """Run SGNHT-CV; arguments as :func:`sgnhtcv_setup`, chain options and output as :func:`sgld`."""
    return _run("sgnhtcv", locals())


# == preconditioned samplers: psgld, hamcmc (issue 9; branch samplers2) ====================
from .dynamics import HAMCMC, PSGLD  # noqa: E402


def _nonnegative(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ValueError(f"{what} must be a number >= 0, got {value!r}")
    return float(value)


def _psgld(args, names):
    beta = args["beta"]
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) or not 0 <= beta < 1:
        raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
    return PSGLD(inputs.per_parameter(args["stepsize"], names, "stepsize", schedules=True), float(beta), inputs.check_positive(args["lam"], "lam"))


def _hamcmc(args, names):
    memory = None if args["memory"] is None else inputs.check_count(args["memory"], "memory")  # None: min(d + 1, 50)
    if memory is not None and memory < 2:
        raise ValueError(f"memory must be >= 2 for hamcmc (Şimşekli et al. 2016 §3.2), got {memory}")
    warm = args["warmup_stepsize"]
    warm = None if warm is None else inputs.per_parameter(warm, names, "warmup_stepsize")
    return HAMCMC(
        inputs.per_parameter(args["stepsize"], names, "stepsize", schedules=True), memory, _nonnegative(args["damping"], "damping"), warm
    )


METHODS["psgld"] = Method(_psgld, hyperparameters=("stepsize", "beta", "lam"))
METHODS["hamcmc"] = Method(_hamcmc, hyperparameters=("stepsize", "memory", "damping", "warmup_stepsize"))

_PSGLD_DOC = r"""preconditioned SGLD (Li et al. 2016, Algorithm 1; SPEC §8). Per element, with
    g the full-scale gradient estimate (prior + N/n · minibatch sum, SPEC §3):
    :math:`V \leftarrow \beta V + (1-\beta) g\odot g`, :math:`G = 1/(\lambda + \sqrt V)`,
    :math:`\theta \leftarrow \theta + \frac{\epsilon}{2} G g + N(0, \epsilon G)`; V starts at 0
    and is updated before it is used. Deviations: Li et al. build V from the mean per-row
    gradient g/N, which only rescales ε and λ (their (ε, λ) are our (εN, λN)); the correction
    term Γ = ∇·G is omitted (as Li et al. do in their experiments), a bias that vanishes as
    ε → 0. ``beta`` in [0, 1), ``lam`` > 0. Other arguments as :func:`sgld_setup`."""

_HAMCMC_DOC = r"""Hessian-approximated MCMC (Şimşekli et al. 2016, Eq. 10, Algorithm 1; SPEC §8),
    on all parameters flattened into one vector per chain. With M = ``memory`` >= 2:
    :math:`\theta_t = \theta_{t-M} + \frac{\epsilon}{2} H_t g_{\Omega_t}(\theta_{t-M}) + \sqrt\epsilon S_t z`,
    :math:`H_t = S_t S_t^\top` the L-BFGS inverse Hessian (two-loop recursion) from all M − 1
    pairs :math:`s_\tau = \theta_\tau - \theta_{\tau-M}`,
    :math:`y_\tau = g_{\Omega_\tau}(\theta_{\tau-M}) - g_{\Omega_\tau}(\theta_\tau) + \lambda s_\tau`
    (τ = t−M+1..t−1, both gradients on the same minibatch: 2 gradient evaluations per
    iteration), so H_t never involves θ_{t−M} and Γ = 0 (Eq. 9); initial scale γ = sᵀy/yᵀy of
    the newest pair; λ = ``damping`` (§3.2: L-BFGS then approximates (∇²U + λI)⁻¹); S_t z by
    the square-root recursion of Eq. 11 with the seeds' erratum (q = √(sᵀy/sᵀBs)·Bs + y).
    The first 2M iterations are SGLD steps θ_t = θ_{t−M} + ε/2 g + N(0, ε) (θ_{t−M} = θ₀ for
    t ≤ M) providing Algorithm 1's θ₀..θ_2M, at ``warmup_stepsize`` (default ``stepsize``; not in
    the paper): HAMCMC's ε is on the standardised scale (ε/2·HA ≈ ε/2·I for a Gaussian of
    precision A, ε ≈ 0.1–1), whereas SGLD needs ε < 2/λ_max(A). Deviations: Eq. 6's indexing (which drops one
    pair) is not followed; a pair with sᵀy ≤ 1e-8‖s‖‖y‖ is skipped to keep H positive definite
    (not in the paper); a stepsize dict gives the preconditioner E^½HE^½ (E the per-coordinate
    stepsizes); the estimate stored with a kept sample is the one the next iteration's
    predecessor made at it on its own minibatch. Other arguments as :func:`sgld_setup`.

    Choosing (issue 22.3; :mod:`sgmcmc.dynamics.hamcmc`): ``memory=None`` (default) is
    min(d + 1, 50) for d parameters: d pairs can hold the whole inverse Hessian of a correlated
    posterior (memory 5 left mean errors of 2.4 sd on a correlated d = 26 regression, d + 1 gave
    0.12); its cost per chain is (2M − 1)·d stored numbers, O(M²·d) work per iteration and an
    M-fold burn-in (the chain is M interleaved chains). Give a smaller ``memory`` for large d or
    short runs. ``damping`` (λ ≥ 0): 0 on a log-concave posterior; on a non-convex one, or when
    pairs are skipped (sᵀy ≤ 0 on noisy minibatches), a λ of about the smallest curvature that
    matters keeps H bounded by 1/λ. ``estimator``: HAMCMC's ε is on the standardised scale in
    every direction, so the minibatch noise inflates every direction's variance, by
    (1 + ε(N/n − 1)/4)/(1 − ε/4) or more (ε = 0.15, N/n = 20: predicted sd ×1.33, measured
    ×1.45–1.66 on a d = 5 regression; ×1.03–1.10 with ``estimator="svrg"`` or N/n = 2): use ``"svrg"`` (or ``"cv"``) unless N/n is small.
    ``stepsize`` 0.1–0.5 (:func:`sgmcmc.tune_stepsize` tunes it on this scale) and a
    ``warmup_stepsize`` below the SGLD limit ~0.7/λ_max (:func:`sgmcmc.check_stepsize`)."""


def psgld_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, beta=0.99, lam=1e-5, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("psgld", locals())


def hamcmc_setup(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, memory=None, damping=0.0, warmup_stepsize=None, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("hamcmc", locals())


def psgld(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, beta=0.99, lam=1e-5, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    return _run("psgld", locals())


def hamcmc(log_lik, dataset, params, stepsize, log_prior=None, minibatch_size=0.01, memory=None, damping=0.0, warmup_stepsize=None, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, estimator="plain", opt_stepsize=None, n_iters_opt=10_000, svrg_period=100, max_memory=2 * 2**30, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    return _run("hamcmc", locals())


psgld_setup.__doc__ = "Set up " + _PSGLD_DOC + "\n" + _SETUP_PARAMETERS + _ESTIMATOR_OPTIONS
hamcmc_setup.__doc__ = "Set up " + _HAMCMC_DOC + "\n" + _SETUP_PARAMETERS + _ESTIMATOR_OPTIONS
psgld.__doc__ = "Run " + _PSGLD_DOC + "\n    Arguments as :func:`psgld_setup`.\n" + _CHAIN_OPTIONS
hamcmc.__doc__ = "Run " + _HAMCMC_DOC + "\n    Arguments as :func:`hamcmc_setup`.\n" + _CHAIN_OPTIONS
# == end preconditioned samplers ==========================================================


# == Samplers for the probability simplex (SPEC §9; thesis ch.5) ==============================
# scir / sgrld: the user gives counts(params, minibatch, seed) and a Dirichlet prior alpha instead
# of log_lik / log_prior (Method.model == "counts"); the estimator is
# sgmcmc.estimators.counts.MinibatchCounts, the kernels sgmcmc.dynamics.cir.SCIR / SGRLD.

from numbers import Real  # noqa: E402

from .dynamics.cir import SCIR, SGRLD  # noqa: E402
from .estimators.counts import MinibatchCounts  # noqa: E402


def _simplex_stepsize(value: Any, names: list[str]) -> dict[str, Any]:
    """h per parameter: a positive number or a schedule ``h(t)`` (a callable of the 1-based
    iteration t returning a tensor, evaluated in-graph), or a dict of those by name."""

    def one(v, what):
        if callable(v):
            try:
                h1 = float(tf.cast(v(tf.constant(1, tf.int64)), tf.float64).numpy())
            except Exception as error:
                raise TypeError(f"{what} is a schedule but calling it at t=1 failed: {error}") from error
            if not np.isfinite(h1) or h1 <= 0:
                raise ValueError(f"{what} is a schedule that gives {h1} at t=1: a stepsize must be positive")
            return v
        if isinstance(v, Real) and not isinstance(v, bool):
            return inputs.check_positive(v, what)
        raise TypeError(f"{what} must be a positive number or a schedule h(t), got {v!r}")

    if isinstance(value, dict):
        inputs.per_parameter({n: 1.0 for n in value}, names, "stepsize")  # exactly the names of params
        return {n: one(value[n], f"stepsize[{n!r}]") for n in names}
    checked = one(value, "stepsize")
    return {n: checked for n in names}


def _scir(args, names):
    return SCIR(_simplex_stepsize(args["stepsize"], names))


def _sgrld(args, names):
    return SGRLD(_simplex_stepsize(args["stepsize"], names))


def _counts_model(args, starts, data, n, dtype) -> dict[str, Any]:
    """Checks of a counts-based model before compiling; its estimator factory for the Sampler."""
    for i, start in enumerate(starts):
        inputs.check_simplex_params(start, dtype, "params" if len(starts) == 1 else f"params[{i}]")
    alpha = inputs.check_alpha(args["alpha"], starts[0], dtype)
    inputs.trial_counts(args["counts"], data, starts[0], dtype, n)
    return {"make_estimator": partial(MinibatchCounts, args["counts"], alpha, replace=bool(args["minibatch_replace"]))}


METHODS.update(
    scir=Method(_scir, hyperparameters=("stepsize", "alpha"), model="counts", supports_constraints=False),
    sgrld=Method(_sgrld, hyperparameters=("stepsize", "alpha"), model="counts", supports_constraints=False),
)

_SIMPLEX_PARAMETERS = """
    Parameters
    ----------
    counts : callable
        ``counts(params, minibatch, seed)`` → dict name → the minibatch's category counts
        :math:`\\sum_{i\\in S} z_i`, shaped like the parameter (integers or the model dtype), for ONE
        chain: ``params`` name → ω (on the simplex), ``minibatch`` name → the minibatch's rows of
        ``dataset``, ``seed`` a shape-[2] int64 tensor for stateless random ops
        (``tf.random.stateless_*``) — for a latent-variable model (e.g. LDA) the local step
        (Gibbs sampling of the minibatch's allocations given ω) runs here. Written with TF ops.
    dataset : dict or pandas.DataFrame
        Name -> array-like, observations (rows, documents) on the first axis, all of length N.
    params : dict or list of dicts
        Name -> starting point ω₀ on the simplex: entries >= 0 summing to 1 along the LAST axis;
        several simplices may be stacked (e.g. LDA's topics, shape (K, V)). A list of ``n_chains``
        dicts starts chain k at dict k.
    stepsize : float, callable or dict
        h > 0; or a schedule ``h(t)`` of the 1-based iteration t returning a tensor (e.g.
        h(1 + t/τ)^(−κ), thesis §5.5); or a dict of those by parameter name.
    alpha : float, array or dict
        The Dirichlet prior's concentrations (> 0): a number, an array broadcastable to the
        parameter's shape (per component), or a dict of those by parameter name.
    minibatch_size : float or int
        A proportion of N in (0, 1), or a count of rows.
    seed : int, optional
        Makes the run reproducible; None draws fresh randomness.
    dtype : tf.DType, keyword-only
        ``tf.float32`` (default) or ``tf.float64``.
    n_chains : int, keyword-only
        K chains in one compiled loop, each with its own minibatches and seeds.
    minibatch_replace : bool, keyword-only
        True: minibatch rows drawn i.i.d. with replacement (unbiased with the N/n scaling).

    Notes
    -----
    Writing ω = θ / Σⱼθⱼ with θⱼ ~ Gamma(aⱼ, 1), aⱼ = αⱼ + Σᵢ zᵢⱼ (thesis §5.3), each θⱼ follows
    the CIR diffusion dθ = (a − θ)dt + √(2θ) dW (eq. 5.3.1), stationary at Gamma(a, 1); a is
    replaced by â = α + (N/n) Σ_{i∈S} zᵢ (eq. 5.3.3), one fresh minibatch per iteration and chain.
    The chain starts from θ₀ = ω₀ Σⱼ âⱼ (â of the first iteration's minibatch), so ω₀ is where it
    starts. The samples are ω (normalised along the last axis).

    The log-posterior estimate shown in the progress bar and stored in ``log_posterior`` is the
    Dirichlet log density of ω under Dir(â), summed over the simplices (exact with all the data;
    ω clamped at the dtype's smallest normal number). No gradient is used:
    ``store_gradients`` does not apply.
"""


def scir_setup(counts, dataset, params, stepsize, alpha, minibatch_size=0.01, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("scir", locals())


scir_setup.__doc__ = r"""Set up SCIR, the stochastic Cox–Ingersoll–Ross sampler (thesis §5.3, Algorithm 3).

Each θⱼ moves by the exact CIR transition over time h (eq. 5.3.2 with â, eq. 5.3.3):
θ' = (1 − e^(−h))/2 · W, W ~ χ²(2â, 2θe^(−h)/(1 − e^(−h))), drawn as
θ' = (1 − e^(−h)) · Gamma(â + P, 1), P ~ Poisson(θe^(−h)/(1 − e^(−h))) — no discretisation error;
the only error is the minibatch's (Corollary 5.4.2: E[θ̂_M] is the exact process's mean, the
variance grows by (1 − e^(−2Mh))(1 − e^(−h))/(1 + e^(−h)) Var[â]). The gamma draw is made in log
space, so tiny components are right down to small α; in float32 values of ω below 1.2e-38 may
round to 0 (use ``dtype=tf.float64`` when they matter).
""" + _SIMPLEX_PARAMETERS


def sgrld_setup(counts, dataset, params, stepsize, alpha, minibatch_size=0.01, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("sgrld", locals())


sgrld_setup.__doc__ = r"""Set up SGRLD with the expanded-mean parametrisation (Patterson & Teh 2013; thesis
§5.2.2), the baseline SCIR is compared with: the Euler–Maruyama step of the same CIR diffusion
(5.3.1), mirrored at 0,

θ' = |θ + h(â − θ) + √(2hθ) ξ|, ξ ~ N(0, 1),

which has a discretisation error: for sparse posteriors (components near 0) it is badly biased
unless h is small (thesis §5.2.3, Fig. 5.2.1).
""" + _SIMPLEX_PARAMETERS


_SIMPLEX_CHAIN = """
    Chain options (keyword-only, SPEC §7): ``n_chains``, ``burn_in`` and ``thin`` as for :func:`sgld`.

    Returns
    -------
    Samples
        Samples of ω: name -> array ``(n_kept, *shape)`` for one chain, ``(n_chains, n_kept,
        *shape)`` for several; every sample on the simplex. ``gradients`` is None.
"""


def scir(counts, dataset, params, stepsize, alpha, minibatch_size=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, burn_in=0, thin=1, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    return _run("scir", locals())


scir.__doc__ = """Run SCIR for ``n_iters`` iterations (thesis Algorithm 3); arguments and the update
as :func:`scir_setup`.
""" + _SIMPLEX_CHAIN


def sgrld(counts, dataset, params, stepsize, alpha, minibatch_size=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, burn_in=0, thin=1, minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    return _run("sgrld", locals())


sgrld.__doc__ = """Run SGRLD (expanded mean, Patterson & Teh 2013) for ``n_iters`` iterations;
arguments and the update as :func:`sgrld_setup`.
""" + _SIMPLEX_CHAIN

# == end of the simplex samplers ===============================================================


# == OSGLD: optimal preconditioned SGLD (SPEC §8; El hanchi 2018 §2.3 and 2019) ================
# No stepsize: the kernel sgmcmc.dynamics.osgld.OSGLD builds D = (k/2)H⁻¹ from a running estimate
# of the per-row gradient covariance. The plain estimator only. auto_burn_in=True runs the
# kernel's Eq. 17 criterion (Sampler.advance_until_ready, chain.run_until_ready) before storing.

import dataclasses  # noqa: E402

from .chain import run_until_ready  # noqa: E402
from .dynamics.osgld import OSGLD  # noqa: E402
from .errors import BurnInNotFound, DivergenceError as _DivergenceError, Interrupted as _Interrupted  # noqa: E402
from .errors import SamplingError as _SamplingError  # noqa: E402


def _osgld(args, names):
    c = args["c"]
    if isinstance(c, bool) or not isinstance(c, Real) or not 0 < c <= 1:
        raise ValueError(f"c must be a number in (0, 1] (El hanchi 2018 Eq. 16 suggests 0.1), got {c!r}")
    entries = inputs._entries(args["dataset"])
    n_rows, n = 0, 0
    if entries:  # the dataset is fully checked by _build; here only n and N for the kernel
        n_rows = int(np.shape(next(iter(entries.values())))[0])
        n = inputs.batch_size(args["minibatch_size"], n_rows)
        if n < 2:
            raise ValueError(
                f"osgld estimates the gradient covariance from each minibatch's per-row gradients, so a "
                f"minibatch needs at least 2 rows; minibatch_size={args['minibatch_size']!r} gives {n} "
                f"of N={n_rows}: give e.g. minibatch_size=100"
            )
    if args.get("estimator", "plain") != "plain":
        raise ValueError(
            f"osgld works with the plain estimator only (its noise correction assumes plain minibatch "
            f"noise, El hanchi 2018 Eq. 8), got estimator={args['estimator']!r}: leave estimator='plain'"
        )
    auto = bool(args.get("auto_burn_in", False))
    return OSGLD(c=float(c), detect_burn_in=auto, batch_size=n, n_rows=n_rows)


METHODS["osgld"] = Method(_osgld, hyperparameters=("c",))

_OSGLD_DOC = r"""optimal preconditioned SGLD, OSGLD (El hanchi 2018 §2.3, Algorithm 1 "OSGFS";
    El hanchi 2019; SPEC §8) for near-Gaussian posteriors. No stepsize. All parameters are
    flattened into one vector θ ∈ R^d per chain; with g the plain minibatch estimate of the
    log-posterior gradient (SPEC §3; Eq. 3) each iteration is

    Δθ = D g + N(0, [2D − f (N²/n) D C D − D H D]₊)          (Eq. 8)
    D = (k/2) H⁻¹,  H = N C + G                               (Eqs. 9, 10)
    k = min{c, 4 max{n/(N + n), r/(r + N/n)}},  r = λ_min(H⁻¹)/λ_max(H⁻¹ N C H⁻¹)   (Eqs. 15, 16)

    C: the per-row log-likelihood gradient covariance, estimated from each minibatch (sample
    covariance of its n per-row gradients, n − 1 denominator) and averaged with weight
    max(1/t, 1/W), W = max(100, ⌈50p/(n − 1)⌉) (p = d, or 1 in the diagonal form): Algorithm 1's
    cumulative average for W iterations, then an exponential moving average, so that C(θ) of a
    distant start is forgotten. G = −∇² log p(θ) (the prior's
    negative Hessian; I/τ² for a N(0, τ²I) prior; 0 for ``log_prior=None``) by automatic
    differentiation at the current θ. [·]₊ projects onto the positive semi-definite cone
    (eigenvalues clipped at 0), since C is estimated. H's eigenvalues are floored at
    d·ε_dtype·λ_max(H).

    Deviations from the paper: f = 1 − n/N, the finite-population factor of minibatches drawn
    without replacement (SPEC §3; the paper's Eq. 4 has f = 1, as here with
    ``minibatch_replace=True``); the running average of C
    described above (the paper: a cumulative average); the first iterations only estimate C (θ
    does not move) until t·(n − 1) ≥ 4d (4 in the diagonal form) so that H is invertible;
    ``c`` may be 1 (the paper: c < 1).

    Dense d × d matrices for d ≤ 100 (three eigendecompositions per iteration, ~1.5 ms at d = 100);
    above that the diagonal form: C and G are replaced by their diagonals (G's by a one-probe
    Hutchinson estimate, exact for a prior with independent coordinates), so every formula holds
    per coordinate — optimal when the posterior's axes are the coordinate axes, a diagonal
    preconditioner otherwise.

    Parameters
    ----------
    log_lik, dataset, params, log_prior, seed, dtype, n_chains, constraints, check_model
        As for :func:`sgld_setup`. Only the plain minibatch estimator is supported: the noise
        correction assumes plain minibatch noise.
    c : float
        In (0, 1]: the cap on k (Eq. 16; 0.1 "works very well", El hanchi 2018). Larger c, faster
        mixing, larger discretisation error away from Gaussianity.
    minibatch_size : float or int
        As for :func:`sgld_setup`; at least 2 rows (C is a covariance over the minibatch).
    estimator : str, keyword-only
        ``"plain"`` only (accepted for a uniform signature; any other value is refused).
    minibatch_replace : bool, keyword-only
        Rows drawn i.i.d. with replacement (then f = 1 above).
"""


def osgld_setup(log_lik, dataset, params, c=0.1, log_prior=None, minibatch_size=0.01, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, check_model=True, estimator="plain", minibatch_replace=False, strategy=None, shard_rows=None) -> Sampler:
    return _build("osgld", locals())


def osgld(log_lik, dataset, params, c=0.1, log_prior=None, minibatch_size=0.01, n_iters=10_000, verbose=True, seed=None, *, dtype=DEFAULT_DTYPE, n_chains=1, constraints=None, burn_in=0, thin=1, store_gradients=False, check_model=True, checkpoint_dir=None, checkpoint_every=10_000, auto_burn_in=False, max_burn_in=None, estimator="plain", minibatch_replace=False, strategy=None, shard_rows=None) -> Samples:
    args = locals()
    if not auto_burn_in:
        if max_burn_in is not None:
            raise ValueError("max_burn_in bounds the search of auto_burn_in=True; without it give burn_in= (or drop max_burn_in)")
        return _run("osgld", args)
    return _run_auto_burn_in("osgld", args)


def _run_auto_burn_in(method: str, args: dict[str, Any]) -> Samples:
    """A whole chain whose burn-in is found by the kernel's criterion: run until it holds for
    every chain (at most ``max_burn_in`` iterations), then ``n_iters`` iterations kept with
    ``thin``; ``samples.burn_in_found`` is the iteration at which it first held for all."""
    if args["checkpoint_dir"] is not None:
        raise ValueError(
            "auto_burn_in=True cannot be combined with checkpoint_dir (not supported yet): run once with "
            "auto_burn_in=True to find the burn-in (samples.burn_in_found), then pass burn_in=<that "
            "number> with checkpoint_dir"
        )
    if args["burn_in"]:
        raise ValueError(f"give either burn_in={args['burn_in']} or auto_burn_in=True, not both")
    n_iters, keep = _keep(args["n_iters"], 0, args["thin"])
    max_burn_in = args["max_burn_in"]
    max_burn_in = 10 * n_iters if max_burn_in is None else inputs.check_count(max_burn_in, "max_burn_in")
    sampler = _build(method, args)
    store_gradients = bool(args.get("store_gradients", False))
    inputs.check_storage(keep.count_until(n_iters), sampler.n_chains, sampler.shapes, sampler.dtype, store_gradients)
    init_sess(sampler, args["verbose"])
    if not run_until_ready(sampler, max_burn_in, args["verbose"]):
        chains = [int(i) for i in np.flatnonzero(~sampler.ready())]
        which = f" for chain{'s' if len(chains) > 1 else ''} {', '.join(map(str, chains))}" if sampler.n_chains > 1 else ""
        raise BurnInNotFound(
            f"{method}: the burn-in criterion (El hanchi 2018 Eq. 17) did not hold{which} within "
            f"max_burn_in={max_burn_in} iterations. Give a larger max_burn_in=, start nearer the mode "
            f"(e.g. at an optimiser's estimate), or set burn_in= yourself with auto_burn_in=False",
            iteration=sampler.iteration,
            chains=chains,
        )
    found = sampler.iteration
    settings = dict(sampler.settings, auto_burn_in=True, max_burn_in=max_burn_in)
    try:
        samples = run_chain(sampler, n_iters, Keep(found, keep.thin), store_gradients=store_gradients, verbose=args["verbose"], settings=settings)
    except (_DivergenceError, _SamplingError, _Interrupted) as error:
        if isinstance(error.samples, Samples):
            error.samples.burn_in_found = found
        raise
    samples.burn_in_found = found
    return samples


osgld_setup.__doc__ = "Set up " + _OSGLD_DOC
osgld.__doc__ = (
    "Run " + _OSGLD_DOC + r"""
    Chain options as for :func:`sgld`, and:

    auto_burn_in : bool, keyword-only
        Find the burn-in with El hanchi's criterion (2018 Eq. 17) reworked so that its error rates
        do not depend on d (derivation in :mod:`sgmcmc.dynamics.osgld`): chain k is ready at the
        first iteration t at which, with ȳ the mean of the estimates g of the last w = ⌈1/k⌉
        iterations whitened by H^-½ and at least w iterations having moved θ, the components z of
        ȳ in the eigenbasis of its stationary covariance aI + b f(N²/n) H^-½CH^-½ (a, b from the
        chain's autocorrelation ρ = 1 − k/2 over the window), each scaled to unit variance, satisfy
        max |z_j| ≤ Φ⁻¹((1 + 0.8^{1/d})/2) and Σ z_j² ≤ χ²_d(0.8): at stationarity it holds with
        probability ≥ 0.6 at every d (the printed Eq. 17, every |mean Y_j| within one
        √diag[(N C + G)/w + f N²/(w n) C], held with probability falling exponentially in d: never
        within 10^4 iterations at d = 26, even from the mode). The criterion is
        evaluated in the compiled loop, which stops once it has held (at any iteration, once is
        enough) for every chain; that iteration is ``samples.burn_in_found``, and then
        ``n_iters`` iterations run and are kept (with ``thin``): draws are the states after
        iterations burn_in_found + thin, + 2·thin, …. The chain itself is the one
        :func:`osgld_setup` with the same seed gives step by step. Not with ``burn_in`` nor
        (yet) with ``checkpoint_dir``.
    max_burn_in : int, keyword-only
        With ``auto_burn_in``: the most iterations the search may run (default 10·n_iters);
        beyond it :class:`sgmcmc.errors.BurnInNotFound` names the chains and the fix.

    Returns
    -------
    Samples
        As for :func:`sgld`; with ``auto_burn_in``, ``burn_in_found`` is the iteration at which
        the criterion first held for all chains (also on the samples an exception carries).
"""
)
# == end OSGLD =================================================================================


_DISTRIBUTE_OPTIONS = """
    Many devices and machines (keyword-only; SPEC §12, :mod:`sgmcmc.distribute`)
    ------------------------------------------------------------------------------
    strategy : tf.distribute.Strategy, optional
        ``MirroredStrategy`` (this machine's devices) or ``MultiWorkerMirroredStrategy``
        (processes or machines; ``python -m sgmcmc.distribute --workers W script.py`` starts W
        local ones). Without ``shard_rows`` the ``n_chains`` chains are split evenly over the
        replicas (refused unless divisible), each chain the same as in a one-device run with the
        same seed, and every worker returns all chains (whole-chain functions only; not
        ``*_setup``).
    shard_rows : bool, optional
        Under ``MultiWorkerMirroredStrategy`` (default there: True) each worker passes its own
        rows as ``dataset`` (same entries; N = Σ N_w). ``minibatch_size`` is the total n; worker
        w draws n_w ≈ n·N_w/N rows (largest-remainder rounding, each ≥ 1), the gradient
        Σ_w (N_w/n_w)·Σ_{i∈S_w} ∇log p(x_i|θ) + ∇log p(θ) is summed by one all-reduce, and
        every worker holds the same chains (the noise is the same everywhere). The mode search
        the CV anchor's full-data gradient and SVRG's refreshes run sharded; the CV samplers'
        stepsize check is skipped (not sharded yet). Not supported (refused): SAGA, OSGLD, SCIR/SGRLD,
        ``checkpoint_dir``. A worker that dies makes the others raise
        :class:`~sgmcmc.SamplingError` with the samples kept so far.
"""

for _function in list(globals().values()):
    if callable(_function) and getattr(_function, "__module__", None) == __name__ and _function.__doc__ and \
            "strategy" in getattr(getattr(_function, "__code__", None), "co_varnames", ()) and \
            _function.__name__ in {m for m in METHODS} | {f"{m}_setup" for m in METHODS}:
        _function.__doc__ += _DISTRIBUTE_OPTIONS
