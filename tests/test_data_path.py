"""The data path (SPEC §11): rows read where they live, the same chain whatever the storage, the
chunking or the prefetch, no copy of the data, and streamed full-data passes."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
import sgmcmc.data.pipeline
from sgmcmc import checks
from sgmcmc.data.rows import CastEntry, Rows

N, D = 4_000, 3


def _regression(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D))
    beta = np.array([0.5, -1.0, 2.0])
    y = x @ beta + rng.normal(size=N)
    return x, y


def log_lik(params, data):
    return -0.5 * tf.reduce_sum(tf.square(data["y"] - tf.linalg.matvec(data["x"], params["b"])))


def log_prior(params):
    return -0.5 * tf.reduce_sum(tf.square(params["b"])) / 100.0


def _exact_posterior(x, y):
    precision = x.T @ x + np.eye(D) / 100.0
    cov = np.linalg.inv(precision)
    return cov @ x.T @ y, cov


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same float64 data as in-memory arrays (unaligned), memmaps of .npy files and h5py
    datasets."""
    h5py = pytest.importorskip("h5py")
    x, y = _regression()
    base = np.empty(x.size + 1)
    unaligned = base[1:].reshape(x.shape)  # 8 bytes past numpy's start: not 64-byte aligned
    unaligned[:] = x
    directory = tmp_path_factory.mktemp("npy")
    np.save(directory / "x.npy", x)
    np.save(directory / "y.npy", y)
    handle = h5py.File(directory / "data.h5", "w")
    handle["x"], handle["y"] = x, y
    return {
        "memory": {"x": unaligned, "y": y},
        "memmap": {"x": np.load(directory / "x.npy", mmap_mode="r"), "y": np.load(directory / "y.npy", mmap_mode="r")},
        "h5py": {"x": handle["x"], "y": handle["y"]},
    }


def _sgld(dataset, **kwargs):
    settings = dict(log_prior=log_prior, minibatch_size=50, n_iters=300, verbose=False, seed=3, dtype=tf.float64)
    settings.update(kwargs)
    return sgmcmc.sgld(log_lik, dataset, {"b": np.zeros(D)}, 1e-4, **settings)


def test_the_same_chain_from_memory_memmap_and_h5py(stores):
    """Bit for bit: the rows gathered are the same rows whatever holds them. Fails on a patched
    Rows.take that reads h5py entries without restoring the draw order (sorted rows: checked)."""
    chains = {name: _sgld(data)["b"] for name, data in stores.items()}
    np.testing.assert_array_equal(chains["memory"], chains["memmap"])
    np.testing.assert_array_equal(chains["memory"], chains["h5py"])


def test_the_same_chain_whatever_the_block_size_and_prefetch(stores, monkeypatch):
    """Blocks of 2048 iterations (one call), of 7 (many calls, the next block gathered on a thread
    while a call runs) and of 7 with prefetch off: the same chain, with burn-in and thinning, in
    the default compilation mode. (No broken variant was run for this test; the index side of
    chunk independence is pinned by test_minibatch's chunking test, which fails on a counter
    started at t0 instead of t0·B.)"""
    reference = _sgld(stores["memory"], burn_in=13, thin=3)["b"]
    monkeypatch.setattr(sgmcmc.data.pipeline, "MAX_BLOCK_ITERATIONS", 7)
    np.testing.assert_array_equal(reference, _sgld(stores["memory"], burn_in=13, thin=3)["b"])
    original = sgmcmc.data.pipeline.BlockFeed.block
    monkeypatch.setattr(sgmcmc.data.pipeline.BlockFeed, "block", lambda self, t0, n, prefetch=None: original(self, t0, n))
    np.testing.assert_array_equal(reference, _sgld(stores["memory"], burn_in=13, thin=3)["b"])


def test_step_api_equals_the_whole_chain_on_a_memmap(stores):
    data = stores["memmap"]
    whole = _sgld(data, n_iters=40)["b"]
    sampler = sgmcmc.sgld_setup(log_lik, data, {"b": np.zeros(D)}, 1e-4, log_prior, 50, seed=3, dtype=tf.float64)
    sess = sgmcmc.init_sess(sampler)
    steps = []
    for _ in range(40):
        sgmcmc.sgmcmc_step(sampler, sess)
        steps.append(sgmcmc.get_params(sampler, sess)["b"])
    np.testing.assert_array_equal(whole, np.stack(steps))


def test_chain_k_does_not_depend_on_the_number_of_chains(stores):
    """Chain 1 of 2 equals chain 1 of 4 (its minibatches and noise are keyed by its index).
    Fails when the noise of all chains comes from one stateful generator, as before this round
    (checked on a patched copy)."""
    starts = [{"b": np.full(D, 0.1 * k)} for k in range(4)]
    out2 = sgmcmc.sgld(log_lik, stores["memory"], starts[:2], 1e-4, log_prior, 50, 60, False, 3, dtype=tf.float64, n_chains=2)
    out4 = sgmcmc.sgld(log_lik, stores["memory"], starts, 1e-4, log_prior, 50, 60, False, 3, dtype=tf.float64, n_chains=4)
    np.testing.assert_array_equal(out2["b"][1], out4["b"][1])


def test_streamed_full_data_gradient_equals_the_in_memory_one(stores):
    """The CV anchor's gradient streamed from h5py in blocks (several blocks: 4,000 rows of
    1,000) equals the closed form, Xᵀ(y − Xb) − b/100, to float64 rounding."""
    from sgmcmc.step.estimators import MinibatchGradient
    import sgmcmc.step.posterior as posterior  # the full-data passes' home

    x, y = _regression()
    b = np.array([0.3, 0.2, -0.1])
    exact = x.T @ (y - x @ b) - b / 100.0
    old = posterior.FULL_GRADIENT_BATCH_ROWS
    posterior.FULL_GRADIENT_BATCH_ROWS = 1_000
    blocks = []
    posterior_blocks = posterior.Rows.blocks
    posterior.Rows.blocks = lambda self, size: blocks.append(size) or posterior_blocks(self, size)
    try:
        for name in ("memory", "h5py"):
            data = Rows(checks.check_dataset(stores[name]), np.float64).as_read()
            grad = MinibatchGradient(log_lik, log_prior, data, 50, 1).full_data_gradient({"b": tf.constant(b)})
            np.testing.assert_allclose(grad["b"].numpy(), exact, rtol=1e-10, atol=1e-8)
        assert blocks and max(blocks) <= 1_000  # several blocks of 4,000 rows
    finally:
        posterior.FULL_GRADIENT_BATCH_ROWS = old
        posterior.Rows.blocks = posterior_blocks


def test_sgldcv_on_a_memmap_recovers_the_exact_posterior(stores):
    """SGLD-CV on the memmapped (float64 on disk, float32 model) regression: posterior mean
    within 0.4 posterior sd per coordinate and sd ratios in [0.8, 1.3] (the stepsize keeps the
    discretisation's sd distortion ≤ 5 %). Measured over seeds 1–5: worst mean errors 0.067–0.264
    sd (seed 3 the largest), sd ratios 0.93–1.11. (A patched CastEntry that reinterprets the float64 bits instead of
    casting them fails at once, in the set-up checks.)"""
    mean, cov = _exact_posterior(*_regression())
    sd = np.sqrt(np.diag(cov))
    out = sgmcmc.sgldcv(
        log_lik, stores["memmap"], {"b": np.zeros(D, np.float32)}, 2e-5, log_prior=log_prior,
        opt_stepsize=1e-5, minibatch_size=100, n_iters=6_000, n_iters_opt=2_000, verbose=False, seed=1,
    )["b"][1_000:]
    assert np.all(np.abs(out.mean(0) - mean) < 0.4 * sd), (out.mean(0) - mean) / sd
    ratio = out.std(0) / sd
    assert np.all((ratio > 0.8) & (ratio < 1.3)), ratio


def test_no_entry_is_copied_or_cast_whole():
    """check_dataset keeps every entry as it is; Rows.as_read keeps an unaligned float32 array and
    an int array as they are, and makes float64 in a float32 model and booleans CastEntry (rows
    cast when read)."""
    base = np.zeros(3 * 1000 + 1, np.float32)
    unaligned = base[1:].reshape(1000, 3)
    entries = {"x": unaligned, "g": np.arange(1000), "w": np.ones(1000), "m": np.ones(1000, bool)}
    checked = checks.check_dataset(entries)
    assert all(checked[k] is entries[k] for k in entries)
    rows = Rows(checked, np.float32)
    data = rows.as_read()
    assert data["x"] is unaligned and data["g"].dtype == np.int64
    assert isinstance(data["w"], CastEntry) and data["w"].dtype == np.float32 and data["w"].base.dtype == np.float64
    assert isinstance(data["m"], CastEntry) and data["m"].dtype == np.int32
    rows = Rows(data, np.float32)
    got = rows.take(np.array([[3, 999], [0, 3]]))
    assert got["x"].shape == (2, 2, 3) and got["w"].dtype == np.float32 and got["m"].dtype == np.int32
    np.testing.assert_array_equal(got["g"], [[3, 999], [0, 3]])


def test_rows_of_strided_and_on_disk_arrays():
    """Rows of a column slice (strided rows, contiguous within), a 3-d entry, a 1-d strided column
    and a memmap's column slice equal numpy's own fancy indexing."""
    rng = np.random.default_rng(3)
    table = rng.random((200, 7))
    cube = rng.random((200, 3, 4))
    idx = rng.integers(0, 200, size=(5, 2, 9))
    for entry in (table[:, 2:], table[:, 0], cube, cube[:, 1:], table):
        np.testing.assert_array_equal(Rows({"a": entry}, np.float64).take(idx)["a"], entry[idx])


def test_full_gradients_stream_from_disk(stores):
    """full_gradients on h5py-held data (streamed in blocks) equals the closed form
    Xᵀ(y − Xb) − b/100 at every sample, to float64 rounding."""
    out = _sgld(stores["memory"], n_iters=20)
    x, y = _regression()
    grads = sgmcmc.full_gradients(log_lik, stores["h5py"], out, log_prior=log_prior)["b"]
    exact = np.stack([x.T @ (y - x @ b) - b / 100.0 for b in out["b"]])
    np.testing.assert_allclose(grads, exact, rtol=1e-9, atol=1e-7)


def _svrg(dataset, **kwargs):
    return _sgld(dataset, estimator="svrg", svrg_period=25, n_iters=120, **kwargs)["b"]


def test_svrg_refreshes_read_the_rows_where_they_are(stores, monkeypatch):
    """SVRG's in-graph refresh (a full-data pass every 25 iterations, here in blocks of 1,500
    rows: two full blocks and a remainder of 1,000) gives the same chain, bit for bit, whether
    TensorFlow reads the rows in place (an aligned array: sliced as a tensor) or a host callback
    reads them from an unaligned array, a memmap or h5py (no copy of the data). Graph mode for
    all: XLA may round the in-place sums differently. Fails on a callback reading its block one
    row late (checked on a patched Rows.slice: the unaligned array's chain differed in all 360
    values)."""
    import sgmcmc.step.estimators.plain as plain
    from sgmcmc.data.rows import aligned_empty

    monkeypatch.setenv("SGMCMC_XLA", "0")
    monkeypatch.setattr(plain, "FULL_GRADIENT_BATCH_ROWS", 1_500)
    x, y = _regression()
    aligned = {"x": aligned_empty(x.shape, np.float64), "y": aligned_empty(y.shape, np.float64)}
    aligned["x"][:], aligned["y"][:] = x, y
    assert Rows(aligned, np.float64).shared_in_place and not Rows(stores["memmap"], np.float64).shared_in_place
    reference = _svrg(aligned)
    for name, data in stores.items():
        np.testing.assert_array_equal(_svrg(data), reference, err_msg=name)


def test_svrg_on_a_memmap_keeps_no_copy_of_the_rows(tmp_path):
    """SVRG on a 200 MB memmap (10^6 rows x 50 float32), four refreshes: the process's anonymous
    memory (RssAnon: not the memmap's page cache) grows by far less than the data: under 60 MB.
    Measured here over 3 runs: 6.3-8.1 MB; with the in-memory copy this replaced (forced by a
    patched ``Rows.shared_in_place``): 194-218 MB, failing."""
    from pathlib import Path

    if not Path("/proc/self/status").exists():
        pytest.skip("needs Linux /proc")

    def rss_anon_mb() -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no RssAnon")

    n, d = 1_000_000, 50
    x = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, (n, d))
    rng = np.random.default_rng(0)
    for a in range(0, n, 100_000):
        x[a : a + 100_000] = rng.standard_normal((100_000, d), np.float32)
    x.flush()
    del x
    data = {"x": np.load(tmp_path / "x.npy", mmap_mode="r")}

    def lik(params, batch):
        return -0.5 * tf.reduce_sum(tf.square(tf.linalg.matvec(batch["x"], params["b"]) - 1.0))

    small = {"x": np.asarray(data["x"][:1_000])}  # compile everything once on small data first
    sgmcmc.sgld(lik, small, {"b": np.zeros(d, np.float32)}, 1e-7, minibatch_size=100, n_iters=20,
                estimator="svrg", svrg_period=5, verbose=False, seed=1)
    before = rss_anon_mb()
    peak = [before]
    import threading
    import time

    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_anon_mb())
            time.sleep(0.005)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        out = sgmcmc.sgld(lik, data, {"b": np.zeros(d, np.float32)}, 1e-7, minibatch_size=100, n_iters=20,
                          estimator="svrg", svrg_period=5, verbose=False, seed=1)
    finally:
        stop.set()
        thread.join()
    extra = peak[0] - before
    assert np.all(np.isfinite(out["b"]))
    assert extra < 60, f"SVRG on a {n * d * 4 / 1e6:.0f} MB memmap added {extra:.0f} MB of anonymous memory"


def _read_bytes() -> int | None:
    """Bytes this process has caused to be read from storage (/proc/self/io), or None."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("read_bytes:"))
    except (OSError, StopIteration):
        return None


def test_memmapped_rows_are_read_a_page_each(tmp_path):
    """Random rows of a memmap that is not in the page cache: the sampler's Rows advises the
    mapping for random access, so each row read fetches its own page from disk, not the
    kernel's read-around window (up to the disk's readahead, 8 MiB here). 200 rows of 256 bytes
    from a 64 MB file evicted from the cache: at most 2 pages per row may be read. Measured here:
    860,160 bytes (210 pages) in each of 3 runs; without the advice (a patched Rows that skips
    it): 66,392,064 bytes, the whole file, twice, failing."""
    import os

    n, width = 262_144, 64
    np.save(tmp_path / "x.npy", np.zeros((n, width), np.float32))
    with open(tmp_path / "x.npy", "rb+") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        before = _read_bytes()
        os.pread(f.fileno(), 4096, 40 * 2**20)
        if before is None or _read_bytes() == before:
            pytest.skip("no per-process read accounting here, or the page cache could not be dropped")
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    rows = Rows({"x": x}, np.float32)
    picks = np.random.default_rng(0).choice(n, 200, replace=False)
    before = _read_bytes()
    got = rows.take(picks)["x"]
    read = _read_bytes() - before
    assert got.shape == (200, width)
    assert read <= 200 * 2 * 4096, f"{read:,} bytes read for 200 rows of 256 bytes"
