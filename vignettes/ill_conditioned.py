"""Preconditioned samplers on an ill-conditioned posterior: SGLD, pSGLD, HAMCMC and OSGLD.

A Bayesian linear regression whose covariates are badly scaled (standard deviations from 0.1
to 3) and strongly correlated (AR(1), rho = 0.9): the posterior is Gaussian with a condition
number of about 10^4, known exactly. Plain SGLD's stepsize is capped by the stiffest direction
(eps < 2 / lambda_max), so the flat directions barely move; the preconditioned samplers rescale
the directions (pSGLD per coordinate, HAMCMC by an L-BFGS estimate of the inverse Hessian, OSGLD
by the estimated Fisher information) and need no such cap.

A. ``tune_stepsize`` chooses SGLD's stepsize: the KSD of short runs under a fixed budget of
   gradient evaluations; its table of candidates is printed.
B. One chain of each sampler at its stepsize, continued to three lengths (the first fifth of
   each discarded): the worst standardised error of the posterior means, of the posterior sds,
   and the KSD (exact scores, coordinates standardised by the exact posterior sds) against wall
   time (set-up and compilation included), in one figure. The stepsizes of pSGLD and HAMCMC
   come from a factor-3 grid on the quick problem (4,000 iterations, smallest KSD); OSGLD has
   none.
C. The issue-22 case: 26 strongly correlated parameters (AR(1) covariates, rho = 0.9, sds over
   two decades: condition number 2.7e5; ``--quick``: one decade, 5.1e3), N = 5,000, against the
   exact posterior. OSGLD with ``auto_burn_in=True`` (no stepsize, no burn-in to choose); SGLD-CV
   at the stepsize ``tune_stepsize`` picks (capped where ``check_stepsize`` would warn); HAMCMC
   with its default memory (min(d + 1, 50)) and SVRG.

Which sampler to reach for (what parts B and C show):

* posterior near-Gaussian, many data, d up to ~100 dense (badly scaled or correlated): OSGLD
  with ``auto_burn_in=True`` -- nothing to tune, and its preconditioner undoes the conditioning;
* correlated and ill-conditioned but not Gaussian enough for OSGLD's Fisher preconditioner, d
  moderate: HAMCMC (default memory, ``estimator="svrg"``, stepsize 0.1-0.5 or tuned);
* badly scaled but hardly correlated: pSGLD;
* well-conditioned (condition number up to ~10^2-10^3) and concentrated: SGLD-CV at the tuned
  stepsize -- the cheapest iteration; but its stepsize is capped by the stiffest direction, so
  at a condition number kappa the flattest direction needs ~kappa/0.66 iterations per
  autocorrelation time (part C: far more than the run has; at 2.7e5 its SGD mode search does not
  converge either, and says so with a ModeSearchWarning). Full run, part C: OSGLD worst mean
  error 0.07 posterior sds (burn-in found at 5,126), HAMCMC 0.12, SGLD-CV 7.3.

Run ``python vignettes/ill_conditioned.py`` (a few minutes) or ``--quick``.
"""

from __future__ import annotations

from _common import parse_args, savefig  # first: selects the Agg backend

import time

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

import sgmcmc

F64 = tf.float64
PRIOR_SD = 10.0


def make_problem(n_rows: int, d: int = 10, seed: int = 5, log10_sd: tuple[float, float] = (-1.0, 0.5)) -> dict:
    """Data and the exact posterior N(mean, cov) of y = X beta + N(0, 1), beta ~ N(0, 10^2 I);
    AR(1) covariates (rho = 0.9), column sds log-spaced over ``log10_sd``."""
    rng = np.random.default_rng(seed)
    corr = 0.9 ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    X = rng.multivariate_normal(np.zeros(d), corr, size=n_rows) * 10 ** np.linspace(*log10_sd, d)
    beta = rng.normal(0, 1, d)
    y = X @ beta + rng.normal(0, 1, n_rows)
    precision = X.T @ X + np.eye(d) / PRIOR_SD**2
    cov = np.linalg.inv(precision)
    eigs = np.linalg.eigvalsh(precision)
    return {"dataset": {"X": X, "y": y}, "mean": cov @ X.T @ y, "cov": cov, "precision": precision,
            "sd": np.sqrt(np.diag(cov)), "condition": eigs[-1] / eigs[0], "lambda_max": eigs[-1], "d": d}


def log_lik(params, dataset):
    return -0.5 * tf.reduce_sum(tf.square(dataset["y"] - tf.linalg.matvec(dataset["X"], params["beta"])))


def log_prior(params):
    return -0.5 * tf.reduce_sum(tf.square(params["beta"])) / PRIOR_SD**2


def errors(draws: np.ndarray, problem: dict) -> dict:
    """Worst standardised errors of the means and sds, and the KSD with exact scores on
    coordinates standardised by the exact posterior sds (at most 1,000 equally spaced draws)."""
    sd = problem["sd"]
    mean_error = float(np.max(np.abs(draws.mean(0) - problem["mean"]) / sd))
    sd_error = float(np.max(np.abs(draws.std(0) / sd - 1)))
    thinned = draws[np.linspace(0, len(draws) - 1, min(len(draws), 1_000)).astype(int)]
    scores = -(thinned - problem["mean"]) @ problem["precision"]  # exact grad log posterior
    # z = (beta - mean) / sd has score sd * grad_beta log p
    ksd = sgmcmc.ksd({"z": (thinned - problem["mean"]) / sd}, {"z": scores * sd}, standardise=False)  # already standardised
    return {"mean_error": mean_error, "sd_error": sd_error, "ksd": ksd}


def error_curve(name: str, settings: dict, problem: dict, lengths: list[int], seed: int) -> list[dict]:
    """One chain of ``name`` run on to each length in turn (one compilation; the chain continues):
    at each length the errors of its draws after the first fifth, and the wall time so far
    (set-up and compilation included)."""
    start = time.perf_counter()
    setup = getattr(sgmcmc, f"{name}_setup")
    sampler = setup(log_lik, problem["dataset"], {"beta": np.zeros(problem["d"])}, **settings, log_prior=log_prior,
                    minibatch_size=100, seed=seed, dtype=F64)
    draws, rows = np.empty((0, problem["d"])), []
    for n_iters in lengths:
        try:
            more = sgmcmc.sample_chain(sampler, n_iters - len(draws), verbose=False)["beta"]
        except sgmcmc.DivergenceError as error:
            print(f"{name:>7}: diverged at iteration {error.iteration}")
            break
        draws = np.concatenate([draws, more])
        row = {"method": name, "n_iters": n_iters, "seconds": time.perf_counter() - start,
               **errors(draws[n_iters // 5:], problem)}
        rows.append(row)
        print(f"{name:>7} {n_iters:>7} its {row['seconds']:6.1f} s   worst mean error {row['mean_error']:7.2f} sd   "
              f"worst sd ratio error {row['sd_error']:6.2f}   KSD {row['ksd']:.3f}")
    return rows


def correlated_26(quick: bool, seed: int = 1) -> dict:
    """Part C: OSGLD (auto burn-in), tuned SGLD-CV and HAMCMC (default memory) on 26 correlated
    parameters against the exact posterior; returns name -> errors (and OSGLD's burn-in, SGLD-CV's
    stepsize and the tuner's cap). ``seed``: OSGLD's and the tuner's; SGLD-CV's chain ``seed + 1``,
    HAMCMC's ``seed + 2``."""
    problem = make_problem(n_rows=5_000, d=26, log10_sd=(-0.5, 0.5) if quick else (-1.0, 1.0))
    n_iters = 8_000 if quick else 40_000
    start, common = {"beta": np.zeros(26)}, dict(log_prior=log_prior, minibatch_size=500, dtype=F64, verbose=False)
    print(f"26 parameters: condition number {problem['condition']:.2g}; {n_iters} iterations each")
    results = {}

    def show(name: str, draws: np.ndarray, seconds: float, **extra) -> None:
        results[name] = {**errors(draws, problem), "seconds": seconds, **extra}
        r = results[name]
        print(f"{name:>7}: worst mean error {r['mean_error']:6.2f} sd   worst sd ratio error {r['sd_error']:5.2f}   "
              f"KSD {r['ksd']:.3f}   {seconds:5.1f} s" + "".join(f"   {k} {v:.3g}" for k, v in extra.items()))

    t0 = time.perf_counter()
    out = sgmcmc.osgld(log_lik, problem["dataset"], start, n_iters=n_iters, auto_burn_in=True, max_burn_in=100_000,
                       seed=seed, **common)
    show("osgld", out["beta"], time.perf_counter() - t0, burn_in=out.burn_in_found)  # kept draws follow the burn-in

    t0 = time.perf_counter()
    eps, table = sgmcmc.tune_stepsize("sgldcv", log_lik, problem["dataset"], start, budget=50 * 5_000, seed=seed, **common)
    out = sgmcmc.sgldcv(log_lik, problem["dataset"], start, eps, n_iters=n_iters, seed=seed + 1, **common)
    show("sgldcv", out["beta"][n_iters // 5:], time.perf_counter() - t0, stepsize=eps,
         cap=table.attrs["cap"]["stepsize"])

    t0 = time.perf_counter()
    out = sgmcmc.hamcmc(log_lik, problem["dataset"], start, 0.3, warmup_stepsize=0.6 / problem["lambda_max"],
                        estimator="svrg", n_iters=n_iters, seed=seed + 2, **common)
    show("hamcmc", out["beta"][n_iters // 5:], time.perf_counter() - t0)
    results["condition"] = problem["condition"]
    return results


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return the tuning table and the error table."""
    args = parse_args("ill_conditioned", __doc__.splitlines()[0], argv)
    problem = make_problem(n_rows=2_000 if args.quick else 10_000)
    print(f"posterior condition number {problem['condition']:.3g}; SGLD needs eps < 2/lambda_max = "
          f"{2 / problem['lambda_max']:.2e}; posterior sds {problem['sd'].min():.2g} … {problem['sd'].max():.2g}")

    # -- A. SGLD's stepsize by tune_stepsize --------------------------------------------------
    print("\n== A. tune_stepsize for SGLD ==")
    budget = 10**6 if args.quick else 2 * 10**7  # gradient evaluations (iterations x minibatch rows)
    sgld_stepsize, table = sgmcmc.tune_stepsize(
        "sgld", log_lik, problem["dataset"], {"beta": np.zeros(problem["d"])}, log_prior=log_prior,
        minibatch_size=100, budget=budget, seed=1, dtype=F64, verbose=True,
    )
    print(table.to_string())
    print(f"chosen stepsize {sgld_stepsize:.3g}")

    # -- B. error against wall time ------------------------------------------------------------
    print("\n== B. error against wall time ==")
    methods = {
        "sgld": dict(stepsize=sgld_stepsize),
        "psgld": dict(stepsize=1e-2),
        "hamcmc": dict(stepsize=0.1, memory=5, warmup_stepsize=sgld_stepsize),
        "osgld": dict(c=0.1),
    }
    # --quick: the last length's errors (seed 2: sgld worst mean error 48 sd, KSD 81; osgld 0.23,
    # 0.75; psgld KSD 1.8 at 2,000 iterations) are what the test compares, far apart already
    lengths = [500, 1_000, 2_000] if args.quick else [2_000, 8_000, 32_000]
    rows = [row for name, settings in methods.items() for row in error_curve(name, settings, problem, lengths, seed=2)]

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for k, name in enumerate(methods):
        mine = [r for r in rows if r["method"] == name]
        if not mine:
            continue
        for ax, key in zip(axes, ("mean_error", "sd_error", "ksd")):
            ax.plot([r["seconds"] for r in mine], [r[key] for r in mine], "o-", color=f"C{k}", label=name)
    titles = ("worst |mean − exact| / exact sd", "worst |sd / exact sd − 1|", "KSD (standardised, exact scores)")
    for ax, title in zip(axes, titles):
        ax.set(xscale="log", yscale="log", xlabel="wall time (s, including compilation)", title=title)
    axes[0].legend()
    fig.suptitle(f"Linear regression, condition number {problem['condition']:.1g}: error against time")
    figure = savefig(fig, args.out / "ill_conditioned_error_vs_time.png")

    # -- C. 26 correlated parameters (issue 22) ---------------------------------------------
    print("\n== C. 26 correlated parameters: OSGLD (auto burn-in), tuned SGLD-CV, HAMCMC (default memory) ==")
    case26 = correlated_26(args.quick)
    return {"tune_table": table, "tuned_stepsize": sgld_stepsize, "rows": rows, "figure": figure,
            "condition": problem["condition"], "lambda_max": problem["lambda_max"], "case26": case26}


if __name__ == "__main__":
    main()
