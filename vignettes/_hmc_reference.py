"""Full-batch HMC reference for the digits Bayesian neural network of ``bnn_keras.py`` (issue 46.4).

The posterior is the vignette's, from one definition (``_digits_bnn.py``): the Keras MLP 64-100-10
(ReLU, 7,510 parameters), the categorical likelihood on its logits over the 962 training digits,
independent N(0, 2²) priors on every weight and bias; the log density is
``bnn.log_lik(θ, train) + bnn.log_prior(θ)`` of ``sgmcmc.keras.from_model`` itself, evaluated for
every chain at once (``tf.vectorized_map``), in float32 as the vignette's samplers run.

The sampler is TFP's ``HamiltonianMonteCarlo`` (identity mass matrix, 100 leapfrog steps, the
stepsize jittered ±20 % every iteration) under ``DualAveragingStepSizeAdaptation`` with ONE
STEPSIZE PER CHAIN (target acceptance 0.8), so no chain learns anything from another; the chains
start from fresh Keras initialisations (as the vignette's ensembles do), warm up with
adaptation, then keep every ``thin``-th draw's test-set class probabilities. Chains 1 … C/2 are run A, chains C/2+1 … C run B:
two independent references, whose distance (agreement, total variation) is the floor below which
no method can be told from HMC. Everything runs in compiled chunks of ``tf.function`` (XLA with
``--jit``, the default and what made the cache; on this 2-core machine XLA measured no faster than
graph mode and compiled ~10 s longer: see ``benchmarks/RESULTS.md``, round 6, session 4).

Written to ``vignettes/data/digits_hmc_reference.npz`` (``_digits_bnn.load_hmc_reference`` reads
it): each run's mean test predictive (float32, 594 × 10), the split and network's fingerprint, the
settings and seeds, per-chain acceptance rates and stepsizes, R-hat and ESS of per-draw summaries
(test NLL, test accuracy, training log-likelihood, log posterior), each run's accuracy, NLL, ECE
and Brier score, the floor, and the run time.

Run from the repository root: ``python vignettes/_hmc_reference.py [--quick] [--out FILE]``.
``--quick`` is a small smoke version (seconds; not a reference: it writes to out/ by default).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sgmcmc  # noqa: F401 -- first: it imports TensorFlow without its start-up lines (sgmcmc/_quiet.py)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _digits_bnn import REFERENCE, digits_bnn, fingerprint, load_digits_split, mlp, DIGITS  # noqa: E402

#: The real run: 4 chains (runs A = chains 1-2, B = 3-4), 100 leapfrog steps a draw.
FULL = dict(n_chains=4, n_leapfrog=100, n_warmup=600, n_draws=1_200, thin=4, target_accept=0.8,
            init_step_size=1e-3, jitter=0.2, chunk=40, seed=46)
#: --quick: a smoke test of the same code path (seconds).
QUICK = dict(FULL, n_chains=2, n_leapfrog=10, n_warmup=20, n_draws=20, thin=2, chunk=10)


class JitteredStepSize(tfp.mcmc.TransitionKernel):
    """HMC whose stepsize is multiplied, at every iteration and for every chain, by an independent
    uniform factor in [1 − jitter, 1 + jitter] (Neal 2011, §5.4.2.3): a fixed stepsize and number
    of leapfrog steps can make trajectories nearly periodic in some direction, which then barely
    moves. A mixture of exact kernels, so exact. The kernel results keep the unjittered stepsize
    (what ``DualAveragingStepSizeAdaptation`` reads and sets).

    Parameters
    ----------
    inner_kernel : tfp.mcmc.HamiltonianMonteCarlo
        Reads its stepsize from ``results.accepted_results.step_size``.
    jitter : float
        In [0, 1).
    """

    def __init__(self, inner_kernel: tfp.mcmc.HamiltonianMonteCarlo, jitter: float):
        self._parameters = {"inner_kernel": inner_kernel, "jitter": jitter}

    @property
    def inner_kernel(self) -> tfp.mcmc.HamiltonianMonteCarlo:
        return self._parameters["inner_kernel"]

    @property
    def is_calibrated(self) -> bool:
        return self.inner_kernel.is_calibrated

    def one_step(self, current_state: Any, previous_kernel_results: Any, seed: Any = None) -> tuple[Any, Any]:
        jitter_seed, step_seed = tfp.random.split_seed(seed)
        accepted = previous_kernel_results.accepted_results
        base = accepted.step_size
        jitter = self._parameters["jitter"]
        jittered = tf.nest.map_structure(
            lambda s: s * tf.random.stateless_uniform(tf.shape(s), jitter_seed, 1.0 - jitter, 1.0 + jitter, s.dtype), base)
        results = previous_kernel_results._replace(accepted_results=accepted._replace(step_size=jittered))
        state, results = self.inner_kernel.one_step(current_state, results, seed=step_seed)
        return state, results._replace(accepted_results=results.accepted_results._replace(step_size=base))

    def bootstrap_results(self, init_state: Any) -> Any:
        return self.inner_kernel.bootstrap_results(init_state)


def _trace_state(state: tf.Tensor) -> dict[str, tf.Tensor]:
    """``run_hmc``'s default trace: the state itself."""
    return {"state": state}


def run_hmc(
    target_log_prob_fn: Callable[[tf.Tensor], tf.Tensor],
    init_state: np.ndarray,
    n_warmup: int,
    n_draws: int,
    n_leapfrog: int,
    thin: int = 1,
    target_accept: float = 0.8,
    init_step_size: float = 1e-3,
    jitter: float = 0.2,
    seed: int = 0,
    chunk: int = 50,
    trace_fn: Callable[[tf.Tensor], dict[str, tf.Tensor]] | None = None,
    jit_compile: bool = True,
    log: Callable[[str], Any] | None = print,
) -> dict[str, Any]:
    """Full-batch HMC of several independent chains, each with its own dual-averaging stepsize.

    TFP's ``HamiltonianMonteCarlo`` (identity mass matrix, ``n_leapfrog`` leapfrog steps a
    draw, the stepsize jittered by ±``jitter``) under ``DualAveragingStepSizeAdaptation`` with a
    stepsize of shape (C, 1): chain c's stepsize adapts to chain c's acceptance alone. ``n_warmup`` adapting iterations (discarded),
    then ``n_draws`` iterations at the adapted stepsize (the dual-averaging average), of which
    every ``thin``-th is kept. Run in compiled chunks of ``chunk`` iterations (one ``tf.function``
    for warm-up and draws alike, compiled once), stateless seeds ``(seed, chunk index)``.

    Parameters
    ----------
    target_log_prob_fn : callable
        Flat states (C, D) -> log densities (C,), up to a constant.
    init_state : array, shape (C, D)
        The chains' starts (C ≥ 1), in the dtype to sample in.
    n_warmup, n_draws, n_leapfrog, thin : int
        Iterations of warm-up (all adapting) and of sampling; leapfrog steps a draw; thinning.
    target_accept : float
        The acceptance probability the dual averaging aims at.
    init_step_size : float
        The stepsize the adaptation starts from.
    jitter : float
        Every iteration's stepsize is the adapted one times a uniform factor in
        [1 − jitter, 1 + jitter] (per chain; :class:`JitteredStepSize`); 0: fixed.
    seed : int
        Seeds every chunk's randomness.
    chunk : int
        Iterations per compiled call (``n_warmup`` and ``n_draws`` are multiples of it, and
        ``chunk`` a multiple of ``thin``).
    trace_fn : callable, optional
        The kept state (C, D) -> dict of tensors (C, ...) to record; default ``{"state": state}``.
    jit_compile : bool
        Compile the chunks with XLA.
    log : callable or None
        Called with a progress line after every chunk.

    Returns
    -------
    dict
        ``trace`` (dict name -> array (C, n_draws // thin, ...)), ``log_prob`` (C, kept),
        ``accept`` (C,) mean acceptance probability min(1, exp(log accept ratio)) over the kept
        sampling iterations, ``accept_warmup`` (C,) the same over the warm-up's every
        ``thin``-th, ``step_size`` (C,) the adapted stepsizes, ``n_gradients`` (gradient
        evaluations of the whole batch of chains), ``seconds`` (``warmup``, ``draws``,
        ``total``), ``first_chunk_seconds`` (compilation included).
    """
    if n_warmup % chunk or n_draws % chunk or chunk % thin:
        raise ValueError(f"n_warmup ({n_warmup}) and n_draws ({n_draws}) must be multiples of chunk ({chunk}), "
                         f"and chunk a multiple of thin ({thin})")
    state = tf.convert_to_tensor(init_state)
    if state.shape.rank != 2:
        raise ValueError(f"init_state must be (chains, dimension); got shape {state.shape}")
    n_chains, dtype = int(state.shape[0]), state.dtype
    trace_fn = trace_fn or _trace_state
    step_size = tf.fill([n_chains, 1], tf.constant(init_step_size, dtype))
    hmc = tfp.mcmc.HamiltonianMonteCarlo(target_log_prob_fn, step_size=step_size, num_leapfrog_steps=n_leapfrog,
                                         store_parameters_in_results=True)  # the stepsize in the results
    if jitter:
        hmc = JitteredStepSize(hmc, jitter)
    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(hmc, num_adaptation_steps=n_warmup,
                                                      target_accept_prob=tf.constant(target_accept, dtype))

    def accept_prob(results: Any) -> tf.Tensor:
        return tf.exp(tf.minimum(results.inner_results.log_accept_ratio, 0.0))

    def trace(s: tf.Tensor, r: Any) -> dict[str, tf.Tensor]:
        return {"accept": accept_prob(r), "log_prob": r.inner_results.accepted_results.target_log_prob, **trace_fn(s)}

    @tf.function(jit_compile=jit_compile)
    def advance(current: tf.Tensor, results: Any, chunk_seed: tf.Tensor) -> Any:
        """``chunk`` iterations, every ``thin``-th traced (one program for warm-up and draws)."""
        return tfp.mcmc.sample_chain(chunk // thin, current, previous_kernel_results=results, kernel=kernel,
                                     num_steps_between_results=thin - 1, trace_fn=trace,
                                     return_final_kernel_results=True, seed=chunk_seed)

    results = kernel.bootstrap_results(state)
    traces: list[dict[str, np.ndarray]] = []
    accept_warm: list[np.ndarray] = []
    seconds, first_chunk_seconds = {}, 0.0
    start = time.perf_counter()
    for phase, n in (("warmup", n_warmup), ("draws", n_draws)):
        phase_start = time.perf_counter()
        for i in range(n // chunk):
            chunk_start = time.perf_counter()
            index = i if phase == "warmup" else n_warmup // chunk + i
            out = advance(state, results, tf.constant([seed, index], tf.int32))
            state, trace, results = out.all_states[-1], out.trace, out.final_kernel_results
            trace = {k: np.moveaxis(v.numpy(), 0, 1) for k, v in trace.items()}  # (C, kept, ...)
            (accept_warm if phase == "warmup" else traces).append(trace if phase == "draws" else trace["accept"])
            first_chunk_seconds = first_chunk_seconds or time.perf_counter() - chunk_start
            if log is not None:
                step = np.ravel(results.new_step_size.numpy())
                log(f"  {phase} {(i + 1) * chunk:>6}/{n}: accept {np.round(trace['accept'].mean(1), 3)}, "
                    f"stepsize {np.array2string(step, precision=4)}, log p {np.round(trace['log_prob'][:, -1], 1)}, "
                    f"{time.perf_counter() - start:.0f} s")
        seconds[phase] = time.perf_counter() - phase_start
    seconds["total"] = time.perf_counter() - start
    trace = {k: np.concatenate([t[k] for t in traces], axis=1) for k in traces[0]}
    final_step = np.ravel(results.new_step_size.numpy())  # after the warm-up: the dual-averaging average
    return {"trace": {k: v for k, v in trace.items() if k not in ("accept", "log_prob")},
            "log_prob": trace["log_prob"], "accept": trace["accept"].mean(1),
            "accept_warmup": np.concatenate(accept_warm, axis=1).mean(1) if accept_warm else np.full(n_chains, np.nan),
            "step_size": final_step, "n_gradients": (n_warmup + n_draws) * n_leapfrog, "seconds": seconds,
            "first_chunk_seconds": first_chunk_seconds}


def digits_posterior(bnn: Any, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """The digits network's log posterior and predictions on flat parameter vectors.

    Parameters
    ----------
    bnn : sgmcmc.keras.BayesianNetwork
        ``_digits_bnn.digits_bnn()``.
    data : dict
        ``_digits_bnn.load_digits_split()``.

    Returns
    -------
    dict
        ``flatten`` (dict name -> array → flat vector), ``log_prob`` (flat states (C, D) → log
        posterior (C,), up to a constant: ``bnn.log_lik`` on the training rows plus
        ``bnn.log_prior``), ``trace`` (flat states → ``test_probs`` (C, n_test, 10) and
        ``train_log_lik`` (C,)), ``dimension``.
    """
    shapes = [tuple(bnn.params[name].shape) for name in bnn.names]
    sizes = [math.prod(shape) for shape in shapes]
    train = {"x": tf.constant(data["x"]), "y": tf.constant(data["y"])}
    x_test = tf.constant(data["x_test"])

    def unflatten(theta: tf.Tensor) -> dict[str, tf.Tensor]:
        parts = tf.split(theta, sizes, axis=-1)
        return {name: tf.reshape(part, shape) for name, part, shape in zip(bnn.names, parts, shapes)}

    def per_chain(fn: Callable[[dict[str, tf.Tensor]], Any]) -> Callable[[tf.Tensor], Any]:
        return lambda states: tf.vectorized_map(lambda theta: fn(unflatten(theta)), states)

    log_lik = per_chain(lambda p: bnn.log_lik(p, train))
    log_prob = per_chain(lambda p: bnn.log_lik(p, train) + bnn.log_prior(p))
    test_probs = per_chain(lambda p: tf.nn.softmax(bnn.forward(p, x_test)))
    return {"flatten": lambda params: np.concatenate([np.ravel(params[name]) for name in bnn.names]),
            "log_prob": log_prob, "trace": lambda s: {"test_probs": test_probs(s), "train_log_lik": log_lik(s)},
            "dimension": sum(sizes)}


def rhat_ess(draws: np.ndarray) -> dict[str, float]:
    """Rank-normalised split R-hat and bulk / tail ESS (ArviZ) of a summary's draws (C, K)."""
    import arviz as az

    return {"rhat": float(az.rhat(draws)), "ess_bulk": float(az.ess(draws)), "ess_tail": float(az.ess(draws, method="tail"))}


def summarise(result: dict[str, Any], y_test: np.ndarray) -> dict[str, Any]:
    """Each run's mean predictive and scores, the floor between the runs, and the convergence
    diagnostics of an HMC result on the digits (``run_hmc`` with ``digits_posterior``'s trace).

    Run A pools chains 1 … C/2, run B chains C/2+1 … C (C even). Besides R-hat and ESS of the
    per-draw summaries: R-hat of every test row's true-class probability (function space), the
    total variation between every two chains' predictives, and each run's split-half total
    variation (its first half of draws against its second, same chains: Monte Carlo noise of half
    a run, no mode effect) to set against the floor.
    """
    import warnings

    import arviz as az
    import sgmcmc.keras

    probs = result["trace"]["test_probs"].astype(np.float64)  # (C, K, n_test, 10)
    n_chains, n_kept = probs.shape[:2]
    if n_chains < 2 or n_chains % 2:
        raise ValueError(f"two runs of equally many chains need an even number of chains; got {n_chains}")
    rows = np.arange(len(y_test))
    true_class = probs[:, :, rows, y_test]  # (C, K, n_test): each draw's probability of the true class
    per_draw = {"test_nll": -np.log(np.maximum(true_class, 1e-12)).mean(-1),
                "test_accuracy": (probs.argmax(-1) == y_test).mean(-1),
                "train_log_lik": result["trace"]["train_log_lik"].astype(np.float64),
                "log_posterior": result["log_prob"].astype(np.float64)}
    runs = {"a": probs[: n_chains // 2], "b": probs[n_chains // 2:]}
    run_a, run_b = (runs[r].mean((0, 1)).astype(np.float32) for r in "ab")
    diagnostics = {name: rhat_ess(v) | {"mean": float(v.mean()), "chain_means": v.mean(1).round(5).tolist()}
                   for name, v in per_draw.items()}
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # a row whose probability never moves: R-hat NaN
        rhat_rows = np.array([float(az.rhat(true_class[:, :, i])) for i in rows])
    diagnostics["true_class_prob_rhat"] = {
        "max": float(np.nanmax(rhat_rows)), "median": float(np.nanmedian(rhat_rows)),
        "share_above_1.01": float(np.mean(rhat_rows > 1.01)), "share_above_1.1": float(np.mean(rhat_rows > 1.1)),
        "rows_constant": int(np.isnan(rhat_rows).sum())}
    per_chain = probs.mean(1)
    diagnostics["chain_pairwise_tv"] = np.round([[sgmcmc.keras.total_variation(a, b) for b in per_chain]
                                                 for a in per_chain], 5).tolist()
    diagnostics["split_half_tv"] = {r: sgmcmc.keras.total_variation(p[:, : n_kept // 2].mean((0, 1)), p[:, n_kept // 2:].mean((0, 1)))
                                    for r, p in runs.items()}
    pooled = 0.5 * (run_a.astype(np.float64) + run_b)
    return {"probs_a": run_a, "probs_b": run_b,
            "metrics": {"a": sgmcmc.keras.evaluate(run_a, y_test), "b": sgmcmc.keras.evaluate(run_b, y_test),
                        "pooled": sgmcmc.keras.evaluate(pooled, y_test)},
            "floor_agreement": sgmcmc.keras.agreement(run_a, run_b), "floor_tv": sgmcmc.keras.total_variation(run_a, run_b),
            "diagnostics": diagnostics}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the reference (or ``--quick`` its smoke version), write it, print its numbers."""
    parser = argparse.ArgumentParser(prog="_hmc_reference.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke version of seconds (not a reference)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where to write (default {REFERENCE.relative_to(Path.cwd()) if REFERENCE.is_relative_to(Path.cwd()) else REFERENCE}; "
                             "--quick: out/hmc_reference_quick.npz)")
    parser.add_argument("--seed", type=int, default=None, help=f"seeds the starts and the chains (default {FULL['seed']})")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True, help="compile with XLA")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override one setting (pilot runs), e.g. --set n_leapfrog=50; the keys: {', '.join(FULL)}")
    args = parser.parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    if args.seed is not None:
        settings["seed"] = args.seed
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in FULL:
            parser.error(f"--set {item}: unknown setting {key!r} (the settings: {', '.join(FULL)})")
        settings[key] = type(FULL[key])(json.loads(value))
    out = args.out or (Path("out") / "hmc_reference_quick.npz" if args.quick else REFERENCE)

    import keras

    data = load_digits_split()
    bnn = digits_bnn()
    posterior = digits_posterior(bnn, data)
    keras.utils.set_random_seed(settings["seed"])  # the starts: fresh Keras initialisations, as the vignette's
    starts = np.stack([posterior["flatten"](dict(zip(bnn.names, (v.numpy() for v in mlp(64, DIGITS["hidden"]).trainable_variables))))
                       for _ in range(settings["n_chains"])]).astype(np.float32)
    print(f"digits HMC reference: {posterior['dimension']} parameters, {len(data['y'])} training rows, "
          f"{len(data['y_test'])} test rows; {settings}; XLA {args.jit}")
    hmc_settings = {k: settings[k] for k in ("n_warmup", "n_draws", "n_leapfrog", "thin", "target_accept",
                                              "init_step_size", "jitter", "seed", "chunk")}
    result = run_hmc(posterior["log_prob"], starts, **hmc_settings, trace_fn=posterior["trace"], jit_compile=args.jit,
                     log=lambda line: print(line, flush=True))
    raw = out.with_name(out.stem + "_draws.npz") if args.quick or out != REFERENCE else Path("out") / "digits_hmc_draws.npz"
    raw.parent.mkdir(parents=True, exist_ok=True)
    np.savez(raw, log_prob=result["log_prob"], **result["trace"])  # the per-draw traces (not committed; ~30 MB)
    print(f"wrote the per-draw traces to {raw}")
    summary = summarise(result, data["y_test"])
    seconds_per_gradient = (result["seconds"]["total"] - result["first_chunk_seconds"]) / (
        result["n_gradients"] * (1 - settings["chunk"] / (settings["n_warmup"] + settings["n_draws"])))
    meta = {"fingerprint": fingerprint(data), "settings": settings | {"jit_compile": args.jit, "quick": args.quick},
            "seeds": {"starts": f"keras.utils.set_random_seed({settings['seed']}), then one mlp() per chain",
                      "chunks": f"stateless ({settings['seed']}, chunk index)",
                      "run_a_chains": list(range(settings["n_chains"] // 2)),
                      "run_b_chains": list(range(settings["n_chains"] // 2, settings["n_chains"]))},
            "acceptance": np.round(result["accept"], 4).tolist(), "acceptance_warmup": np.round(result["accept_warmup"], 4).tolist(),
            "step_size": result["step_size"].tolist(), "n_gradients": result["n_gradients"],
            "seconds": result["seconds"] | {"first_chunk_with_compilation": result["first_chunk_seconds"],
                                            "per_gradient_all_chains": seconds_per_gradient},
            "diagnostics": summary["diagnostics"], "metrics": summary["metrics"],
            "floor_agreement": summary["floor_agreement"], "floor_tv": summary["floor_tv"],
            "n_kept_per_chain": int(result["trace"]["test_probs"].shape[1])}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, probs_a=summary["probs_a"], probs_b=summary["probs_b"], y_test=data["y_test"].astype(np.int64),
                        meta=np.array(json.dumps(meta)))
    print(f"\nwrote {out} ({out.stat().st_size / 1024:.0f} KB)")
    print(f"run time {result['seconds']['total']:.0f} s ({seconds_per_gradient * 1e3:.2f} ms per gradient of all "
          f"{settings['n_chains']} chains after the first chunk, which took {result['first_chunk_seconds']:.1f} s "
          f"with compilation)")
    print(f"acceptance {meta['acceptance']} (warm-up {meta['acceptance_warmup']}), stepsizes {np.round(result['step_size'], 5)}")
    for name, d in summary["diagnostics"].items():
        print(f"  {name}: {d}")
    for run, m in summary["metrics"].items():
        print(f"  run {run}: " + "  ".join(f"{k} {v:.4f}" for k, v in m.items()))
    print(f"floor (run A against run B): agreement {summary['floor_agreement']:.4f}, total variation {summary['floor_tv']:.4f}")
    return meta | {"probs_a": summary["probs_a"], "probs_b": summary["probs_b"], "path": out}


if __name__ == "__main__":
    main()
