r"""``sgmcmc.sample``: one call that adapts, chooses, runs until the posterior is known and says
how far to trust the result (SPEC §14).

One run's data flow::

    checks + mode search     sgldcv_setup(user model, one chain) + init_sess: the checks every
                             sampler makes, SGD with the automatic stepsize, Newton steps, the
                             end check, the improper-posterior test
    curvature at the mode    laplace.laplace_at: A dense (d ≤ DENSE_MAX), M = QΛ^{-1/2}
    choice                   SGLD-CV on φ (ξ = ξ̂ + Mφ); stepsize from the stability check on φ,
                             sd error ≤ δ with the minibatch noise (δ from target_ess)
    rounds                   sample_chain in pieces; after each round: burn-in found, bulk/tail
                             ESS, R-hat (convergence.assess); stop at the targets or the budget
    result                   draws on the user's scale after the burn-in + SampleReport

With rows sharded across workers (``strategy=``, :mod:`sgmcmc.auto.sharded`) every step runs on
every worker: the samplers sum each gradient over the workers, the curvature's products and the
Newton steps' passes are all-reduced, the stepsize's curvature is the all-reduced check's and its
minibatch noise the sum of the strata's, and the rounds' clock is agreed; every worker holds all
chains and returns the same draws.

The decisions and their measurements are in docs/DESIGN.md ("sgmcmc.sample").
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from .. import checks
from ..api.runs import sample_chain
from ..api.samplers import sghmccv_setup, sgldcv_setup
from ..api.session import init_sess
from ..analysis.samples import Samples
from ..constraints import Constrained, check_constraints
from ..data.stream import is_batch_stream
from ..distribute.placement import topology
from ..errors import ConvergenceWarning, DivergenceError, Interrupted, SamplingError, user_stacklevel
from ..stability import check_stepsize
from ..run.checkpoints import fingerprint
from ..tempering import check_temperature, tempered
from .checkpoint import SampleCheckpoint
from .convergence import Convergence, assess
from .laplace import DENSE_MAX, Whitened, laplace_at, newton_polish
from .sharded import ShardedRows, sharded_rows
from .report import AdaptedSamples, SampleReport, adapted

#: The samplers ``method=`` can name; "auto" is decided by :func:`choose` (docs/DESIGN.md).
METHODS = ("auto", "sgldcv", "sghmccv")
#: Default minibatch: min(N, this) rows (the thesis' covertype runs use 500).
DEFAULT_MINIBATCH = 500
#: ``minibatch_size=None`` grows the minibatch to at most this many rows while the gradient noise,
#: not the discretisation, limits the stepsize (:func:`balanced_batch`).
MAX_MINIBATCH = 10_000
#: The mode search's SGD steps (the CV samplers' default, R's).
N_ITERS_OPT = 10_000
#: Without max_iters and max_time, at most this many sampling iterations per chain.
DEFAULT_MAX_ITERS = 200_000
#: The first round's iterations per chain; later rounds are sized from the ESS reached.
FIRST_ROUND = 1_000
#: At most this many kept draws per chain: beyond, the thinning doubles (earlier draws too).
MAX_KEPT = 4_000
#: Chains 2..K start at the mode plus this times a draw of the Laplace approximation.
START_SPREAD = 1.5
#: The metric is re-estimated from the draws (at most this many times) when the chains' worst
#: iterations per effective draw exceed SLOW_FACTOR times the Gaussian approximation's 4/h, once
#: the worst bulk ESS is at least MIN_ESS_TO_ADAPT.
MAX_ADAPTATIONS = 3
SLOW_FACTOR = 3.0
MIN_ESS_TO_ADAPT = 20
#: Longest stretch of sampling between two looks at the clock and the progress bar (seconds).
PIECE_SECONDS = 2.0


def sample(
    log_lik: Callable,
    dataset: Any,
    params: Mapping[str, Any],
    log_prior: Callable | None = None,
    *,
    n_chains: int = 4,
    target_ess: float = 400,
    max_rhat: float = 1.01,
    max_iters: int | None = None,
    max_time: float | None = None,
    minibatch_size: float | None = None,
    method: str = "auto",
    constraints: dict | None = None,
    dtype: tf.DType = tf.float32,
    seed: int | None = None,
    verbose: bool = True,
    checkpoint_dir: str | None = None,
    strategy: tf.distribute.Strategy | None = None,
    shard_rows: bool | None = None,
    temperature: float = 1.0,
) -> AdaptedSamples:
    r"""Sample the posterior without tuning: find the mode, take the curvature there, choose the
    sampler and its stepsize, and run the chains in rounds until every parameter element reaches
    the ESS and R-hat targets or the budget ends.

    1. The checks every sampler makes (the data, the model on a trial evaluation), then the
       control variate's mode search (SGD with the automatic stepsize, Newton steps, the end
       check). A log posterior that keeps rising while parameters run away raises
       :class:`~sgmcmc.ImproperPosteriorError` (give a proper ``log_prior``).
    2. The Hessian :math:`A` of the negative log posterior at the mode (unconstrained scale), dense
       for up to 1,000 elements (Hessian-vector products on ≤ 20,000 rows scaled to N).
    3. SGLD-CV on the whitened parameters φ, :math:`\xi = \hat\xi + Q\Lambda^{-1/2}\varphi`
       (:math:`A = Q\Lambda Q^\top`): SGLD with the constant preconditioner :math:`A^{-1}`, so
       the chain mixes as fast along the posterior's flattest direction as along its stiffest,
       whatever the condition number. The stepsize is the stability check's largest keeping the
       stationary sd within δ of the posterior's on the Gaussian approximation, minibatch noise
       included, with δ = min(0.1, ½/√(2·target_ess)) — half the relative MCSE of an sd at the
       ESS target, so the discretisation's bias stays below the reported error. Above 1,000
       elements: one stepsize per parameter from the same check on the original parameters.
    4. Chains: one at the mode, the others at the mode plus 1.5 × a draw of the Laplace
       approximation (dispersed, so that R-hat can see chains that have not mixed). Rounds of
       iterations; after each, the burn-in is found (the first of 0, 10, …, 50 % of the draws
       after which every R-hat ≤ ``max_rhat``) and bulk/tail ESS and R-hat are computed on the
       draws after it (Vehtari et al. 2021, by ArviZ); the next round is sized from the worst ESS.
       At most 4,000 draws per chain are kept (the thinning doubles beyond).
    5. Stops when every element has bulk and tail ESS ≥ ``target_ess`` and R-hat ≤
       ``max_rhat``; at ``max_iters`` / ``max_time`` first, :class:`~sgmcmc.ConvergenceWarning`
       names the worst elements, and the samples are returned.

    Parameters
    ----------
    log_lik
        ``log_lik(params, dataset)``: the log-likelihood SUMMED over the rows it is given, in
        TensorFlow ops (as for every sampler).
    dataset
        Dict of arrays (or a DataFrame), observations on the first axis.
    params
        One dict of starting values (the mode search starts here; their shapes are the
        parameters'). ``sample`` chooses the chains' starts itself.
    log_prior
        ``log_prior(params)``, or None for a flat prior (refused when the posterior is then
        improper).
    n_chains
        Chains (at least 2: R-hat compares them).
    target_ess
        Bulk and tail ESS every element must reach (Vehtari et al. recommend 100 per chain).
    max_rhat
        Rank-normalised split R-hat every element must be at or below.
    max_iters
        Sampling iterations per chain at most (the mode search not counted). None: no bound but
        ``max_time``'s; with both None, 200,000.
    max_time
        Seconds for the whole call at most (checked between pieces of ≤ ~2 s of sampling).
    minibatch_size
        Rows per minibatch (a count, or a proportion of N in (0, 1)); None: min(N, 500) for the mode
        search, and for the sampling the size at which the gradient noise costs the stepsize at
        most half (grown up to 10,000 rows while the noise limits it; :func:`balanced_batch`).
    method
        ``"auto"`` (the rule in docs/DESIGN.md), or ``"sgldcv"`` / ``"sghmccv"`` to name one; the
        preconditioning and the stepsize are chosen either way.
    constraints
        Name -> TFP bijector, as for the samplers: sampled on the unconstrained scale, returned
        on the constrained one.
    dtype
        ``tf.float32`` (default) or ``tf.float64``.
    seed
        An int makes the run reproducible on the same machine; None draws one (``report.seed``).
    verbose
        Progress of the mode search and of the sampling (the worst ESS and R-hat so far), and the
        choice, on stderr.
    checkpoint_dir
        A directory that makes the run survive being killed: committed after the set-up and at
        every round (the mode, the metric, the stepsize, the draws, the sampler's state); the
        same call again resumes from the last commit, skipping the mode search, and returns what
        an uninterrupted run with the same seed returns, bit for bit (``max_time`` aside). Needs
        ``seed``; a directory written by a call with other arguments is refused, naming what
        changed (:mod:`sgmcmc.auto.checkpoint`). Not with rows sharded across workers (refused).
    strategy
        None (one process), or a ``tf.distribute.MultiWorkerMirroredStrategy`` whose workers each
        call ``sample`` with their own rows and the same other arguments (checked): every worker
        holds all ``n_chains`` chains and every gradient sums the workers' rows (SPEC §12); the mode,
        the curvature, the stepsize and the minibatch are computed over all workers' rows and are
        the same on every worker, so every worker returns the same draws
        (:mod:`sgmcmc.auto.sharded`). ``minibatch_size`` counts the rows of all workers. A strategy
        that would split the chains over replicas (``MirroredStrategy`` over several devices,
        ``shard_rows=False``) is refused: ``sample`` steps its chains in one process.
    shard_rows
        As for the samplers: None (default) shards the rows under a ``MultiWorkerMirroredStrategy``
        of two or more workers; True requires one; False is refused with such a strategy.
    temperature
        T: sample the tempered posterior p(θ | x)^(1/T) (SPEC §15; 1: the posterior). Everything
        above runs on log p / T (the mode is the same; the curvature is 1/T times log p's, and
        the stepsize in the report is the one on log p / T); the ESS and R-hat targets apply to
        the tempered draws. :mod:`sgmcmc.tempering`.

    Returns
    -------
    AdaptedSamples
        The draws after the burn-in, ``(n_chains, n_kept, *shape)`` per parameter (every analysis
        function works on them), with ``report`` (:class:`~sgmcmc.auto.report.SampleReport`: the
        method and why, the stepsize, κ, the burn-in, iterations, seconds, the targets met or not)
        and ``summary()`` (mean, sd, MCSE of both, bulk/tail ESS, R-hat per element).

    Raises
    ------
    ImproperPosteriorError
        No posterior exists (the log posterior rises without bound or stays flat along a ray).
    ModeSearchError, StepsizeError, DivergenceError, SamplingError, Interrupted
        As for the samplers; a failure or Ctrl-C while sampling carries every draw kept so far
        (``error.samples``, on the user's scale, burn-in not removed).

    Notes
    -----
    ESS and R-hat measure mixing, not the bias of a stochastic-gradient sampler; the stepsize
    rule bounds that bias on the Gaussian approximation. A posterior with several modes is
    sampled around the one the search finds (the chains start near it): not detected.
    """
    started = time.perf_counter()
    temperature = check_temperature(temperature)
    plan = _checked_plan(dataset, params, n_chains, target_ess, max_rhat, max_iters, max_time, minibatch_size,
                         method, dtype, seed, (strategy, shard_rows, checkpoint_dir, log_prior, constraints))
    dtype, seed, n_rows, batch, shared = plan["dtype"], plan["seed"], plan["n_rows"], plan["batch"], plan["shared"]
    user_functions = {"log_lik": log_lik, "log_prior": log_prior}
    if temperature != 1.0:  # everything below on log p / T: sample chooses its own stepsizes there
        log_lik, log_prior = tempered(log_lik, log_prior, temperature)
    distributed = dict(strategy=strategy, shard_rows=shard_rows)
    start = checks.check_params(params, dtype)
    bijectors = check_constraints(constraints, list(start))
    constrained = Constrained(bijectors, {k: v.shape for k, v in start.items()}, dtype) if bijectors else None
    store = None
    if checkpoint_dir is not None:
        if plan["seed_drawn"]:
            raise ValueError("checkpoint_dir needs seed= (an int): a resumed run must continue the same chain")
        settings = {k: plan[k] for k in ("target_ess", "max_rhat", "max_iters", "method", "batch", "choose_batch")}
        if temperature != 1.0:
            settings["temperature"] = temperature
        store = SampleCheckpoint(checkpoint_dir, fingerprint(
            "sample", settings, {k: v.shape for k, v in start.items()}, n_rows, n_chains,
            {"seed": seed, "dtype": dtype.name, "constraints": sorted(bijectors)}, data=dataset,
            functions=user_functions, starts=start,
        ))
    saved = store.plan() if store is not None and store.resumable else None

    # 1. checks and the mode (one chain of the CV sampler: its set-up checks, its mode search)
    if saved is None:
        finder = sgldcv_setup(
            log_lik, dataset, params, 1.0, None, log_prior, batch, N_ITERS_OPT, verbose, seed,
            dtype=dtype, n_chains=1, constraints=constraints, check_stepsize=False, **distributed,
        )
        init_sess(finder, verbose)
        mode = {k: v.numpy() for k, v in finder.estimator.mode.items()}
    else:  # resumed: the committed set-up
        mode = {k[len("mode/"):]: v for k, v in saved.items() if k.startswith("mode/")}
    seconds = {"checks and mode": time.perf_counter() - started}

    # 2.-3. curvature, choice, stepsize
    t = time.perf_counter()
    d = sum(int(np.prod(np.shape(v))) for v in mode.values())
    name = "sgldcv" if plan["method"] == "auto" else plan["method"]
    distortion = min(0.1, 0.5 / math.sqrt(2.0 * plan["target_ess"]))
    rng = np.random.default_rng([seed, 43])
    setup = sgldcv_setup if name == "sgldcv" else sghmccv_setup
    sizes = {"batch": batch}

    def prepared(model_log_lik, model_log_prior, starts, stepsize):
        sampler = setup(
            model_log_lik, dataset, starts, stepsize, log_prior=model_log_prior, minibatch_size=sizes["batch"],
            n_iters_opt=0,
            verbose=False, seed=seed, dtype=dtype, n_chains=n_chains, check_model=False, check_stepsize=False,
            **distributed,
        )
        init_sess(sampler, verbose=False)
        return sampler

    adapt = commit = None
    if d <= DENSE_MAX:
        if saved is None:
            mode, hessian, _ = newton_polish(finder.one_chain_estimator, mode, seed)
            laplace = laplace_at(finder.one_chain_estimator, mode, seed, hessian)
            matrix, probed = laplace.whitening, laplace.probed
            kappa, scaled_kappa = laplace.condition_number, laplace.scaled_condition_number
        else:
            matrix, probed = saved["matrix"], int(saved["probed"])
            kappa, scaled_kappa = float(saved["kappa"]), float(saved["scaled_kappa"])
            sizes["batch"] = int(saved["batch"])
        whitened = Whitened(mode, matrix, log_lik, log_prior, constrained, dtype)
        origin = {Whitened.name: np.zeros(d)}

        def safe_stepsize(model: Whitened, batch_size: int | None) -> float:
            def check(model_log_lik, minibatch_size, **strategy):
                return check_stepsize(model_log_lik, dataset, origin, 1.0, model.log_prior, method=name,
                                      distortion=distortion, per_parameter=False, warn=False, seed=seed, dtype=dtype,
                                      minibatch_size=minibatch_size, **strategy)

            if shared is not None:  # rows sharded: the global answer, the same on every worker
                return shared.whitened_stepsize(check, model, batch_size, name, distortion)
            return float(check(model.log_lik, batch_size).safe_stepsize)

        if plan["choose_batch"] and saved is None:
            sizes["batch"], _ = balanced_batch(lambda size: safe_stepsize(whitened, size), batch, n_rows)

        def whitened_sampler(model: Whitened, phi_starts: np.ndarray):
            step = safe_stepsize(model, sizes["batch"])
            starts = [{Whitened.name: p} for p in phi_starts]
            return prepared(model.log_lik, model.log_prior, starts, step), step

        phi_starts = np.concatenate([np.zeros((1, d)), START_SPREAD * rng.standard_normal((n_chains - 1, d))])
        if saved is None:
            sampler, stepsize = whitened_sampler(whitened, phi_starts)
        else:
            stepsize = float(saved["stepsize"])
            sampler = prepared(whitened.log_lik, whitened.log_prior, [{Whitened.name: p} for p in phi_starts], stepsize)
            sampler.restore(store.state)
        why = (f"d = {d} ≤ {DENSE_MAX}: the Hessian at the mode is taken whole and the chain moves its whitened "
               f"parameters, so every direction mixes alike (κ {kappa:.3g}" + (
                   f"; {scaled_kappa:.3g} after one stepsize per element, which per-parameter stepsizes could not "
                   f"remove)" if scaled_kappa >= 10 else ")"))
        if probed:
            why += f"; {probed} flat direction(s) of the Hessian measured along a line"
        preconditioner, to_user = "dense", whitened.to_user
        state = {"model": whitened, "stepsize": stepsize}

        def to_xi(draws):
            return state["model"].to_unconstrained(draws[Whitened.name])

        if store is not None:
            def commit(rounds: "_Rounds", goal: int) -> None:
                """A commit of the run (sgmcmc.auto.checkpoint) at the start of a round."""
                arrays = {f"mode/{k}": v for k, v in mode.items()}
                arrays.update(matrix=state["model"].matrix, stepsize=state["stepsize"], batch=sizes["batch"],
                              kappa=kappa, scaled_kappa=scaled_kappa, probed=probed)
                _commit(store, arrays, rounds, goal)

        if name == "sgldcv":
            def adapt(conv: Convergence, rounds: "_Rounds"):
                """Re-estimate the metric from the draws when the chains mix far slower than on the
                Gaussian approximation (docs/DESIGN.md, "sgmcmc.sample")."""
                used = (rounds.kept - conv.burn_in) * rounds.thin
                ess = float(conv.table["ess_bulk"].min())
                observed = n_chains * used / max(ess, 1e-9)
                predicted = 4.0 / state["stepsize"]  # SGLD on unit curvature: AR(1) with 1 − h/2
                if rounds.adaptations >= MAX_ADAPTATIONS or ess < MIN_ESS_TO_ADAPT or observed < SLOW_FACTOR * predicted:
                    return None
                phi = rounds.raw()[Whitened.name][:, conv.burn_in:].reshape(-1, d).astype(np.float64)
                weight = ess / (ess + d)
                cov = weight * np.cov(phi.T).reshape(d, d) + (1 - weight) * np.eye(d)
                values, vectors = np.linalg.eigh(cov)
                model = state["model"].with_matrix(state["model"].matrix @ (vectors * np.sqrt(values)[None, :]))
                now = state["model"].to_flat(rounds.sampler.params[Whitened.name].numpy().reshape(n_chains, d))
                new_sampler, step = whitened_sampler(model, model.to_phi(now))
                if verbose:
                    print(f"sample: the chains mix {observed / predicted:.1f}x slower than on the Gaussian "
                          f"approximation: metric re-estimated from {ess:.0f} effective draws (the draws so far are "
                          f"warm-up); stepsize {step:.3g}", file=sys.stderr)
                state.update(model=model, stepsize=step)
                return new_sampler
    else:
        sample_log_lik, sample_log_prior = (log_lik, log_prior) if constrained is None else constrained.wrap(log_lik, log_prior)
        if saved is None:
            def check(model_log_lik, minibatch_size, replace=False):
                return check_stepsize(model_log_lik, dataset, mode, 1.0, sample_log_prior, method=name,
                                      distortion=distortion, per_parameter=True, warn=False, seed=seed, dtype=dtype,
                                      minibatch_size=minibatch_size, minibatch_replace=replace)

            if shared is not None:  # rows sharded: the smallest over the workers (sgmcmc.auto.sharded)
                stepsize = shared.per_parameter_stepsize(check, sample_log_lik, batch, list(mode))
            else:
                found = check(sample_log_lik, batch)
                stepsize = found.safe_stepsize if found.safe_stepsize_per_parameter is None else found.safe_stepsize_per_parameter
                stepsize = {k: float(v) for k, v in stepsize.items()} if isinstance(stepsize, Mapping) else float(stepsize)
        else:  # resumed: the committed stepsize(s), one per parameter or one for all
            per_parameter = {k[len("stepsize/"):]: float(v) for k, v in saved.items() if k.startswith("stepsize/")}
            stepsize = per_parameter or float(saved["stepsize"])
        sampler = prepared(sample_log_lik, sample_log_prior, mode, stepsize)
        if saved is not None:
            sampler.restore(store.state)
        if store is not None:
            def commit(rounds: "_Rounds", goal: int) -> None:
                """A commit of the run (sgmcmc.auto.checkpoint) at the start of a round."""
                arrays = {f"mode/{k}": v for k, v in mode.items()}
                if isinstance(stepsize, dict):
                    arrays.update({f"stepsize/{k}": v for k, v in stepsize.items()})
                else:
                    arrays["stepsize"] = stepsize
                _commit(store, arrays, rounds, goal)
        kappa = scaled_kappa = float("nan")
        why = (f"d = {d} > {DENSE_MAX}: a dense Hessian would cost {d} products; one stepsize per parameter from the "
               f"stability check instead (the chains start at the mode)")
        preconditioner, to_xi = "per-parameter", dict
        to_user = dict if constrained is None else constrained.to_constrained
    if shared is not None:  # the workers' chains are one run only if these agree (sgmcmc.auto.sharded)
        shared.check_agreed({"mode": mode, "stepsize": stepsize, "minibatch size": sizes["batch"],
                             "metric": state["model"].matrix if preconditioner == "dense" else None})
    seconds["curvature and choice"] = time.perf_counter() - t
    if verbose:
        print(f"sample: {name}, {preconditioner} preconditioner, minibatch {sizes['batch']:,}, stepsize "
              f"{stepsize if isinstance(stepsize, dict) else f'{stepsize:.3g}'} (sd within {distortion:.1%} on the "
              f"Gaussian approximation); {why}", file=sys.stderr)

    # 4.-5. rounds
    t = time.perf_counter()
    rounds = _Rounds(sampler, to_xi, to_user, n_chains, plan, started, verbose, f"sample: {name}", adapt, commit, shared)
    if preconditioner == "dense":
        # about four kept draws per autocorrelation time of the Gaussian approximation (4/h): a
        # change of thinning compiles the sampling program anew (~1-3 s), so it is set once here
        rounds.thin = int(2 ** max(0, math.floor(math.log2(1.0 / stepsize))))
    if saved is not None:
        rounds.resume(store.manifest["rounds"], *store.draws())
    conv, stopped_by = rounds.run()
    if preconditioner == "dense":
        stepsize = state["stepsize"]
    seconds["sampling"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - started
    report = SampleReport(
        method=name, preconditioner=preconditioner, why=why, stepsize=stepsize, distortion=distortion, dim=d,
        condition_number=kappa, scaled_condition_number=scaled_kappa,
        mode_search={"iterations": N_ITERS_OPT, "seconds": seconds["checks and mode"]},
        minibatch_size=sizes["batch"], n_rows=n_rows, n_chains=n_chains, iterations=rounds.iterations,
        burn_in=rounds.warm_up + conv.burn_in * rounds.thin, thin=rounds.thin, adaptations=rounds.adaptations,
        converged=conv.converged,
        target_ess=plan["target_ess"], max_rhat=plan["max_rhat"], worst_ess=conv.worst_ess,
        worst_rhat=conv.worst_rhat, stopped_by=stopped_by, seconds=seconds, seed=seed, table=conv.table,
    )
    result = adapted(rounds.samples(conv.burn_in, name, seed), report)
    if not conv.converged:
        worst = conv.worst(3)
        named = ", ".join(f"{i} (bulk ESS {r.ess_bulk:.0f}, tail ESS {r.ess_tail:.0f}, R-hat {r.r_hat:.3f})"
                          for i, r in worst.iterrows())
        warnings.warn(
            f"sample: {stopped_by} reached after {rounds.iterations:,} iterations per chain before every element "
            f"met bulk and tail ESS >= {plan['target_ess']:g} and R-hat <= {plan['max_rhat']:g}; worst: {named}. The "
            f"samples are returned (samples.report, samples.summary()); do not trust these elements' means and "
            f"error bars. Give a larger max_iters / max_time, or reparametrise the slow parameters",
            ConvergenceWarning, stacklevel=user_stacklevel(),
        )
    if verbose and conv.converged:
        print(f"sample: converged after {rounds.iterations:,} iterations per chain in {seconds['total']:.1f} s (worst "
              f"ESS {conv.worst_ess:.0f}, worst R-hat {conv.worst_rhat:.4f}): samples.report, samples.summary()",
              file=sys.stderr)
    return result


def balanced_batch(safe: Callable[[int | None], float], batch: int, n_rows: int) -> tuple[int, float]:
    r"""The minibatch size at which the gradient noise costs the stepsize at most half: with
    :math:`h_\infty` = ``safe(None)`` (exact gradients: the discretisation alone) and
    :math:`h_n` = ``safe(n)``, keep n when :math:`h_n \ge h_\infty/2`, else grow it to
    :math:`n\,h_\infty/(2h_n)` (at most :data:`MAX_MINIBATCH` and N). Why: on the Gaussian
    approximation :math:`\rho^2 = (1 + q/4)/(1 - \mu/4)` with the noise term q ∝ h/n, so while
    the noise decides the stepsize, h ∝ n and the cost per effective draw, ∝ (c₀ + c₁n)/h, falls
    as n grows; once the discretisation decides it, h is fixed and the cost grows with n. The
    two terms balance at :math:`h \approx h_\infty/2`. Returns (n, h_∞)."""
    exact = safe(None)
    noisy = safe(batch)
    if noisy >= exact / 2 or batch >= n_rows:
        return batch, exact
    return int(min(n_rows, MAX_MINIBATCH, math.ceil(batch * exact / (2 * noisy)))), exact


def _checked_plan(dataset, params, n_chains, target_ess, max_rhat, max_iters, max_time, minibatch_size, method,
                  dtype, seed, distributed: tuple) -> dict:
    """The cheap argument checks, before anything is traced; returns the resolved settings. With
    rows sharded (``distributed``: strategy, shard_rows, checkpoint_dir, log_prior, constraints),
    then the exchange of the workers' arguments and row counts: N and the seed are the run's, and
    ``shared`` is the :class:`~sgmcmc.auto.sharded.ShardedRows` (else None)."""
    strategy, shard_rows, checkpoint_dir, log_prior, constraints = distributed
    topology(strategy, shard_rows)  # bad types first, as the samplers refuse them
    if is_batch_stream(dataset):
        raise ValueError(
            "sample does not take a tf.data.Dataset: it finds the mode and the curvature with passes over all "
            "rows and samples with a control variate anchored by one. Pass the rows as a dict of name -> array, "
            f"or sample the pipeline with {checks.BATCH_STREAM_SAMPLERS} (dataset=<the tf.data.Dataset>, n_rows=N)"
        )
    if isinstance(params, (list, tuple)):
        raise TypeError("sample takes one dict of starting values (the mode search starts there) and chooses the "
                        "chains' starts itself; give params as a dict, e.g. params={'beta': np.zeros(3)}")
    if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 2:
        raise ValueError(f"n_chains={n_chains!r}: sample needs at least 2 chains (R-hat compares them); the default is 4")
    for label, value, low in (("target_ess", target_ess, 0.0), ("max_rhat", max_rhat, 1.0)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value) \
                or not value > low:
            raise ValueError(f"{label}={value!r} must be a finite number > {low:g} (defaults: target_ess=400, "
                             f"max_rhat=1.01)")
    if max_iters is not None and (isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer))
                                  or max_iters < 100):
        raise ValueError(f"max_iters={max_iters!r} must be a whole number >= 100 (iterations per chain), or None")
    if max_time is not None and (isinstance(max_time, bool) or not isinstance(max_time, (int, float, np.number))
                                 or not np.isfinite(max_time) or not max_time > 0):
        raise ValueError(f"max_time={max_time!r} must be a positive number of seconds, or None")
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed={seed!r} must be an int or None")
    dtype = checks.as_dtype(dtype)
    data = checks.check_dataset(dataset)
    n_rows = len(next(iter(data.values())))
    drawn = int(np.random.SeedSequence().entropy % 2**31) if seed is None else int(seed)
    same = dict(params={k: np.asarray(v) for k, v in params.items()}, n_chains=n_chains, target_ess=target_ess,
                max_rhat=max_rhat, max_iters=max_iters, max_time=max_time, minibatch_size=minibatch_size, method=method,
                dtype=dtype.name, seed=seed, log_prior=log_prior is not None,
                constraints=sorted(constraints) if isinstance(constraints, Mapping) else constraints)
    collective = sharded_rows(strategy, shard_rows, checkpoint_dir, same)
    shared = None
    if collective is not None:
        shared, drawn = ShardedRows.exchange(collective, n_rows, drawn, strategy, shard_rows)
        n_rows = shared.n_rows
    batch = min(n_rows, DEFAULT_MINIBATCH) if minibatch_size is None else checks.batch_size(minibatch_size, n_rows)
    if max_iters is None:
        max_iters = DEFAULT_MAX_ITERS if max_time is None else sys.maxsize
    return dict(
        dtype=dtype, seed=drawn, seed_drawn=seed is None, shared=shared,
        n_rows=n_rows, batch=batch, choose_batch=minibatch_size is None, max_iters=int(max_iters), max_time=max_time, method=method,
        target_ess=float(target_ess), max_rhat=float(max_rhat),
    )


def _commit(store: SampleCheckpoint, plan: dict[str, Any], rounds: "_Rounds", goal: int) -> None:
    """Commit the run's set-up ``plan`` with the rounds' counters, sampler state and draws so far."""
    counters = {"iterations": rounds.iterations, "thin": rounds.thin, "warm_up": rounds.warm_up,
                "adaptations": rounds.adaptations, "goal": goal}
    kept = bool(rounds.draws)
    store.commit(plan, counters, rounds.sampler, rounds.raw() if kept else None,
                 np.concatenate(rounds.log_post, axis=1) if kept else None,
                 np.concatenate(rounds.at) if kept else None)


class _Rounds:
    """The sampling rounds of :func:`sample` and the draws they keep."""

    def __init__(self, sampler, to_xi: Callable, to_user: Callable, n_chains: int, plan: dict, started: float,
                 verbose: bool, desc: str, adapt: Callable | None = None, commit: Callable | None = None,
                 shared: ShardedRows | None = None):
        self.sampler, self.to_xi, self.to_user = sampler, to_xi, to_user
        #: With rows sharded: the clock's decisions are agreed (every worker makes the same calls).
        self.shared = shared
        self.n_chains, self.plan, self.started, self.verbose, self.desc = n_chains, plan, started, verbose, desc
        self.adapt, self.commit = adapt, commit
        self.goal: int | None = None
        self.iterations, self.thin = 0, 1
        #: Iterations per chain run before the last re-estimation of the metric (dropped).
        self.warm_up, self.adaptations = 0, 0
        self.draws: list[dict[str, np.ndarray]] = []  # the sampler's arrays (K, m, ...), one per piece
        self.log_post: list[np.ndarray] = []
        self.at: list[np.ndarray] = []  # the global iteration of every kept draw

    def _out_of_time(self) -> bool:
        limit = self.plan["max_time"]
        late = limit is not None and time.perf_counter() - self.started >= limit
        return late if self.shared is None or limit is None else self.shared.any(late)

    def _keep(self, out: Samples, first: int, n: int) -> None:
        arrays = out.by_chain()
        if next(iter(arrays.values())).shape[1] == 0:
            return
        self.draws.append(arrays)
        self.log_post.append(out.log_posterior_by_chain())
        self.at.append(np.arange(first + 1, first + n + 1)[(np.arange(first + 1, first + n + 1)) % self.thin == 0])
        if self.kept > MAX_KEPT:  # thin everything kept so far by 2
            self.thin *= 2
            keep = [a % self.thin == 0 for a in self.at]
            self.draws = [{k: v[:, m] for k, v in d.items()} for d, m in zip(self.draws, keep)]
            self.log_post = [lp[:, m] for lp, m in zip(self.log_post, keep)]
            self.at = [a[m] for a, m in zip(self.at, keep)]

    def resume(self, counters: dict, draws: list, log_post: list, at: list) -> None:
        """Continue from a checkpoint's counters and draws (:mod:`sgmcmc.auto.checkpoint`)."""
        self.iterations, self.thin, self.warm_up = counters["iterations"], counters["thin"], counters["warm_up"]
        self.adaptations, self.goal = counters["adaptations"], counters["goal"]
        self.draws, self.log_post, self.at = draws, log_post, at

    @property
    def kept(self) -> int:
        """Kept draws per chain."""
        return sum(len(a) for a in self.at)

    def raw(self) -> dict[str, np.ndarray]:
        """The sampler's kept arrays ``(K, m, ...)``."""
        return {k: np.concatenate([d[k] for d in self.draws], axis=1) for k in self.draws[0]}

    def restart(self, sampler) -> None:
        """Continue with ``sampler`` (the chains' states carried over); what was kept is warm-up."""
        self.sampler, self.warm_up = sampler, self.iterations
        self.adaptations += 1
        self.draws, self.log_post, self.at = [], [], []

    def _joined(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        """(user-scale draws, unconstrained draws, log posterior), each ``(K, m, ...)``."""
        xi = self.to_xi(self.raw())
        return self.to_user(xi), xi, np.concatenate(self.log_post, axis=1)

    def samples(self, burn_in: int, method: str, seed: int) -> Samples:
        """The kept draws after ``burn_in`` kept draws per chain, on the user's scale."""
        if not self.draws:
            return Samples({}, n_chains=self.n_chains, method=method, seed=seed)
        user, xi, lp = self._joined()
        cut = lambda a: a[:, burn_in:]  # noqa: E731
        return Samples(
            {k: cut(v) for k, v in user.items()}, n_chains=self.n_chains, log_posterior=cut(lp), method=method,
            seed=seed, unconstrained=None if user is xi else {k: cut(v) for k, v in xi.items()},
            burn_in_found=self.warm_up + burn_in * self.thin,
            settings={"thin": self.thin, "burn_in": self.warm_up + burn_in * self.thin},
        )

    def run(self) -> tuple[Convergence, str]:
        plan = self.plan
        budget = plan["max_iters"]
        bar = tqdm(total=None if budget == sys.maxsize else budget, desc=self.desc, unit="it",
                   disable=not self.verbose, leave=False)
        goal, piece = self.goal or min(FIRST_ROUND, budget), 256
        try:
            while True:
                if self.commit is not None:
                    self.commit(self, goal)
                while self.iterations < goal and not self._out_of_time():
                    # whole thinning groups (a call ending mid-group compiles another program),
                    # in a few sizes (powers of two) whatever the rate
                    n = min(piece, goal - self.iterations)
                    n = max(self.thin, n - n % self.thin)
                    if self.iterations + n > budget:
                        n = budget - self.iterations
                    began = time.perf_counter()
                    out = self._sample(n)
                    self._keep(out, self.iterations, n)
                    self.iterations += n
                    bar.update(n)
                    rate = n / max(time.perf_counter() - began, 1e-6)
                    piece = int(2 ** round(math.log2(min(max(rate * PIECE_SECONDS, 128), 131_072))))
                    if self.shared is not None:  # the slowest worker's piece, on every worker
                        piece = int(self.shared.min(piece))
                user, _, _ = self._joined()
                conv = assess(user, plan["target_ess"], plan["max_rhat"])
                bar.set_postfix_str(f"worst ESS {conv.worst_ess:.0f}/{plan['target_ess']:g}, "
                                    f"worst R-hat {conv.worst_rhat:.3f}")
                if conv.converged:
                    return conv, "targets"
                if self.iterations >= budget:
                    return conv, "max_iters"
                if self._out_of_time():
                    return conv, "max_time"
                adapted_sampler = None if self.adapt is None else self.adapt(conv, self)
                if adapted_sampler is not None:
                    previous = self.iterations - self.warm_up
                    self.restart(adapted_sampler)
                    goal = min(budget, self.iterations + max(FIRST_ROUND, previous))
                    continue
                # the ESS grows with the iterations: aim 20 % past the target; R-hat alone above
                # its target (its estimate is noisy near 1.01 at these ESS): half as many again
                ratio = plan["target_ess"] / max(conv.worst_ess, 1.0)
                growth = 1.5 if ratio <= 1 else min(max(1.2 * ratio, 1.25), 4.0)
                run = self.iterations - self.warm_up
                goal = int(min(budget, self.warm_up + run * growth))
        finally:
            bar.close()

    def _sample(self, n: int) -> Samples:
        try:
            return sample_chain(self.sampler, n, verbose=False, thin=self.thin)
        except (Interrupted, DivergenceError, SamplingError) as error:
            partial = getattr(error, "samples", None)
            done = self.iterations
            if isinstance(partial, Samples) and partial.n_kept:
                self._keep(partial, self.iterations, partial.n_kept * self.thin)
                done += partial.n_kept * self.thin
            kept = self.samples(0, self.desc.split(": ")[-1], self.plan["seed"])
            if isinstance(error, Interrupted):
                raise Interrupted(
                    f"sample: interrupted after {done:,} sampling iterations per chain. Every draw kept so far is on "
                    f"this exception, on your scale: error.samples ({kept.n_chains} chains x {kept.n_kept:,} draws, "
                    f"thin {self.thin}, burn-in not removed). sample() starts afresh when called again", done, kept,
                ) from error
            error.samples = kept
            raise
