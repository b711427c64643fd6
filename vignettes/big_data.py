"""Data larger than memory: Parquet parts -> ``write_npy`` -> ``open_npy`` -> SGLD-CV on memmaps.

A logistic regression with known coefficients,

    y_i | x_i ~ Bernoulli( sigmoid(beta_0 + x_i . beta) ),    beta_0, beta_j ~ N(0, 10^2),

x_i ~ N(0, I_d) in float32, is generated in Parquet parts (as data often arrive), converted
block by block into a directory of ``.npy`` files with ``sgmcmc.datasets.write_npy`` (X as
one (N, d) entry, y as one (N,) entry), opened with ``sgmcmc.datasets.open_npy`` (memmaps:
nothing is read until it is indexed) and sampled with ``sgmcmc.sgldcv``.

The control variate is anchored at the posterior mode found by Newton's method, streamed over
the memmaps in blocks (one pass per step, about 6 steps), and passed as ``params`` with
``n_iters_opt=0``. The built-in SGD mode search was tried first and is not good enough at this
size: with a constant ``opt_stepsize`` c/lambda its iterate keeps a spread of about c/n per
coordinate whatever N (n the minibatch size), i.e. ~sqrt(N) posterior sds from the mode, and
the control variate's noise grows with that distance. Measured on 5*10^6 rows x 75 features,
minibatch 1,000, opt_stepsize 1/lambda_max: the chain's sds were 3.5-4.0x the posterior's
(1.8-2.2x at 10^6 rows; 0.9-1.1x with a minibatch of 10^4); anchored at the Newton mode,
0.95-1.12x.

Figures:

1. ``big_data_posterior.png``: the posterior means and 90% intervals against the coefficients
   that generated the data, in units of the exact posterior sd (the Laplace approximation at
   the mode: at this N the posterior to within O(1/sqrt(N))).
2. ``big_data_memory.png``: the process's resident memory over the run, anonymous (RssAnon:
   the heap, TensorFlow's tensors) and file-backed (RssFile: memmapped pages, which the kernel
   may drop at any time), sampled every 0.2 s by a thread, with the phases marked.
3. ``big_data_throughput.png``: SGLD-CV iterations per second on the memmapped data against the
   same sampler on an in-memory copy of the first rows (10^7 rows in the full version).

    python vignettes/big_data.py [--quick] [--out DIR] [--data DIR] [--rows N] [--cols D]
                                 [--keep-parquet]

The full version writes 10^8 rows x 75 float32 features (30 GB of Parquet, then 30 GB of
``.npy``; the parts are deleted after the conversion unless ``--keep-parquet``, so 60 GB of
free disk are needed at the peak) to ``--data`` (default ``<out>/data``): more than this
machine's 24 GB of memory. The samplers gather minibatch rows from the memmaps (SPEC §11), so
RssAnon stays at the size of TensorFlow plus the row blocks whatever N (measured with
benchmarks/bench_data_memory.py: +0.23 GB for a 2.2 GB memmap).

The full version was NOT run. Its time is an ESTIMATE, from two runs of ``--rows 5000000``
(1.5 GB, the full version's other settings) on this machine (2 cores shared with other jobs),
scaled by 20: generating the parts 4.2 s -> ~1.5 min; ``write_npy`` 2.6 s (590 MB/s, peak
RssAnon +193 MB) -> ~1-2 min, if the disk takes 30 GB at 0.3 GB/s or more; Newton's mode, 6
passes, 12-20 s -> ~4-7 min (its float64 products, and 180 GB read); sampling 5,000 iterations at the measured 4,500 it/s, but only while the rows sit in
the page cache: at 30 GB they cannot, and each of an iteration's 1,000 random rows is a page
read from disk, ~0.1 ms each on an SSD (an assumption, not measured here) -> ~0.1 s per
iteration, ~8 min, and ~3 min for the 2,000 timed iterations; plus the model checks' NaN scan
and the control variate's full-data gradient, one pass each (~1-2 min). Altogether roughly
20-30 min, most of it random reads and Newton's passes.

``--quick`` (the test suite's version) generates 2*10^5 rows x 10 features in 4 parts, runs
1,000 iterations, and checks the posterior means against the coefficients that generated the
data and against the Laplace mode (``main`` returns the standardised differences).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from _common import parse_args, savefig  # first: selects the Agg backend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.datasets import open_npy, write_npy  # noqa: E402

tfd = tfp.distributions

PRIOR_SD = 10.0
#: Full / quick settings: rows, features, rows per Parquet part, iterations, minibatch rows,
#: rows of the in-memory comparison, timed iterations.
FULL = dict(rows=100_000_000, cols=75, part_rows=1_000_000, n_iters=5_000, minibatch=1_000,
            in_memory_rows=10_000_000, timed_iters=2_000)
QUICK = dict(rows=200_000, cols=10, part_rows=50_000, n_iters=1_000, minibatch=1_000, in_memory_rows=50_000,
             timed_iters=500)


def log_lik(params: dict[str, tf.Tensor], dataset: dict[str, tf.Tensor]) -> tf.Tensor:
    """Sum over the rows it is given of log p(y_i | x_i, beta_0, beta)."""
    logits = params["bias"] + tf.linalg.matvec(dataset["X"], params["beta"])
    return -tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=dataset["y"], logits=logits))


def log_prior(params: dict[str, tf.Tensor]) -> tf.Tensor:
    """beta_0 and each beta_j ~ N(0, PRIOR_SD^2)."""
    normal = tfd.Normal(0.0, PRIOR_SD)
    return normal.log_prob(params["bias"]) + tf.reduce_sum(normal.log_prob(params["beta"]))


# == memory over time ==========================================================================

class MemoryTrace:
    """RssAnon and RssFile of this process (MB) every ``every`` seconds, with phase marks."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.rows, self.phases = every, [], []
        self.start = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read() -> tuple[float, float]:
        fields = {}
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(("RssAnon:", "RssFile:")):
                    key, value, _ = line.split()
                    fields[key[:-1]] = int(value) / 1024
        return fields.get("RssAnon", np.nan), fields.get("RssFile", np.nan)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.rows.append((time.perf_counter() - self.start, *self.read()))
            self._stop.wait(self.every)

    def __enter__(self) -> MemoryTrace:
        if os.path.exists("/proc/self/status"):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def phase(self, name: str) -> None:
        """Mark the start of a phase (and take a sample there)."""
        now = time.perf_counter() - self.start
        if os.path.exists("/proc/self/status"):
            self.rows.append((now, *self.read()))
        self.phases.append((now, name))

    def peak_anon_in(self, name: str) -> float:
        """Peak RssAnon (MB) during phase ``name`` minus RssAnon at its start."""
        ends = [t for t, _ in self.phases[1:]] + [np.inf]
        for (t0, n), t1 in zip(self.phases, ends):
            if n == name:
                inside = [r[1] for r in self.rows if t0 <= r[0] <= t1]
                return float(max(inside) - inside[0]) if inside else float("nan")
        raise KeyError(name)


# == the data ==================================================================================

def generate_parquet(directory: Path, rows: int, cols: int, part_rows: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Write ``rows`` rows (features f0..f{cols-1}, label y) in Parquet parts of ``part_rows``;
    return the generating coefficients [bias, beta...] and the bytes written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    coef = np.r_[0.5, rng.normal(0.0, 2.0 / np.sqrt(cols), cols)]  # logits with sd ~2 whatever d
    directory.mkdir(parents=True, exist_ok=True)
    for part, start in enumerate(range(0, rows, part_rows)):
        n = min(part_rows, rows - start)
        part_rng = np.random.default_rng([seed, part])  # each part reproducible on its own
        xt = part_rng.standard_normal((cols, n), dtype=np.float32)  # one contiguous row per feature
        logits = coef[0] + coef[1:].astype(np.float32) @ xt
        y = (part_rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
        table = pa.table({**{f"f{j}": xt[j] for j in range(cols)}, "y": y})
        # no dictionary encoding: random floats do not repeat (it made the parts 1.5x the data)
        pq.write_table(table, directory / f"part-{part:05d}.parquet", row_group_size=min(n, 250_000),
                       use_dictionary=False)
    return coef, float(sum(p.stat().st_size for p in directory.glob("*.parquet")))


def newton_mode(X: np.ndarray, y: np.ndarray, block_rows: int = 250_000,
                max_steps: int = 15) -> tuple[np.ndarray, np.ndarray, int]:
    """The posterior mode by Newton's method from 0 and the sds of the Laplace approximation
    there, each step one pass over the rows in blocks (float64 sums, bounded memory); also the
    number of passes."""
    theta = np.zeros(X.shape[1] + 1)
    for passes in range(1, max_steps + 1):
        grad = np.r_[0.0, np.zeros(X.shape[1])] - theta / PRIOR_SD**2
        hess = np.eye(len(theta)) / PRIOR_SD**2
        for a in range(0, len(y), block_rows):
            z = np.column_stack([np.ones(min(block_rows, len(y) - a)), X[a : a + block_rows]])
            p = 1.0 / (1.0 + np.exp(-(z @ theta)))
            grad += z.T @ (y[a : a + block_rows] - p)
            hess += (z * (p * (1.0 - p))[:, None]).T @ z
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        sd = np.sqrt(np.diag(np.linalg.inv(hess)))
        if np.max(np.abs(step) / sd) < 1e-4:
            break
    return theta, sd, passes


def curvature_bound(X: np.ndarray, n_rows: int, sample_rows: int = 20_000) -> float:
    """An upper bound on the log-likelihood's largest curvature: p(1 - p) <= 1/4, so
    lambda_max <= N/4 lambda_max(E[z z^T]), z = (1, x), estimated on the first rows."""
    z = np.column_stack([np.ones(min(sample_rows, n_rows)), np.asarray(X[:sample_rows], np.float64)])
    return n_rows / 4 * float(np.linalg.eigvalsh(z.T @ z / len(z))[-1])


def iterations_per_second(dataset: dict, start: dict, stepsize: float, minibatch: int, n_iters: int) -> float:
    """SGLD-CV's rate on ``dataset``: compiled and warmed up first, then ``n_iters`` timed."""
    sampler = sgmcmc.sgldcv_setup(log_lik, dataset, start, stepsize, opt_stepsize=stepsize, log_prior=log_prior,
                                  minibatch_size=minibatch,
                                  n_iters_opt=0, verbose=False, seed=2)
    sgmcmc.init_sess(sampler, verbose=False)  # control variate at the start (no mode search)
    sgmcmc.sample_chain(sampler, 50, verbose=False)  # compiles
    t0 = time.perf_counter()
    sgmcmc.sample_chain(sampler, n_iters, verbose=False)
    return n_iters / (time.perf_counter() - t0)


# == the run ===================================================================================

def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""

    def options(parser) -> None:
        parser.add_argument("--data", type=Path, default=None, help="folder for the data (default <out>/data)")
        parser.add_argument("--rows", type=int, default=None, help="rows to generate (full: 10^8, quick: 2*10^5)")
        parser.add_argument("--cols", type=int, default=None, help="features (full: 75, quick: 10)")
        parser.add_argument("--keep-parquet", action="store_true", help="keep the Parquet parts after the conversion")

    args = parse_args("big_data", __doc__.splitlines()[0], argv, extra=options)
    cfg = dict(QUICK if args.quick else FULL)
    cfg["rows"] = args.rows or cfg["rows"]
    cfg["cols"] = args.cols or cfg["cols"]
    cfg["in_memory_rows"] = min(cfg["in_memory_rows"], cfg["rows"])
    data_dir = args.data or args.out / "data"
    parts, npy_dir = data_dir / "parquet", data_dir / "npy"
    for old in (parts, npy_dir):
        shutil.rmtree(old, ignore_errors=True)
    rows, cols = cfg["rows"], cfg["cols"]
    print(f"{rows:,} rows x {cols} float32 features ({rows * (cols + 1) * 4 / 1e9:.3g} GB) in {data_dir}")
    results: dict = {"config": cfg, "figures": []}

    with MemoryTrace() as trace:
        trace.phase("generate")
        t0 = time.perf_counter()
        coef, parquet_bytes = generate_parquet(parts, rows, cols, cfg["part_rows"])
        results["generate_s"] = time.perf_counter() - t0
        print(f"generated {len(list(parts.glob('*.parquet')))} Parquet parts, {parquet_bytes / 1e6:,.0f} MB, "
              f"in {results['generate_s']:.1f} s")

        trace.phase("write_npy")
        t0 = time.perf_counter()
        columns = {"X": [f"f{j}" for j in range(cols)], "y": "y"}
        write_npy(parts, npy_dir, columns=columns, verbose=not args.quick)
        results["write_s"] = time.perf_counter() - t0
        npy_bytes = sum(p.stat().st_size for p in npy_dir.glob("*.npy"))
        results["write_mb_per_s"] = npy_bytes / 1e6 / results["write_s"]
        print(f"write_npy: {npy_bytes / 1e6:,.0f} MB in {results['write_s']:.1f} s "
              f"({results['write_mb_per_s']:,.0f} MB/s)")
        if not args.keep_parquet:
            shutil.rmtree(parts)

        trace.phase("mode (Newton)")
        dataset = open_npy(npy_dir)  # {"X": memmap (N, d), "y": memmap (N,)}
        t0 = time.perf_counter()
        mode, laplace_sd, passes = newton_mode(dataset["X"], dataset["y"])
        results["newton_s"], results["newton_passes"] = time.perf_counter() - t0, passes
        print(f"posterior mode by Newton's method: {passes} passes over the memmaps in {results['newton_s']:.1f} s")

        trace.phase("sgldcv (memmap)")
        lam = curvature_bound(dataset["X"], rows)
        # Langevin: stepsize x curvature <= 0.5 keeps the sd within 7% (SGLD's (1 - mu/4)^-1/2).
        # The control variate is anchored at the Newton mode (n_iters_opt=0): an SGD search with
        # a constant stepsize ends O(1) away whatever N, i.e. ~sqrt(N) posterior sds, and the
        # control variate's noise grows with that distance (see the docstring).
        stepsize = 0.5 / lam
        params = {"bias": mode[0], "beta": mode[1:]}
        t0 = time.perf_counter()
        chain = sgmcmc.sgldcv(log_lik, dataset, params, stepsize, opt_stepsize=1.0 / lam, log_prior=log_prior,
                              minibatch_size=cfg["minibatch"], n_iters=cfg["n_iters"], n_iters_opt=0,
                              verbose=not args.quick, seed=1)
        results["sgldcv_s"] = time.perf_counter() - t0
        draws = np.column_stack([chain["bias"], chain["beta"]])[cfg["n_iters"] // 5 :]  # the first fifth is burn-in
        mean, sd = draws.mean(0), draws.std(0, ddof=1)
        q05, q95 = np.quantile(draws, [0.05, 0.95], axis=0)
        print(f"sgldcv on the memmaps: {cfg['n_iters']} iterations in {results['sgldcv_s']:.1f} s")

        trace.phase("timing (memmap)")
        start = {"bias": mode[0], "beta": mode[1:]}
        rate_disk = iterations_per_second(dataset, start, stepsize, cfg["minibatch"], cfg["timed_iters"])
        trace.phase("timing (in memory)")
        m = cfg["in_memory_rows"]
        in_memory = {"X": np.array(dataset["X"][:m]), "y": np.array(dataset["y"][:m])}
        rate_ram = iterations_per_second(in_memory, start, stepsize * rows / m, cfg["minibatch"], cfg["timed_iters"])
        del in_memory
        trace.phase("end")

    z_true = (mean - coef) / laplace_sd  # the data's evidence about the truth: ~N(0, 1) each
    z_mode = (mean - mode) / laplace_sd  # the sampler's error: MCSE and SGLD's bias
    results.update(
        mean=mean, sd=sd, q05=q05, q95=q95, true_coef=coef, laplace_mode=mode, laplace_sd=laplace_sd,
        z_true=z_true, z_mode=z_mode, sd_ratio=sd / laplace_sd,
        its_per_s={"memmap": rate_disk, "in_memory": rate_ram},
        data_mb=npy_bytes / 1e6,
        peak_extra_rss_anon_mb={name: trace.peak_anon_in(name) for _, name in trace.phases[:-1]},
    )
    print(f"\nposterior mean - generating coefficient, in posterior sds: max |z| = {np.abs(z_true).max():.2f} "
          f"(exact posterior: ~N(0, 1) each, {cols + 1} coefficients)")
    print(f"posterior mean - Laplace mode, in posterior sds: max |z| = {np.abs(z_mode).max():.2f}; "
          f"sd / Laplace sd: {results['sd_ratio'].min():.2f}-{results['sd_ratio'].max():.2f}")
    print(f"iterations per second: {rate_disk:,.0f} on the memmaps ({rows:,} rows), {rate_ram:,.0f} in memory "
          f"({m:,} rows)")
    for name, mb in results["peak_extra_rss_anon_mb"].items():
        print(f"  peak RssAnon above the start of {name!r}: {mb:,.0f} MB (data: {results['data_mb']:,.0f} MB)")

    # -- figures ---------------------------------------------------------------------------
    names = ["bias"] + [f"beta[{j}]" for j in range(cols)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 2.2]})
    left.plot(coef, mean, "o", ms=4, color="navy")
    lims = [min(coef.min(), mean.min()) - 0.1, max(coef.max(), mean.max()) + 0.1]
    left.plot(lims, lims, color="grey", lw=0.8)
    left.set(xlabel="generating coefficient", ylabel="posterior mean (SGLD-CV)", title=f"N = {rows:,}")
    x = np.arange(cols + 1)
    right.errorbar(x, z_true, yerr=[(mean - q05) / laplace_sd, (q95 - mean) / laplace_sd], fmt="o", ms=3,
                   color="navy", lw=0.8, label="SGLD-CV mean, 90% interval")
    right.plot(x, (mode - coef) / laplace_sd, "x", color="darkorange", label="Laplace mode")
    right.axhline(0, color="grey", lw=0.8)
    right.axhspan(-1.645, 1.645, color="grey", alpha=0.15, label="exact 90% interval around the mode, if truth=mode")
    right.set(xlabel="coefficient", ylabel="(value - generating) / posterior sd",
              title="Posterior against the coefficients that generated the data")
    right.set_xticks(x[:: max(1, len(x) // 20)], [names[i] for i in x[:: max(1, len(x) // 20)]], rotation=60)
    right.legend(fontsize=8, loc="upper right")
    results["figures"].append(savefig(fig, args.out / "big_data_posterior.png"))

    fig, ax = plt.subplots(figsize=(10, 4))
    t = np.array([r[0] for r in trace.rows])
    ax.plot(t, [r[1] for r in trace.rows], color="maroon", label="RssAnon (heap, tensors)")
    ax.plot(t, [r[2] for r in trace.rows], color="teal", label="RssFile (memmapped pages, libraries)")
    ax.axhline(results["data_mb"], color="grey", ls="--", lw=0.8, label="size of the .npy data")
    top = ax.get_ylim()[1]
    for i, ((t0, name), (t1, _)) in enumerate(zip(trace.phases, trace.phases[1:])):
        ax.axvspan(t0, t1, color=f"C{i % 10}", alpha=0.08, lw=0)
        ax.text(t0, top * (0.97 - 0.25 * (i % 2)), f" {name}", fontsize=7, rotation=90, va="top")
    ax.set(xlabel="seconds", ylabel="MB", title="Resident memory of the process")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)
    results["figures"].append(savefig(fig, args.out / "big_data_memory.png"))

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar([f"memmap\n{rows:,} rows", f"in memory\n{m:,} rows"], [rate_disk, rate_ram], color=["teal", "maroon"])
    ax.set(ylabel="iterations per second", title=f"SGLD-CV, minibatch {cfg['minibatch']:,} rows")
    results["figures"].append(savefig(fig, args.out / "big_data_throughput.png"))
    return results


if __name__ == "__main__":
    main()
