"""Data larger than memory: Parquet parts -> ``write_npy`` -> ``open_npy`` -> SGLD-CV on memmaps.

A logistic regression with known coefficients,

    y_i | x_i ~ Bernoulli( sigmoid(beta_0 + x_i . beta) ),    beta_0, beta_j ~ N(0, 10^2),

x_i ~ N(0, I_d) in float32, is generated in Parquet parts (as data often arrive), converted
block by block into a directory of ``.npy`` files with ``sgmcmc.datasets.write_npy`` (X as
one (N, d) entry, y as one (N,) entry), opened with ``sgmcmc.datasets.open_npy`` (memmaps:
nothing is read until it is indexed) and sampled with ``sgmcmc.sgldcv``.

The control variate is anchored at the posterior mode found by Newton's method, streamed over
the memmaps in blocks (one pass per step, about 7 steps; the gradient over all rows, the
Hessian over the first 2*10^6 rows scaled to N: full float64 Hessians took ~15 min a pass at
10^8 rows on this loaded machine), and passed as ``params`` with ``n_iters_opt=0``. The built-in SGD mode search was tried first and is not good enough at this
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
3. ``big_data_throughput.png``: microseconds per SGLD-CV iteration on the memmapped data (with
   ``MADV_RANDOM`` and with the kernel's default advice) and on an in-memory copy of the first
   rows (10^7 in the full version), each with its floor: the major page faults and bytes read
   per iteration (/proc/self/stat, /proc/self/io) priced at the disk's rates measured in the
   same run, right after ``write_npy`` (random 4 KiB ``os.pread`` at queue depth 1 on X.npy
   evicted from the page cache, and a sequential read).

    python vignettes/big_data.py [--quick] [--out DIR] [--data DIR] [--rows N] [--cols D]
                                 [--keep-parquet] [--reuse-data]

The full version writes 10^8 rows x 75 float32 features (30 GB of Parquet, then 30 GB of
``.npy``; the parts are deleted after the conversion unless ``--keep-parquet``, so 60 GB of
free disk are needed at the peak, checked before starting) to ``--data`` (default
``<out>/data``): more than this machine's 23 GB of memory. The samplers gather minibatch rows
from the memmaps (SPEC §11), so RssAnon stays at the size of TensorFlow plus the row blocks
whatever N. ``--reuse-data`` skips generating and converting when an earlier run left the
``.npy`` files.

Two things the full version does that a small one does not need:

* Random rows want ``madvise(MADV_RANDOM)`` on the memmap, which sgmcmc gives every memmapped
  entry (``sgmcmc.data.rows.advise``; streamed blocks are read advised sequential). Under the
  kernel's default a page fault reads around its page, up to the device's readahead window
  (``read_ahead_kb`` = 8192 on this machine's virtio disk): measured below by advising the
  mapping back to ``MADV_NORMAL`` for a few timed iterations, 3 GB read and 6 s per iteration
  instead of 2 MB and 64 ms. (This run gave the advice itself, through numpy's private
  ``memmap._mmap``, before sgmcmc did; the library's advice was added after it.)
* sgmcmc's stepsize check in ``init_sess`` ran, in that run, as power iteration on full-data
  Hessian-vector products (up to 80 passes over all rows, ~1 min each at 30 GB: still running
  after 6 min) and was skipped through a private name. Since issue 29 it runs on a row subsample
  (Lanczos, :mod:`sgmcmc.stability.check`) and this vignette runs it.

The full version, run on 2026-11-25 on this machine (2 cores, 23 GB, no swap, ~78 GB free
disk; load average 6-9 throughout: two other agents' test suites): 25 min from the disk
measurement to the figures, plus 9 min for the data (from an earlier run of the same code
killed in Newton's phase, whose full-Hessian passes were too slow; the final run used
``--reuse-data``), so ~34 min from nothing. Phases:

* generating 100 Parquet parts (30.1 GB): 364 s; ``write_npy`` to 30.4 GB of ``.npy``: 159 s
  (191 MB/s, peak disk use 60 GB);
* the disk (three runs that day): random 4 KiB reads at queue depth 1 median 80-111 us, mean
  94-128 us (7,800-10,600 reads/s; 4,096 bytes fetched per read, so none was cached);
  sequential 1,300-1,430 MB/s. The final run's: median 80 us, mean 94 us, 1,433 MB/s;
* Newton's mode: 7 passes, 770 s (568 s in the earlier run with this method);
* SGLD-CV set-up (the model checks' NaN scan and the full-data gradient, 3 passes): 133 s;
  5,000 iterations: 301 s (60 ms/it, 431 major faults and 1,731 KiB read per iteration);
* timed: 2,000 more iterations with ``MADV_RANDOM`` 128 s; 20 with the default advice 123 s;
  the rest (the disk measurement, and the in-memory run with its 3 GB copy of 10^7 rows and
  its set-up): ~20 s.

Per iteration (1,000 random rows of 300 bytes each): with ``MADV_RANDOM`` 63.8 ms, 500 major
faults, 2,001 KiB read: one 4 KiB page per fault, half the rows missing the page cache, which
held 54% of X.npy before (61% at most: MemAvailable / 30 GB). The floor, 500 x 94 us = 47.2 ms:
measured 1.35x the floor, 128 us per fault against 94 us per ``pread``. The rest is not measured
separately; likely the page cache being full (each fault evicts a page, and RssFile falls as
mapped pages are reclaimed: figure 2) and, at load 7 on 2 cores, the gathering thread waiting
for a core after each read; the sampler's own compute (0.57 ms/it in memory) overlaps the
gathering. With the default advice: 6.13 s per iteration, 554 faults and 2.96 GB read (5.5 MB
per fault, the read-around), floor 2.2 s by the same prices. In memory: 0.57 ms per iteration,
110x faster than the memmap with ``MADV_RANDOM``.

Posterior: max |posterior mean - generating coefficient| = 2.57 posterior sds over 76
coefficients (for ~N(0, 1) each, the median maximum is 2.6); max |mean - Laplace mode| = 0.18
sds; sd / Laplace sd 0.97-1.09. RssAnon peaked at 3.56 GB, in the in-memory phase (the 3 GB
copy); during the memmap phases it stayed under 1 GB (+298 MB over its start in Newton's
phase, +246 MB in SGLD-CV's, +43 MB in the timed memmap runs) while RssFile rose to ~20 GB.

``--quick`` (the test suite's version) generates 2*10^5 rows x 10 features in 4 parts, runs
1,000 iterations, and checks the posterior means against the coefficients that generated the
data and against the Laplace mode (``main`` returns the standardised differences).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import parse_args, savefig  # first: selects the Agg backend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import sgmcmc  # noqa: E402
from sgmcmc.data.rows import advise  # noqa: E402
from sgmcmc.datasets import open_npy, write_npy  # noqa: E402

tfd = tfp.distributions

PRIOR_SD = 10.0
#: Full / quick settings: rows, features, rows per Parquet part, iterations, minibatch rows,
#: rows of the in-memory comparison, timed iterations.
#: Also: random page reads and sequential bytes of the disk measurement, and the most seconds
#: the memmap is timed with the kernel's default advice.
FULL = dict(rows=100_000_000, cols=75, part_rows=1_000_000, n_iters=5_000, minibatch=1_000,
            in_memory_rows=10_000_000, timed_iters=2_000, disk_reads=4_000, disk_seq_bytes=512 * 2**20,
            default_advice_s=90.0)
QUICK = dict(rows=200_000, cols=10, part_rows=50_000, n_iters=1_000, minibatch=1_000, in_memory_rows=50_000,
             timed_iters=500, disk_reads=500, disk_seq_bytes=8 * 2**20, default_advice_s=3.0)


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


# == reads from storage =======================================================================

PAGE = mmap.PAGESIZE


def io_counters() -> tuple[float, float]:
    """(bytes this process has caused to be fetched from storage, major page faults) so far,
    all threads: ``read_bytes`` of /proc/self/io and field 12 (majflt) of /proc/self/stat.
    NaN where /proc does not have them."""
    try:
        with open("/proc/self/io") as io:
            read_bytes = next(int(line.split()[1]) for line in io if line.startswith("read_bytes:"))
        with open("/proc/self/stat") as stat:
            majflt = int(stat.read().rsplit(")", 1)[1].split()[9])  # fields from the 3rd on
        return float(read_bytes), float(majflt)
    except (OSError, StopIteration, ValueError, IndexError):
        return float("nan"), float("nan")


def disk_read_rates(path: Path, n_random: int, seq_bytes: int, seed: int = 0) -> dict:
    """The storage's rates under ``path``, measured on that file with its pages evicted from the
    page cache: ``n_random`` reads of one page at distinct random page-aligned offsets over the
    whole file, one at a time (queue depth 1, ``os.pread``, no readahead on the descriptor), and
    one sequential read of ``seq_bytes`` in 1 MiB requests. Also the bytes /proc/self/io says
    were fetched, to show that the reads reached the storage (one page each, not the cache)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        os.fsync(fd)  # DONTNEED drops clean pages only
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # this descriptor: read what is asked, no more
        pages = size // PAGE
        offsets = np.random.default_rng(seed).choice(pages, min(n_random, pages), replace=False) * PAGE
        times = np.empty(len(offsets))
        b0, _ = io_counters()
        for i, offset in enumerate(offsets):
            t0 = time.perf_counter()
            os.pread(fd, PAGE, int(offset))
            times[i] = time.perf_counter() - t0
        b1, _ = io_counters()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        n_seq, t0 = 0, time.perf_counter()
        while n_seq < min(seq_bytes, size):
            n_seq += len(os.pread(fd, 2**20, n_seq)) or size
        seq_s = time.perf_counter() - t0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # leave the file as it was found: not cached
    finally:
        os.close(fd)
    us = times * 1e6
    return dict(random_reads=len(us), random_us_median=float(np.median(us)), random_us_mean=float(us.mean()),
                random_us_p90=float(np.percentile(us, 90)), random_reads_per_s=float(1e6 / us.mean()),
                random_bytes_fetched_per_read=(b1 - b0) / len(us), seq_mb=n_seq / 1e6,
                seq_mb_per_s=n_seq / 1e6 / seq_s)


def advise_default(array: np.ndarray) -> bool:
    """Give a memmap the kernel's default advice back (``MADV_NORMAL``: a fault reads around its
    page), for the comparison timing; sgmcmc advises its memmapped entries ``MADV_RANDOM``."""
    return advise(array, getattr(mmap, "MADV_NORMAL", None))


def cached_fraction(array: np.ndarray) -> float:
    """The fraction of the pages under a memmap that are in the page cache (``mincore``), or NaN."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        start = array.ctypes.data - array.ctypes.data % PAGE
        length = array.ctypes.data + array.nbytes - start
        vec = np.zeros(-(-length // PAGE), np.uint8)
        rc = libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec.ctypes.data_as(ctypes.c_void_p))
        return float(np.mean(vec & 1)) if rc == 0 else float("nan")
    except (OSError, AttributeError):
        return float("nan")


def mem_available() -> float:
    """MemAvailable of /proc/meminfo in bytes (free memory plus the cache the kernel can drop), or NaN."""
    try:
        with open("/proc/meminfo") as meminfo:
            return float(next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")))
    except (OSError, StopIteration):
        return float("nan")


# == the data ==================================================================================

def generating_coefficients(cols: int, seed: int = 0) -> np.ndarray:
    """[bias, beta...] of the data: logits with sd ~2 whatever the number of features."""
    return np.r_[0.5, np.random.default_rng(seed).normal(0.0, 2.0 / np.sqrt(cols), cols)]


def generate_parquet(directory: Path, rows: int, cols: int, part_rows: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Write ``rows`` rows (features f0..f{cols-1}, label y) in Parquet parts of ``part_rows``;
    return the generating coefficients [bias, beta...] and the bytes written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    coef = generating_coefficients(cols, seed)
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


def newton_mode(X: np.ndarray, y: np.ndarray, block_rows: int = 250_000, max_steps: int = 15,
                hessian_rows: int = 2_000_000) -> tuple[np.ndarray, np.ndarray, int]:
    """The posterior mode by Newton's method from 0 and the sds of the Laplace approximation
    there; also the number of passes. Each step is one pass over the rows in blocks: the
    gradient over all rows (the rows' float32 products, float64 sums), the Hessian over the
    first ``hessian_rows`` rows scaled to N (its d^2 products per row are what made full
    Newton passes slow: 2.9 GFLOP per block of 250,000 rows x 76). With i.i.d. rows the
    Hessian's relative error is ~1/sqrt(hessian_rows); the iteration still converges to the
    exact mode (the gradient is exact), and the Laplace sds are that close to exact."""
    n, d = X.shape
    m = min(n, hessian_rows)
    theta = np.zeros(d + 1)
    for passes in range(1, max_steps + 1):
        bias, beta = theta[0], theta[1:].astype(X.dtype)
        grad = -theta / PRIOR_SD**2
        hess = np.zeros((d + 1, d + 1))
        for a in range(0, n, block_rows):
            x = np.asarray(X[a : a + block_rows])  # the memmap's rows, no copy
            p = 1.0 / (1.0 + np.exp(-(bias + (x @ beta).astype(np.float64))))
            r = np.asarray(y[a : a + block_rows], np.float64) - p
            grad[0] += r.sum()
            grad[1:] += x.T @ r.astype(X.dtype)
            if a < m:
                k = min(len(r), m - a)
                z = np.column_stack([np.ones(k), x[:k]])
                hess += (z * (p[:k] * (1.0 - p[:k]))[:, None]).T @ z
        hess = hess * (n / m) + np.eye(d + 1) / PRIOR_SD**2
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


def timed_setup(dataset: dict, start: dict, stepsize: float, minibatch: int):
    """SGLD-CV on ``dataset`` anchored at ``start`` (its full-data gradient computed, no mode search)."""
    sampler = sgmcmc.sgldcv_setup(log_lik, dataset, start, stepsize, opt_stepsize=stepsize, log_prior=log_prior,
                                  minibatch_size=minibatch, n_iters_opt=0, verbose=False, seed=2)
    sgmcmc.init_sess(sampler, verbose=False)  # the control variate's full-data gradient: one pass
    return sampler


def time_iterations(sampler, n_iters: int, max_seconds: float = np.inf, chunk: int = 10) -> dict:
    """Run up to ``n_iters`` more iterations (in calls of ``chunk`` once ``max_seconds`` is
    finite, stopping after the call that passes it): µs per iteration, and the bytes fetched from
    storage and major page faults per iteration (process-wide: the row-gathering thread's too).
    Each call adds a few ms of its own: in ``--quick``, where an iteration is ~0.3 ms, that is
    most of the capped run's time; at 30 GB it is noise."""
    (b0, f0), t0, done = io_counters(), time.perf_counter(), 0
    while done < n_iters and time.perf_counter() - t0 < max_seconds:
        step = n_iters - done if max_seconds == np.inf else min(chunk, n_iters - done)
        sgmcmc.sample_chain(sampler, step, verbose=False)
        done += step
    seconds = time.perf_counter() - t0
    b1, f1 = io_counters()
    return dict(iterations=done, seconds=seconds, us_per_it=seconds / done * 1e6, its_per_s=done / seconds,
                read_kib_per_it=(b1 - b0) / 1024 / done, majflt_per_it=(f1 - f0) / done)


def floor_us(io: dict, disk: dict) -> float:
    """The storage's floor for one iteration at queue depth 1: each major fault a random read
    (the mean measured), plus any bytes fetched beyond one page per fault at the sequential rate."""
    extra_bytes = max(0.0, io["read_kib_per_it"] * 1024 - io["majflt_per_it"] * PAGE)
    return io["majflt_per_it"] * disk["random_us_mean"] + extra_bytes / disk["seq_mb_per_s"]


# == the run ===================================================================================

def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers."""

    def options(parser) -> None:
        parser.add_argument("--data", type=Path, default=None, help="folder for the data (default <out>/data)")
        parser.add_argument("--rows", type=int, default=None, help="rows to generate (full: 10^8, quick: 2*10^5)")
        parser.add_argument("--cols", type=int, default=None, help="features (full: 75, quick: 10)")
        parser.add_argument("--keep-parquet", action="store_true", help="keep the Parquet parts after the conversion")
        parser.add_argument("--reuse-data", action="store_true",
                            help="use the .npy files an earlier run left in --data (same --rows and --cols) "
                                 "instead of generating and converting them again")

    args = parse_args("big_data", __doc__.splitlines()[0], argv, extra=options)
    cfg = dict(QUICK if args.quick else FULL)
    cfg["rows"] = args.rows or cfg["rows"]
    cfg["cols"] = args.cols or cfg["cols"]
    cfg["in_memory_rows"] = min(cfg["in_memory_rows"], cfg["rows"])
    data_dir = args.data or args.out / "data"
    parts, npy_dir = data_dir / "parquet", data_dir / "npy"
    rows, cols = cfg["rows"], cfg["cols"]
    data_bytes = rows * (cols + 1) * 4
    reuse = args.reuse_data and (npy_dir / "X.npy").is_file() and (npy_dir / "y.npy").is_file()
    if reuse:
        shapes = {k: v.shape for k, v in open_npy(npy_dir).items()}
        if shapes != {"X": (rows, cols), "y": (rows,)}:
            raise SystemExit(f"big_data: --reuse-data: {npy_dir} holds {shapes}, not {rows:,} rows x {cols}")
    else:
        for old in (parts, npy_dir):
            shutil.rmtree(old, ignore_errors=True)
    # Parquet parts and .npy files side by side at the peak (random floats do not compress)
    need, free = 2.1 * data_bytes, shutil.disk_usage(data_dir if data_dir.exists() else data_dir.parent
                                                      if data_dir.parent.exists() else Path.cwd()).free
    if need > free and not reuse:
        raise SystemExit(f"big_data: {rows:,} rows x {cols} need about {need / 1e9:.0f} GB free under {data_dir} "
                         f"(the Parquet parts and the .npy files at once), {free / 1e9:.0f} GB are; "
                         "use --data on a larger disk or fewer --rows")
    print(f"{rows:,} rows x {cols} float32 features ({data_bytes / 1e9:.3g} GB) in {data_dir}")
    results: dict = {"config": cfg, "figures": []}

    with MemoryTrace() as trace:
        if reuse:
            coef = generating_coefficients(cols)
            npy_bytes = sum(p.stat().st_size for p in npy_dir.glob("*.npy"))
            results["generate_s"] = results["write_s"] = results["write_mb_per_s"] = float("nan")
            print(f"reusing {npy_bytes / 1e6:,.0f} MB of .npy files in {npy_dir} (--reuse-data)")
        else:
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

        # The floor: what the storage gives one reader at a time, on the file the sampler reads.
        trace.phase("disk rates")
        t0 = time.perf_counter()
        disk = disk_read_rates(npy_dir / "X.npy", cfg["disk_reads"], cfg["disk_seq_bytes"])
        results["disk"], results["disk_s"] = disk, time.perf_counter() - t0
        print(f"disk, X.npy evicted from the page cache: {disk['random_reads']:,} random {PAGE // 1024} KiB reads one at "
              f"a time: median {disk['random_us_median']:.0f} us, mean {disk['random_us_mean']:.0f} us "
              f"({disk['random_reads_per_s']:,.0f} reads/s; {disk['random_bytes_fetched_per_read']:,.0f} bytes fetched "
              f"per read); sequential {disk['seq_mb_per_s']:,.0f} MB/s over {disk['seq_mb']:,.0f} MB")

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
        sampler = sgmcmc.sgldcv_setup(log_lik, dataset, params, stepsize, opt_stepsize=1.0 / lam, log_prior=log_prior,
                                      minibatch_size=cfg["minibatch"], n_iters_opt=0, verbose=not args.quick, seed=1)
        sgmcmc.init_sess(sampler)  # the full-data gradient (a sequential pass) and the stepsize check
        results["sgldcv_setup_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        b0, f0 = io_counters()
        chain = sgmcmc.sample_chain(sampler, cfg["n_iters"], verbose=not args.quick)
        results["sgldcv_sample_s"] = time.perf_counter() - t0
        b1, f1 = io_counters()
        results["sgldcv_sample_io"] = dict(read_kib_per_it=(b1 - b0) / 1024 / cfg["n_iters"],
                                           majflt_per_it=(f1 - f0) / cfg["n_iters"])
        results["sgldcv_s"] = results["sgldcv_setup_s"] + results["sgldcv_sample_s"]
        draws = np.column_stack([chain["bias"], chain["beta"]])[cfg["n_iters"] // 5 :]  # the first fifth is burn-in
        mean, sd = draws.mean(0), draws.std(0, ddof=1)
        q05, q95 = np.quantile(draws, [0.05, 0.95], axis=0)
        print(f"sgldcv on the memmaps: set-up and full-data gradient {results['sgldcv_setup_s']:.1f} s, "
              f"{cfg['n_iters']} iterations {results['sgldcv_sample_s']:.1f} s "
              f"({results['sgldcv_sample_io']['majflt_per_it']:.0f} major faults, "
              f"{results['sgldcv_sample_io']['read_kib_per_it']:,.0f} KiB read per iteration)")

        # Timed: the chain continued on the memmaps with random advice, then with the kernel's
        # default (capped in time: a fault may then read around its page), then SGLD-CV on an
        # in-memory copy of the first rows.
        trace.phase("timing (memmap)")
        start = {"bias": mode[0], "beta": mode[1:]}
        results["cache_could_hold"] = min(1.0, mem_available() / dataset["X"].nbytes)  # of X, at most
        timing = {}
        cached = cached_fraction(dataset["X"])
        timing["memmap, random advice"] = {**time_iterations(sampler, cfg["timed_iters"]), "x_cached_before": cached}
        advise_default(dataset["X"])
        cached = cached_fraction(dataset["X"])
        timing["memmap, default advice"] = {**time_iterations(sampler, cfg["timed_iters"], cfg["default_advice_s"]),
                                            "x_cached_before": cached}
        del sampler
        trace.phase("timing (in memory)")
        m = cfg["in_memory_rows"]
        in_memory = {"X": np.array(dataset["X"][:m]), "y": np.array(dataset["y"][:m])}
        sampler = timed_setup(in_memory, start, stepsize * rows / m, cfg["minibatch"])
        sgmcmc.sample_chain(sampler, 50, verbose=False)  # compiles
        timing["in memory"] = time_iterations(sampler, cfg["timed_iters"])
        del sampler, in_memory
        trace.phase("end")
    for name, t in timing.items():
        t["floor_us"] = floor_us(t, disk)
    rate_disk, rate_ram = timing["memmap, random advice"]["its_per_s"], timing["in memory"]["its_per_s"]

    z_true = (mean - coef) / laplace_sd  # the data's evidence about the truth: ~N(0, 1) each
    z_mode = (mean - mode) / laplace_sd  # the sampler's error: MCSE and SGLD's bias
    results.update(
        mean=mean, sd=sd, q05=q05, q95=q95, true_coef=coef, laplace_mode=mode, laplace_sd=laplace_sd,
        z_true=z_true, z_mode=z_mode, sd_ratio=sd / laplace_sd,
        its_per_s={"memmap": rate_disk, "memmap_default_advice": timing["memmap, default advice"]["its_per_s"],
                   "in_memory": rate_ram},
        timing=timing, data_mb=npy_bytes / 1e6,
        peak_extra_rss_anon_mb={name: trace.peak_anon_in(name) for _, name in trace.phases[:-1]},
        peak_rss_anon_mb=float(max(r[1] for r in trace.rows)) if trace.rows else float("nan"),
        total_s=trace.phases[-1][0] - trace.phases[0][0],
    )
    print(f"\nposterior mean - generating coefficient, in posterior sds: max |z| = {np.abs(z_true).max():.2f} "
          f"(exact posterior: ~N(0, 1) each, {cols + 1} coefficients)")
    print(f"posterior mean - Laplace mode, in posterior sds: max |z| = {np.abs(z_mode).max():.2f}; "
          f"sd / Laplace sd: {results['sd_ratio'].min():.2f}-{results['sd_ratio'].max():.2f}")
    print(f"\nper iteration ({cfg['minibatch']:,} random rows; the page cache could hold at most "
          f"{results['cache_could_hold']:.0%} of X.npy; floor = major faults x {disk['random_us_mean']:.0f} us "
          f"+ bytes beyond a page per fault at {disk['seq_mb_per_s']:,.0f} MB/s):")
    for name, t in timing.items():
        cached = f", {t['x_cached_before']:.0%} of X cached before" if "x_cached_before" in t else ""
        print(f"  {name:24s} {t['us_per_it']:>10,.0f} us/it ({t['iterations']:,} its){cached}: "
              f"{t['majflt_per_it']:,.1f} major faults, {t['read_kib_per_it']:,.0f} KiB read -> "
              f"floor {t['floor_us']:,.0f} us/it")
    for name, mb in results["peak_extra_rss_anon_mb"].items():
        print(f"  peak RssAnon above the start of {name!r}: {mb:,.0f} MB (data: {results['data_mb']:,.0f} MB)")
    print(f"  peak RssAnon: {results['peak_rss_anon_mb']:,.0f} MB; the run took {results['total_s']:.0f} s")

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

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = {"memmap, random advice": f"memmap\nMADV_RANDOM\n{rows:,} rows",
              "memmap, default advice": f"memmap\ndefault advice\n{rows:,} rows",
              "in memory": f"in memory\n{m:,} rows"}
    x = np.arange(len(timing))
    ax.bar(x, [t["us_per_it"] for t in timing.values()], color=["teal", "cadetblue", "maroon"], width=0.6,
           label="measured")
    ax.plot(x, [t["floor_us"] or np.nan for t in timing.values()], "_", ms=40, mew=2.5, color="black",
            label=f"floor: the storage's rate at queue depth 1\n(major faults x {disk['random_us_mean']:.0f} us + "
                  f"extra bytes at {disk['seq_mb_per_s']:,.0f} MB/s)")
    for xi, t in zip(x, timing.values()):
        ax.text(xi, t["us_per_it"], f"{t['us_per_it']:,.0f}\n{t['majflt_per_it']:,.0f} faults\n"
                f"{t['read_kib_per_it']:,.0f} KiB", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [labels[k] for k in timing], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 8)
    ax.set(ylabel="µs per iteration", title=f"SGLD-CV, minibatch {cfg['minibatch']:,} random rows per iteration")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2)
    results["figures"].append(savefig(fig, args.out / "big_data_throughput.png"))
    return results


if __name__ == "__main__":
    main()
