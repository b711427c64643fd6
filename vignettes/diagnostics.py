"""Judging and improving SG-MCMC output: chains, R-hat and ESS, KSD, ZV control variates and
Stein thinning, on the covertype logistic regression.

Four chains of SGLD and four of SGLD-CV run from dispersed starts (one compiled loop each), with
their gradient estimates stored. Then:

1. trace plots of a few coefficients, four chains each;
2. ``sgmcmc.summary``: R-hat and bulk ESS of every coefficient (Vehtari et al. 2021: trust a
   component only with R-hat < 1.01 and bulk ESS >= 400);
3. ``sgmcmc.ksd`` of each sampler, on a thinned subset with EXACT scores from
   ``sgmcmc.full_gradients``: ESS and R-hat cannot see the bias of an SG sampler (South 2021),
   the KSD can, but only with exact scores: with the stored minibatch estimates it also measures
   their noise, which would make the noisier sampler look worse for the wrong reason. Exact
   scores cost N gradient evaluations per sample, hence the thinned subset;
4. ``sgmcmc.zv``: zero-variance control variates with the stored gradients (thesis §3.4): a large
   variance reduction with SGLD-CV's accurate gradients, little with SGLD's noisy ones;
5. ``sgmcmc.stein_thin``: 100 points chosen to minimise the KSD against 100 equally spaced ones.

    python vignettes/diagnostics.py [--quick] [--out DIR]

``--quick`` runs on 20,000 generated covertype-shaped rows with the stepsizes scaled up by
571,012 / 20,000 (as ``logistic_regression.py --quick`` does); the full version needs the real
data (exit status 2 if it cannot be had). ``--generated``: the full version's settings on 571,012
generated covertype-shaped rows (``sgmcmc.datasets.synthetic_covertype``), for a machine without
the data; its numbers describe that generated posterior, not covertype's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow as tf

from _common import load_dataset_or_exit, parse_args, savefig, timed

import matplotlib.pyplot as plt  # noqa: E402  (the backend is set in _common)

import sgmcmc  # noqa: E402
from sgmcmc.datasets import synthetic_covertype  # noqa: E402

N_FULL = 581_012 - 10_000
#: Vehtari et al. (2021): R-hat < 1.01 and bulk ESS >= 400 (four chains).
RHAT_MAX, ESS_MIN = 1.01, 400
#: Thesis §4.6.2 stepsizes.
STEPSIZES = {"sgld": 5e-6, "sgldcv": 1e-5}
TRACED = ["bias", "beta[0]", "beta[5]", "beta[20]"]


def log_lik(params, dataset):
    logits = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=dataset["y"], logits=logits))


def log_prior(params):
    # Laplace(0, 1) on every coefficient, up to a constant.
    return -tf.reduce_sum(tf.abs(params["beta"])) - tf.abs(params["bias"])


def component(samples: sgmcmc.Samples, name: str) -> np.ndarray:
    """``(n_chains, n_kept)`` draws of one scalar component named like the summary's rows."""
    if "[" not in name:
        return samples.by_chain()[name]
    base, index = name[:-1].split("[")
    return samples.by_chain()[base][..., int(index)]


def equally_spaced(samples: sgmcmc.Samples, per_chain: int) -> sgmcmc.Samples:
    """``per_chain`` equally spaced draws of every chain, still ``(n_chains, per_chain, ...)``."""
    idx = np.linspace(0, samples.n_kept - 1, per_chain).round().astype(int)
    grads = None if samples.gradients is None else {k: v[:, idx] for k, v in samples.by_chain("gradients").items()}
    return sgmcmc.Samples({k: v[:, idx] for k, v in samples.by_chain().items()}, n_chains=samples.n_chains,
                          gradients=grads, method=samples.method)


def pooled_subset(samples: sgmcmc.Samples, gradients: dict, rows: np.ndarray) -> sgmcmc.Samples:
    """Rows of the pooled draws as one chain, with the given (pooled-layout) gradients."""
    pooled = samples.pooled()
    grads = {k: v.reshape((-1,) + v.shape[2:]) for k, v in gradients.items()}
    return sgmcmc.Samples({k: v[rows] for k, v in pooled.items()}, gradients={k: v[rows] for k, v in grads.items()})


def main(argv: list[str] | None = None) -> dict:
    def options(parser):
        parser.add_argument("--chains", type=int, default=4)
        parser.add_argument("--generated", action="store_true",
                            help="the full settings on 571,012 generated covertype-shaped rows")

    args = parse_args("diagnostics", __doc__.splitlines()[0], argv, extra=options)
    if args.quick:
        data = synthetic_covertype(n_rows=20_000, seed=2)
        n_iters, burn_in, n_opt, per_chain = 1_500, 200, 1_000, 100
    else:
        data = synthetic_covertype(n_rows=N_FULL, seed=2) if args.generated else load_dataset_or_exit("covertype")
        n_iters, burn_in, n_opt, per_chain = 11_000, 1_000, 10_000, 250
    dataset = {"X": data[:, 1:], "y": data[:, 0]}
    n_rows, d = dataset["X"].shape
    scale = N_FULL / n_rows if args.quick else 1.0
    k = args.chains
    print(f"{n_rows:,} rows, {d} features; {k} chains x {n_iters:,} iterations ({burn_in:,} burn-in) per sampler")

    # Dispersed starts: wider than the posterior, so chains that have not forgotten them disagree.
    rng = np.random.default_rng(0)
    starts = [{"bias": float(rng.normal()), "beta": rng.normal(size=d)} for _ in range(k)]
    runs: dict[str, sgmcmc.Samples] = {}
    for method, stepsize in STEPSIZES.items():
        kw = dict(log_prior=log_prior, minibatch_size=500, n_iters=n_iters, verbose=False, seed=1,
                  n_chains=k, burn_in=burn_in, store_gradients=True)
        if method.endswith("cv"):
            kw.update(opt_stepsize=1e-6 * scale, n_iters_opt=n_opt)
        with timed(method):
            runs[method] = getattr(sgmcmc, method)(log_lik, dataset, starts, stepsize * scale, **kw)
    results: dict = {"methods": {}}

    # 1. Trace plots: four chains of a few coefficients, per sampler.
    fig, axes = plt.subplots(len(runs), len(TRACED), figsize=(3.6 * len(TRACED), 2.6 * len(runs)), sharex=True)
    iters = burn_in + np.arange(1, n_iters - burn_in + 1)
    for row, (method, out) in enumerate(runs.items()):
        for col, name in enumerate(TRACED):
            ax = axes[row, col]
            for c, chain in enumerate(component(out, name)):
                ax.plot(iters, chain, lw=0.5, label=f"chain {c + 1}")
            ax.set_title(f"{method}: {name}", fontsize=9)
        axes[row, 0].set_ylabel("value")
    for ax in axes[-1]:
        ax.set_xlabel("iteration")
    axes[0, 0].legend(fontsize=6)
    fig.suptitle("Trace plots after burn-in: chains that agree overlap; chains that do not, separate")
    fig.tight_layout()
    results["figures"] = [savefig(fig, args.out / "diagnostics_traces.png")]

    # 2. Summary: R-hat and ESS of every coefficient.
    print(f"\n== sgmcmc.summary (Vehtari et al. 2021: R-hat < {RHAT_MAX}, bulk ESS >= {ESS_MIN}) ==")
    overview = {}
    for method, out in runs.items():
        table = sgmcmc.summary(out)
        bad = (table["r_hat"] > RHAT_MAX) | (table["ess_bulk"] < ESS_MIN)
        results["methods"][method] = {"summary": table, "not_mixed": list(table.index[bad])}
        overview[method] = {"max R-hat": table["r_hat"].max(), "median R-hat": table["r_hat"].median(),
                            "min bulk ESS": table["ess_bulk"].min(), "median bulk ESS": table["ess_bulk"].median(),
                            "not mixed": f"{int(bad.sum())} of {len(table)}"}
        with pd.option_context("display.max_columns", None, "display.width", 120, "display.float_format", "{:.4g}".format):
            print(f"\n{method}, the traced components:")
            print(table.loc[TRACED])
    overview = pd.DataFrame(overview).T
    print("\n", overview.to_string(float_format=lambda v: f"{v:.3g}"), sep="")

    # 3. KSD with exact scores, on a thinned subset (per_chain equally spaced draws per chain).
    print(f"\n== KSD on {per_chain} equally spaced draws per chain, exact scores (sgmcmc.full_gradients) ==")
    thinned, exact = {}, {}
    for method, out in runs.items():
        thinned[method] = equally_spaced(out, per_chain)
        with timed(f"full_gradients, {method}"):
            exact[method] = sgmcmc.full_gradients(log_lik, dataset, thinned[method], log_prior)
        res = results["methods"][method]
        res["ksd"] = sgmcmc.ksd(thinned[method], gradients=exact[method])
        res["ksd_stored"] = sgmcmc.ksd(thinned[method])  # the minibatch estimates as scores
        print(f"{method:7s} KSD {res['ksd']:10.4g}   (with the stored gradient estimates instead: {res['ksd_stored']:.4g})")

    # 4. ZV control variates with the stored gradients (all kept draws, chains pooled).
    print("\n== ZV control variates (order 1) with the stored gradients ==")
    for method, out in runs.items():
        table = sgmcmc.zv(out)
        res = results["methods"][method]
        res["zv"] = table
        res["zv_median_reduction"] = float(table["variance_reduction"].median())
        print(f"{method:7s} variance reduction: median {res['zv_median_reduction']:.3g}, "
              f"range {table['variance_reduction'].min():.3g}–{table['variance_reduction'].max():.3g}")
        print(table.loc[TRACED].to_string(float_format=lambda v: f"{v:.4g}"))

    # 5. Stein thinning: 100 of SGLD-CV's thinned draws, against 100 equally spaced.
    pool = thinned["sgldcv"]
    m = 100
    pool_rows = pool.n_chains * pool.n_kept
    pool_all = pooled_subset(pool, exact["sgldcv"], np.arange(pool_rows))
    with timed("stein_thin"):
        stein = sgmcmc.stein_thin(pool_all, m)
    spaced = pooled_subset(pool, exact["sgldcv"], np.linspace(0, pool_rows - 1, m).round().astype(int))
    results["stein"] = {"ksd_stein": sgmcmc.ksd(stein), "ksd_equally_spaced": sgmcmc.ksd(spaced),
                        "ksd_pool": results["methods"]["sgldcv"]["ksd"]}
    print(f"\n== Stein thinning of SGLD-CV's {pool_rows} thinned draws to {m} ==")
    print(f"KSD: Stein-thinned {results['stein']['ksd_stein']:.4g}, equally spaced {results['stein']['ksd_equally_spaced']:.4g}, "
          f"all {pool_rows}: {results['stein']['ksd_pool']:.4g}")

    # Figure: what the numbers say, side by side.
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, (method, res) in enumerate(results["methods"].items()):
        t = res["summary"]
        ax1.scatter(t["ess_bulk"], t["r_hat"], s=12, color=f"C{i}", label=method)
    ax1.axhline(RHAT_MAX, color="grey", ls="--", lw=0.8)
    ax1.axvline(ESS_MIN, color="grey", ls="--", lw=0.8)
    ax1.set(xscale="log", xlabel="bulk ESS (log scale)", ylabel="R-hat",
            title=f"every coefficient (trust: below {RHAT_MAX}, right of {ESS_MIN})")
    ax1.legend(fontsize=8)
    labels = ["SGLD", "SGLD-CV", f"SGLD-CV\nStein {m}", f"SGLD-CV\nspaced {m}"]
    values = [results["methods"]["sgld"]["ksd"], results["methods"]["sgldcv"]["ksd"],
              results["stein"]["ksd_stein"], results["stein"]["ksd_equally_spaced"]]
    ax2.bar(labels, values, color=["C0", "C1", "C2", "C7"])
    ax2.set(ylabel="KSD (exact scores; smaller is closer)", title="kernel Stein discrepancy", yscale="log")
    for i, (method, res) in enumerate(results["methods"].items()):
        vr = res["zv"]["variance_reduction"].to_numpy()
        ax3.plot(np.arange(len(vr)), vr, "o", ms=3, color=f"C{i}", label=method)
    ax3.set(yscale="log", xlabel="component (0 = bias)", ylabel="variance reduction",
            title="ZV control variates with the stored gradients")
    ax3.axhline(1, color="grey", lw=0.8)
    ax3.legend(fontsize=8)
    fig.tight_layout()
    results["figures"].append(savefig(fig, args.out / "diagnostics_summary.png"))

    # Stein-thinned against equally spaced points, two coefficients.
    fig, ax = plt.subplots(figsize=(5, 4.2))
    a, b = pool_all["beta"][:, 0], pool_all["beta"][:, 5]
    ax.scatter(a, b, s=4, color="0.75", label=f"SGLD-CV, {pool_rows} thinned draws")
    ax.scatter(spaced["beta"][:, 0], spaced["beta"][:, 5], s=14, marker="x", color="C7", label=f"{m} equally spaced")
    ax.scatter(stein["beta"][:, 0], stein["beta"][:, 5], s=14, color="C2", label=f"{m} Stein-thinned")
    ax.set(xlabel="beta[0]", ylabel="beta[5]", title="Stein thinning picks points that cover the posterior")
    ax.legend(fontsize=7)
    results["figures"].append(savefig(fig, args.out / "diagnostics_stein_thinning.png"))
    return results


if __name__ == "__main__":
    main()
