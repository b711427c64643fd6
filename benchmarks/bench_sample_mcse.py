"""Is ``sgmcmc.sample``'s MCSE honest? Coverage of the exact posterior mean (issue 43, "MCSE honest").

Two conjugate models with an exact Gaussian posterior; for every seed s the data are drawn anew
(numpy seed s) and ``sgmcmc.sample(..., seed=s, verbose=False)`` runs with everything else at its
default. Per element: is the exact posterior mean within +-2 reported ``mcse_mean`` of the
reported mean? (An honest MCSE covers it in ~95.4 % of runs; the target is 90-99 %.) Also the
distribution of |mean - exact| / mcse_mean, of reported sd / exact sd, and the report's iterations,
effective draws (worst bulk ESS) and seconds.

Models (prior N(0, 10^2) on every element, N = 4,000 rows):
  gauss    3-d Gaussian mean, y_i ~ N(mu, diag(s^2)), known s = (0.5, 1, 2), mu_true = (1, -2, 0.5)
  linreg   y_i ~ N(x_i . beta, 1) (sigma known), 4 columns on scales (1, 10, 0.1, 100), the
           second correlated with the first (rho 0.6), beta_true = (1, -0.3, 5, 0.02)

Usage: python benchmarks/bench_sample_mcse.py [--seeds N] [--quick] [--models gauss,linreg] [--json out.json]
  --quick: 5 seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402

N = 4_000
PRIOR_SD = 10.0


def gauss_problem(seed: int):
    rng = np.random.default_rng(seed)
    s = np.array([0.5, 1.0, 2.0])
    mu_true = np.array([1.0, -2.0, 0.5])
    y = mu_true + s * rng.standard_normal((N, 3))
    prec = 1.0 / PRIOR_SD**2 + N / s**2
    mean = (y.sum(0) / s**2) / prec
    sd = 1.0 / np.sqrt(prec)
    s_tf = tf.constant(s, tf.float32)

    def log_lik(p, data):
        z = (data["y"] - p["mu"]) / s_tf
        return -0.5 * tf.reduce_sum(z * z)

    def log_prior(p):
        return -0.5 * tf.reduce_sum(tf.square(p["mu"] / PRIOR_SD))

    names = [f"mu[{i}]" for i in range(3)]
    return log_lik, log_prior, {"y": y.astype(np.float32)}, {"mu": np.zeros(3, np.float32)}, "mu", names, mean, sd


def linreg_problem(seed: int):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((N, 4))
    z[:, 1] = 0.6 * z[:, 0] + 0.8 * z[:, 1]
    X = z * np.array([1.0, 10.0, 0.1, 100.0])
    beta_true = np.array([1.0, -0.3, 5.0, 0.02])
    y = X @ beta_true + rng.standard_normal(N)
    prec = X.T @ X + np.eye(4) / PRIOR_SD**2
    cov = np.linalg.inv(prec)
    mean = cov @ (X.T @ y)
    sd = np.sqrt(np.diag(cov))

    def log_lik(p, data):
        r = data["y"] - tf.linalg.matvec(data["X"], p["beta"])
        return -0.5 * tf.reduce_sum(r * r)

    def log_prior(p):
        return -0.5 * tf.reduce_sum(tf.square(p["beta"] / PRIOR_SD))

    names = [f"beta[{i}]" for i in range(4)]
    data = {"X": X.astype(np.float32), "y": y.astype(np.float32)}
    return log_lik, log_prior, data, {"beta": np.zeros(4, np.float32)}, "beta", names, mean, sd, np.linalg.cond(prec)


def run_one(model: str, seed: int) -> dict:
    if model == "gauss":
        log_lik, log_prior, data, start, pname, names, mean, sd = gauss_problem(seed)
        kappa_exact = float((PRIOR_SD**-2 + N / 0.25) / (PRIOR_SD**-2 + N / 4.0))
    else:
        log_lik, log_prior, data, start, pname, names, mean, sd, kappa_exact = linreg_problem(seed)
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sgmcmc.sample(log_lik, data, start, log_prior, seed=seed, verbose=False)
    seconds = time.perf_counter() - t
    table = out.summary()
    rep = out.report
    rows = []
    for i, name in enumerate(names):
        # the summary's index names elements; match by position within the parameter
        r = table.iloc[i]
        err = float(r["mean"]) - mean[i]
        rows.append({
            "element": name, "index": str(table.index[i]), "mean": float(r["mean"]), "exact_mean": float(mean[i]),
            "mcse_mean": float(r["mcse_mean"]), "z": err / float(r["mcse_mean"]),
            "covered": bool(abs(err) <= 2 * float(r["mcse_mean"])), "sd_ratio": float(r["sd"]) / float(sd[i]),
            "ess_bulk": float(r["ess_bulk"]), "ess_tail": float(r["ess_tail"]), "r_hat": float(r["r_hat"]),
        })
    return {
        "model": model, "seed": seed, "rows": rows, "seconds": seconds, "iterations": rep.iterations,
        "burn_in": rep.burn_in, "thin": rep.thin, "adaptations": rep.adaptations, "converged": rep.converged,
        "stopped_by": rep.stopped_by, "worst_ess": rep.worst_ess, "worst_rhat": rep.worst_rhat,
        "stepsize": rep.stepsize, "kappa": rep.condition_number, "kappa_exact": kappa_exact,
        "report_seconds": rep.seconds, "warnings": [f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught],
    }


def table(results: list[dict]) -> str:
    lines = []
    models = sorted({r["model"] for r in results}, key=["gauss", "linreg"].index)
    lines.append("| model | element | runs | covered ±2 MCSE | median |z| | max |z| | sd/exact sd: min · median · max | median ESS bulk |")
    lines.append("|---|---|---|---|---|---|---|---|")
    all_cov = []
    for m in models:
        rs = [r for r in results if r["model"] == m]
        names = [row["element"] for row in rs[0]["rows"]]
        m_cov = []
        for i, name in enumerate(names):
            rows = [r["rows"][i] for r in rs]
            cov = [row["covered"] for row in rows]
            m_cov += cov
            z = np.abs([row["z"] for row in rows])
            sr = np.array([row["sd_ratio"] for row in rows])
            lines.append(f"| {m} | {name} | {len(rows)} | {sum(cov)}/{len(cov)} ({100 * np.mean(cov):.0f} %) | "
                         f"{np.median(z):.2f} | {z.max():.2f} | {sr.min():.3f} · {np.median(sr):.3f} · {sr.max():.3f} | "
                         f"{np.median([row['ess_bulk'] for row in rows]):.0f} |")
        all_cov += m_cov
        lines.append(f"| {m} | **all** | {len(rs)} runs | **{sum(m_cov)}/{len(m_cov)} ({100 * np.mean(m_cov):.1f} %)** | | | | |")
    lines.append(f"| **both** | **all** | {len(results)} runs | **{sum(all_cov)}/{len(all_cov)} ({100 * np.mean(all_cov):.1f} %)** | | | | |")
    lines.append("")
    lines.append("| model | runs | converged | iterations/chain: min · median · max | worst bulk ESS median | "
                 "κ reported (exact) | stepsize median | adaptations | seconds: median · max |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for m in models:
        rs = [r for r in results if r["model"] == m]
        it = np.array([r["iterations"] for r in rs])
        sec = np.array([r["seconds"] for r in rs])
        lines.append(
            f"| {m} | {len(rs)} | {sum(r['converged'] for r in rs)}/{len(rs)} | {it.min():,} · {int(np.median(it)):,} · "
            f"{it.max():,} | {np.median([r['worst_ess'] for r in rs]):.0f} | {np.median([r['kappa'] for r in rs]):.3g} "
            f"({np.median([r['kappa_exact'] for r in rs]):.3g}) | {np.median([r['stepsize'] for r in rs]):.3g} | "
            f"{sum(r['adaptations'] for r in rs)} total | {np.median(sec):.1f} · {sec.max():.1f} |")
    warned = [(r["model"], r["seed"], w) for r in results for w in r["warnings"]]
    if warned:
        lines.append("")
        lines.append("Warnings: " + "; ".join(f"{m} seed {s}: {w}" for m, s, w in warned[:10]))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="5 seeds")
    ap.add_argument("--models", default="gauss,linreg")
    ap.add_argument("--json", default=None, help="write every run's figures here (appended run by run)")
    args = ap.parse_args()
    n_seeds = 5 if args.quick else args.seeds
    results = []
    for model in args.models.split(","):
        for seed in range(1, n_seeds + 1):
            r = run_one(model, seed)
            results.append(r)
            print(f"{model} seed {seed}: {r['iterations']:,} it/chain, worst ESS {r['worst_ess']:.0f}, "
                  f"R-hat {r['worst_rhat']:.4f}, {r['seconds']:.1f} s, covered "
                  f"{sum(x['covered'] for x in r['rows'])}/{len(r['rows'])}, z "
                  f"{', '.join(format(x['z'], '+.2f') for x in r['rows'])}, sd ratio "
                  f"{', '.join(format(x['sd_ratio'], '.3f') for x in r['rows'])}", flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f, default=float)
    print()
    print(table(results))


if __name__ == "__main__":
    main()
