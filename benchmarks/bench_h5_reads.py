"""Random rows of an h5py dataset: the gathers measured for sgmcmc.data.rows, and SGLD per iteration
on h5py against a memmap of the same data (issue 31, item 4).

Data: N = 10^6 rows, covertype-shaped (X: 54 float32 in [0, 1], y: 0/1 float32), written to
``--dir`` once as a memmap (two ``.npy`` files) and as one HDF5 file holding three layouts of the
same arrays; the files are deleted at the end (``--keep`` keeps them):

  auto      ``chunks=True`` — h5py's guess, (15625, 1) for X: one column per chunk (what any
            compressed dataset without explicit chunks gets)
  rows      ``chunks=(--chunk-rows, 54)``, y ``(--chunk-rows,)`` — whole rows per chunk
  contig    no chunks: contiguous

Gathers, per call of k random rows (i.i.d., unsorted; k = 1,000, 10,000, 20,000 and the rows of one
pipeline block of SGLD with n = 1,000: capacity × 1,000) — seconds, medians of ``--repeats``:

  fancy         ``entry[sorted distinct rows]``, then put back in draw order: the code before
                (h5py's own selection of k rows: ~quadratic in k; skipped above ``--fancy-max``)
  points        one HDF5 point selection of the rows' elements (low-level ``select_elements``)
  chunk_select  h5py's own selection per needed chunk (contiguous: per 1,024-row block)
  whole_chunks  spans of whole chunks (adjacent needed chunks merged, ≤ 16 MB), full rows a read
  runs          spans of nearby rows (gap ≤ max(chunk, 64 KB of rows)), full rows a read
  adopted       runs, each read one chunk of the trailing axes at a time, by h5py's low-level
                ``DatasetID.read`` into one buffer (``sgmcmc.data.rows.take_rows``)
  adopted_getitem  the same read by ``entry[a:b, ...]``
  adopted_4mb, adopted_16mb  reads of at most 4 or 16 MB (adopted: ``rows.SPAN_BYTES``, 1 MB)
  memmap        numpy gather from the memmap (the in-place path: the comparison)
  floor         reading every needed chunk once, raw (``read_direct_chunk``: no selection, no
                copy into rows; contiguous: the memmap gather from the HDF5 file's own bytes)

zarr (when installed; default compressor): ``zarr auto`` (zarr's chunk guess) and ``zarr rows``
(``--chunk-rows`` × 54), gathered by ``adopted`` (zarr: one ``oindex`` selection of the distinct
rows, which zarr groups by chunk) and ``spans`` (the h5py path: ``_take_by_spans`` by slices);
``floor``: every needed chunk's file read and zstd-decoded once, by hand (nothing assembled).

SGLD: ``sgld_setup`` (logistic regression, n = 1,000, float32) then ``sample_chain`` of ``--iters``
iterations, a warm-up call each first, then ``--repeats`` rounds timing one call of every store in
turn; µs per iteration (medians) and the ratio to the memmap's (target ≤ 3×). All in one process.

Usage: python benchmarks/bench_h5_reads.py [--dir /tmp] [--rows 1000000] [--iters 1000]
       [--repeats 3] [--chunk-rows 1024] [--fancy-max 20000] [--skip-sgld] [--keep]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

from profile_pipeline import median_time as timed  # noqa: E402
from sgmcmc.data import rows as rows_module  # noqa: E402

D = 54
LAYOUTS = ("auto", "rows", "contig")


class _Sized:
    """A zarr 3 ``Array`` that ``len()`` works on: ``check_dataset``'s NaN scan calls ``len(entry)``,
    which zarr 3 arrays refuse (reported; ``checks/data.py`` is not this benchmark's to change)."""

    def __init__(self, array, directory: str):
        self._array, self.directory = array, directory  # the array's own folder (its chunk files)

    def __getattr__(self, name):
        return getattr(self._array, name)

    def __getitem__(self, key):
        return self._array[key]

    def __len__(self):
        return self._array.shape[0]


def write_zarr(directory: str, x_path: str, y_path: str, chunk_rows: int) -> dict:
    """zarr copies of the memmap (default compressor), or {} without zarr."""
    try:
        import zarr
    except ImportError:
        return {}
    if not hasattr(zarr, "create_array"):  # zarr 2: not measured
        return {}
    x, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    stores = {}
    for name, (cx, cy) in {"auto": ("auto", "auto"), "rows": ((chunk_rows, D), (chunk_rows,))}.items():
        path = os.path.join(directory, f"bench_h5_reads_{name}.zarr")
        group = zarr.open_group(path, mode="w")
        zx = group.create_array("X", shape=x.shape, dtype=x.dtype, chunks=cx)
        zy = group.create_array("y", shape=y.shape, dtype=y.dtype, chunks=cy)
        for a in range(0, len(x), 100_000):
            zx[a : a + 100_000], zy[a : a + 100_000] = x[a : a + 100_000], y[a : a + 100_000]
        stores[f"zarr {name}"] = ({"X": _Sized(zx, os.path.join(path, "X")), "y": _Sized(zy, os.path.join(path, "y"))}, path)
    return stores


def write(directory: str, n_rows: int, chunk_rows: int) -> tuple[str, str, str]:
    x_path, y_path = (os.path.join(directory, f"bench_h5_reads_{n}.npy") for n in ("X", "y"))
    h5_path = os.path.join(directory, "bench_h5_reads.h5")
    rng = np.random.default_rng(0)
    x = np.lib.format.open_memmap(x_path, mode="w+", dtype=np.float32, shape=(n_rows, D))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.float32, shape=(n_rows,))
    with h5py.File(h5_path, "w") as f:
        layouts = {"auto": (True, True), "rows": ((chunk_rows, D), (chunk_rows,)), "contig": (None, None)}
        sets = {
            name: (f.create_dataset(f"{name}/X", (n_rows, D), np.float32, chunks=cx),
                   f.create_dataset(f"{name}/y", (n_rows,), np.float32, chunks=cy))
            for name, (cx, cy) in layouts.items()
        }
        for a in range(0, n_rows, 100_000):
            b = min(n_rows, a + 100_000)
            block = rng.random((b - a, D + 1), dtype=np.float32)
            block[:, 0] = block[:, 0] < 0.5
            x[a:b], y[a:b] = block[:, 1:], block[:, 0]
            for hx, hy in sets.values():
                hx[a:b], hy[a:b] = block[:, 1:], block[:, 0]
    x.flush()
    y.flush()
    del x, y
    return x_path, y_path, h5_path


# --- the variants ---------------------------------------------------------------------------


def fancy(entry, idx):
    unique, inverse = np.unique(idx, return_inverse=True)
    return np.asarray(entry[unique])[inverse]


def points(entry, idx):
    from h5py import h5s

    unique, inverse = np.unique(idx, return_inverse=True)
    row_shape = entry.shape[1:]
    out = np.empty((unique.size, *row_shape), entry.dtype)
    inner = np.indices(row_shape).reshape(len(row_shape), -1).T if row_shape else np.zeros((1, 0), np.int64)
    coords = np.empty((unique.size, inner.shape[0], 1 + len(row_shape)), np.uint64)
    coords[:, :, 0] = unique[:, None]
    coords[:, :, 1:] = inner[None]
    space = entry.id.get_space()
    space.select_elements(coords.reshape(-1, 1 + len(row_shape)))
    entry.id.read(h5s.create_simple(out.shape), space, out)
    return out[inverse]


def _unit(entry):
    return entry.chunks[0] if entry.chunks else 1024


def chunk_select(entry, idx):
    unique, inverse = np.unique(idx, return_inverse=True)
    out = np.empty((unique.size, *entry.shape[1:]), entry.dtype)
    unit = _unit(entry)
    cut = np.flatnonzero(np.diff(unique // unit)) + 1
    for s, e in zip(np.r_[0, cut], np.r_[cut, unique.size]):
        out[s:e] = entry[unique[s:e]]
    return out[inverse]


def _spans_then_gather(entry, idx, gap, max_rows, aligned):
    unique, inverse = np.unique(idx, return_inverse=True)
    out = np.empty((unique.size, *entry.shape[1:]), entry.dtype)
    starts, ends = rows_module._spans(unique, gap, max_rows)
    unit = _unit(entry) if aligned else 1
    for s, e in zip(starts.tolist(), ends.tolist()):
        first = int(unique[s]) // unit * unit
        last = min(entry.shape[0], -(-(int(unique[e - 1]) + 1) // unit) * unit)
        out[s:e] = np.asarray(entry[first:last])[unique[s:e] - first]
    return out[inverse]


def whole_chunks(entry, idx):
    unit = _unit(entry)
    row_bytes = int(np.prod(entry.shape[1:])) * entry.dtype.itemsize
    return _spans_then_gather(entry, idx, unit, max(1, rows_module.BLOCK_BYTES // row_bytes // unit) * unit, True)


def runs(entry, idx):
    chunk = entry.chunks[0] if entry.chunks else 1
    row_bytes = int(np.prod(entry.shape[1:])) * entry.dtype.itemsize
    max_rows = -(-max(1, rows_module.BLOCK_BYTES // row_bytes) // chunk) * chunk
    return _spans_then_gather(entry, idx, max(chunk, rows_module.GAP_BYTES // row_bytes), max_rows, False)


def adopted(entry, idx):
    return rows_module.take_rows(entry, idx)


class _Sliced:
    """The entry without its low-level h5py handle: read by ``entry[a:b, ...]``."""

    def __init__(self, entry):
        self.entry, self.shape, self.dtype, self.chunks = entry, entry.shape, entry.dtype, tuple(entry.chunks or ()) or None

    def __getitem__(self, key):
        return self.entry[key]


def adopted_getitem(entry, idx):
    return rows_module.take_rows(_Sliced(entry), idx)


def adopted_4mb(entry, idx):
    return rows_module._take_by_spans(entry, idx, span_bytes=4 * 2**20)


def adopted_16mb(entry, idx):
    return rows_module._take_by_spans(entry, idx, span_bytes=16 * 2**20)


_MAPPED: dict = {}


def floor(entry, idx):
    """Every needed chunk read once, raw bytes (uncompressed here, so this is the storage read)."""
    if entry.chunks is None:  # contiguous: the file's own bytes, memmapped, gathered by numpy
        key = (entry.file.filename, entry.name)
        if key not in _MAPPED:
            _MAPPED[key] = np.memmap(entry.file.filename, entry.dtype, "r", entry.id.get_offset(), entry.shape)
        return rows_module.take_rows(_MAPPED[key], idx)
    chunks = entry.chunks
    needed = np.unique(idx // chunks[0]) * chunks[0]
    grid = [range(0, s, c) for s, c in zip(entry.shape[1:], chunks[1:])]
    inner = np.stack(np.meshgrid(*grid, indexing="ij"), -1).reshape(-1, len(grid)) if grid else np.zeros((1, 0), int)
    for start in needed.tolist():
        for offsets in inner.tolist():
            entry.id.read_direct_chunk((start, *offsets))


def spans(entry, idx):
    return rows_module._take_by_spans(_Sliced(entry), idx)


def zarr_floor(entry, idx):
    """Every needed chunk read and decoded once, by hand: its file's bytes and zstd (the default
    codec of the arrays written here), sequentially, nothing assembled."""
    from numcodecs import Zstd

    codec, chunks = Zstd(), entry.chunks
    grid = [range(-(-s // c)) for s, c in zip(entry.shape[1:], chunks[1:])]
    inner = np.stack(np.meshgrid(*grid, indexing="ij"), -1).reshape(-1, len(grid)) if grid else np.zeros((1, 0), int)
    for row in np.unique(idx // chunks[0]).tolist():
        for rest in inner.tolist():
            with open(os.path.join(entry.directory, "c", *map(str, (row, *rest))), "rb") as f:
                codec.decode(f.read())


VARIANTS = {"fancy": fancy, "points": points, "chunk_select": chunk_select, "whole_chunks": whole_chunks,
            "runs": runs, "adopted": adopted, "adopted_getitem": adopted_getitem, "adopted_4mb": adopted_4mb, "adopted_16mb": adopted_16mb, "floor": floor}


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk-rows", type=int, default=1024)
    p.add_argument("--fancy-max", type=int, default=20_000)
    p.add_argument("--points-max", type=int, default=200_000)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--skip-sgld", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    load = os.getloadavg()
    print(f"N = {args.rows}, X {args.rows} x {D} float32 + y; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    start = time.perf_counter()
    x_path, y_path, h5_path = write(args.dir, args.rows, args.chunk_rows)
    print(f"wrote the memmap and the HDF5 file in {time.perf_counter() - start:.1f} s")
    zarrs = write_zarr(args.dir, x_path, y_path, args.chunk_rows)
    try:
        run(args, x_path, y_path, h5_path, {k: v[0] for k, v in zarrs.items()})
    finally:
        if not args.keep:
            for path in (x_path, y_path, h5_path):
                os.remove(path)
            for _, path in zarrs.values():
                shutil.rmtree(path)


def both(fn, store, idx):
    """A call of ``fn`` on X and on y, as the sampler gathers every entry."""
    return lambda: (fn(store["X"], idx), fn(store["y"], idx))


def run(args, x_path, y_path, h5_path, zarrs) -> None:
    from sgmcmc.data.minibatch import MinibatchIndices
    from sgmcmc.data.pipeline import iterations_per_block

    memmap = {"X": np.load(x_path, mmap_mode="r"), "y": np.load(y_path, mmap_mode="r")}
    handle = h5py.File(h5_path, "r")
    stores = {name: {"X": handle[f"{name}/X"], "y": handle[f"{name}/y"]} for name in LAYOUTS}
    for name in LAYOUTS:
        print(f"  {name:>6}: X chunks {stores[name]['X'].chunks}, y chunks {stores[name]['y'].chunks}")
    capacity = iterations_per_block(MinibatchIndices(args.rows, 1000), 1, (D + 1) * 4)
    sizes = [1_000, 10_000, 20_000, capacity * 1000]
    rng = np.random.default_rng(5)
    calls = {k: rng.integers(0, args.rows, k) for k in sizes}
    reference = {k: memmap["X"][v] for k, v in calls.items()}
    names = [v for v in args.variants.split(",") if v]
    print(f"\nGather of k random rows of X (and y), one call; seconds, medians of {args.repeats} "
          f"(k = {sizes[-1]}: one SGLD block, {capacity} iterations of n = 1,000)")
    print(f"{'layout':>7} {'variant':>15} " + " ".join(f"{k:>10}" for k in sizes))
    for k in sizes:  # the memmap's pages mapped before timing (the first touch costs ~10x)
        rows_module.take_rows(memmap["X"], calls[k])
    mm = [timed(both(rows_module.take_rows, memmap, calls[k]), args.repeats) for k in sizes]
    print(f"{'memmap':>7} {'':>15} " + " ".join(f"{t:10.4f}" for t in mm))
    for layout in LAYOUTS:
        for name in names:
            fn = VARIANTS[name]
            cells = []
            for k in sizes:
                if (name == "fancy" and k > args.fancy_max) or (name == "points" and k > args.points_max):
                    cells.append(f"{'-':>10}")
                    continue
                got = fn(stores[layout]["X"], calls[k])
                if name != "floor":
                    assert np.array_equal(got, reference[k]), (layout, name, k)
                reps = 1 if name in ("fancy", "points") and k > 1000 else args.repeats
                t = timed(both(fn, stores[layout], calls[k]), reps)
                cells.append(f"{t:10.4f}")
            print(f"{layout:>7} {name:>15} " + " ".join(cells), flush=True)
    for layout, store in zarrs.items():
        print(f"  {layout}: X chunks {store['X'].chunks}, y chunks {store['y'].chunks}, {store['X'].compressors}")
        for name, fn in (("adopted", adopted), ("spans", spans), ("floor", zarr_floor)):
            cells = []
            for k in sizes:
                got = fn(store["X"], calls[k])
                assert name == "floor" or np.array_equal(got, reference[k]), (layout, name, k)
                t = timed(both(fn, store, calls[k]), args.repeats)
                cells.append(f"{t:10.4f}")
            print(f"{layout:>10} {name:>12} " + " ".join(cells), flush=True)
    if args.skip_sgld:
        return
    import sgmcmc
    from logreg_model import log_lik, log_prior, start

    print(f"\nSGLD, n = 1,000, {args.iters} iterations a call; µs per iteration, medians of {args.repeats} "
          "rounds (each round times one call of every store in turn)")
    named = [("memmap", memmap)] + [(f"h5 {n}", stores[n]) for n in LAYOUTS] + list(zarrs.items())
    samplers = {}
    for name, data in named:
        samplers[name] = sgmcmc.sgld_setup(log_lik, data, start(), 5e-6, log_prior, 1000, seed=1)
        sgmcmc.sample_chain(samplers[name], args.iters, verbose=False)  # compiled, blocks allocated
    times: dict = {name: [] for name in samplers}
    for _ in range(args.repeats):
        for name, sampler in samplers.items():
            times[name].append(timed(functools.partial(sgmcmc.sample_chain, sampler, args.iters, verbose=False), 1))
    base = statistics.median(times["memmap"])
    for name in samplers:
        t = statistics.median(times[name])
        cells = " ".join(f"{x / args.iters * 1e6:.0f}" for x in times[name])
        print(f"{name:>10}: {t / args.iters * 1e6:9.1f} µs/it  ({t / base:.2f}x the memmap's; rounds {cells})", flush=True)
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
