"""Worked example: sampling a sparse Dirichlet posterior with SCIR and SGRLD.

The running experiment of Baker (2018, §5.2.3, §5.3.2): categorical data z_1, ..., z_N in
d = 10 categories, N = 1000, with category counts 800, 100, 100 and 0 for the other seven,
and a Dir(0.1) prior, so the posterior is Dir(800.1, 100.1, 100.1, 0.1, ..., 0.1): seven
components live near 0 (posterior mean 1e-4). Writing ω = θ / Σθ with θ_j ~ Gamma(a_j, 1),

- SCIR moves each θ_j by the exact transition of the Cox–Ingersoll–Ross diffusion with the
  minibatch estimate â = α + (N/n)·counts(minibatch) — no discretisation error;
- SGRLD (Patterson & Teh 2013) moves θ by the Euler step of the same diffusion, mirrored at 0.

Two figures: boxplots of a sparse component on the log scale (thesis Fig. 5.2.1), and the
Kolmogorov–Smirnov distance to the exact posterior against the minibatch proportion for the
sparse and a dense posterior (Fig. 5.3.1, the dense counts from thesis Appendix B.5).

d_KS is the thesis' measure (Appendix B.5): the mean KS distance of the Rosenblatt-transformed
samples to the uniform; the full run, like the thesis, takes each method's best stepsize of
Table B.5.1 per seed and proportion (--quick: one fixed stepsize each, one seed, two proportions).

Run ``python vignettes/sparse_dirichlet.py`` (about ten minutes: 900 short runs) or ``--quick``.
"""

from __future__ import annotations

from _common import parse_args, savefig, timed  # first: selects the Agg backend

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from scipy import stats

import sgmcmc

SPARSE_COUNTS = np.array([800, 100, 100, 0, 0, 0, 0, 0, 0, 0])
DENSE_COUNTS = np.array([112, 119, 92, 98, 95, 96, 102, 92, 91, 103])
ALPHA = 0.1
#: The thesis' stepsize grid (Table B.5.1); the full run picks the best per seed and proportion.
GRID = {"scir": [1.0, 5e-1, 1e-1, 5e-2, 1e-2, 5e-3, 1e-3], "sgrld": [5e-1, 1e-1, 5e-2, 1e-2, 5e-3, 1e-3, 5e-4, 1e-4]}
#: Fixed stepsizes for the boxplots (minibatch 10) and for --quick: the best of the grid on a
#: few runs (SCIR's best is larger for minibatch 10, where the sparse â_j are exactly α).
BOX_STEPSIZE = {"scir": 0.5, "sgrld": 0.005}
QUICK_STEPSIZE = {"sparse": {"scir": 0.1, "sgrld": 0.01}, "dense": {"scir": 0.05, "sgrld": 0.01}}


# --- The sampler: sgmcmc.scir / sgmcmc.sgrld with the categorical model's counts.


def category_counts(params, minibatch, seed):
    """The minibatch's category counts Σ_{i∈S} z_i (one-hot rows summed), shaped like ω."""
    omega = params["omega"]
    return {"omega": tf.reduce_sum(tf.one_hot(minibatch["z"], omega.shape[-1], dtype=omega.dtype), axis=0)}


def run_sampler(method: str, counts, alpha: float, h: float, minibatch, n_iters: int, seed: int,
                n_chains: int = 1, burn_in: int = 0) -> np.ndarray:
    """ω after each kept iteration, shape (n_chains, n_iters − burn_in, d), of SCIR or SGRLD on a categorical data set with these category counts;
    ``minibatch`` is a count of rows, or a proportion if below 1. Starts from ω₀ uniform
    (the samplers set θ₀ = ω₀ Σ â). float64, so the sparse components are right far below 1e-38."""
    counts = np.asarray(counts)
    labels = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
    sampler = sgmcmc.scir if method == "scir" else sgmcmc.sgrld
    out = sampler(
        category_counts, {"z": labels}, {"omega": np.full(len(counts), 1.0 / len(counts))}, h, alpha,
        minibatch_size=minibatch, n_iters=n_iters, verbose=False, seed=seed, dtype=tf.float64,
        n_chains=n_chains, burn_in=burn_in,
    )
    return out["omega"].reshape(n_chains, n_iters - burn_in, len(counts))


def rosenblatt_ks(omega: np.ndarray, a_post: np.ndarray) -> float:
    """The thesis' d_KS (Appendix B.5): the mean over k of the KS distance between the
    Rosenblatt-transformed samples and the uniform. For a Dirichlet, ω_k/(1 − Σ_{j<k} ω_j)
    given ω_1..ω_{k−1} is Beta(a_k, Σ_{j>k} a_j)."""
    rest = 1.0 - np.cumsum(omega, axis=1) + omega
    dist = []
    for k in range(len(a_post) - 1):
        u = stats.beta.cdf(np.clip(omega[:, k] / rest[:, k], 0, 1), a_post[k], a_post[k + 1 :].sum())
        dist.append(stats.kstest(u, "uniform").statistic)
    return float(np.mean(dist))


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""
    args = parse_args("sparse_dirichlet", __doc__.splitlines()[0], argv)
    burn_in, kept = (500, 500) if args.quick else (1000, 1000)
    props = [0.01, 0.1] if args.quick else [0.001, 0.005, 0.01, 0.05, 0.1, 0.5]
    seeds = [1] if args.quick else [1, 2, 3, 4, 5]
    a_sparse = SPARSE_COUNTS + ALPHA
    rng = np.random.default_rng(2018)

    # Fig 5.2.1: the fifth component, minibatch 10
    j = 4
    with timed("boxplot runs"):
        samples = {m: run_sampler(m, SPARSE_COUNTS, ALPHA, h, 10, burn_in + kept, 0, burn_in=burn_in)[0, :, j] for m, h in BOX_STEPSIZE.items()}
    samples["exact"] = rng.dirichlet(a_sparse, size=kept)[:, j]
    logs = {m: np.log10(np.maximum(s, 1e-300)) for m, s in samples.items()}
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.boxplot([logs[m] for m in ("scir", "sgrld", "exact")], tick_labels=["SCIR", "SGRLD", "exact"])
    ax.set(ylabel=r"$\log_{10}\,\omega_5$", title="Sparse Dirichlet posterior, minibatch 10")
    figures = [savefig(fig, args.out / "sparse_dirichlet_boxplot.png")]
    medians = {m: float(np.median(s)) for m, s in samples.items()}
    print("median of omega_5:", {m: f"{v:.2e}" for m, v in medians.items()})

    # Fig 5.3.1: d_KS against the minibatch proportion, sparse and dense
    ks = {}
    with timed("KS runs"):
        for name, counts in (("sparse", SPARSE_COUNTS), ("dense", DENSE_COUNTS)):
            for m in GRID:
                grid = [QUICK_STEPSIZE[name][m]] if args.quick else GRID[m]
                # the seeds are independent chains of one run (n_chains); per seed the best stepsize
                per_h = np.array([
                    [[rosenblatt_ks(chain, counts + ALPHA) for chain in
                      run_sampler(m, counts, ALPHA, h, p, burn_in + kept, 100 * i, n_chains=len(seeds), burn_in=burn_in)]
                     for h in grid]
                    for i, p in enumerate(props)
                ])  # (props, stepsizes, seeds)
                ks[name, m] = per_h.min(axis=1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, name in zip(axes, ("sparse", "dense")):
        for m, colour in (("scir", "C0"), ("sgrld", "C1")):  # one line per seed
            for s in range(len(seeds)):
                ax.plot(props, ks[name, m][:, s], "o-", color=colour, alpha=0.6, label=m.upper() if s == 0 else None)
        ax.set(xscale="log", xlabel="minibatch proportion", title=f"{name} posterior")
    axes[0].set_ylabel(r"$d_{KS}$")
    axes[0].legend()
    figures.append(savefig(fig, args.out / "sparse_dirichlet_ks.png"))
    for key, v in ks.items():
        print(f"d_KS {key[0]:6s} {key[1]:5s}", np.round(v.mean(1), 3))

    return {"medians": medians, "props": props, "ks": {f"{a}_{b}": v for (a, b), v in ks.items()}, "figures": figures}


if __name__ == "__main__":
    main()
