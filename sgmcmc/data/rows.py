"""Where the rows come from: the user's dataset entries, read where they live (SPEC §11).

An entry is anything with ``.shape``, ``.dtype`` and numpy-style indexing on the first axis: a
numpy array (aligned or not), a ``np.memmap`` of a file on disk, an h5py ``Dataset``, a zarr
``Array``. Nothing here copies a whole entry: minibatch rows are gathered from it
(:meth:`Rows.take`) and passes over all rows read contiguous blocks (:meth:`Rows.blocks`), each
cast to the model dtype on the way out. Extra memory is the gathered rows, O(chunk × n × row).

Gathering uses numpy fancy indexing on a view that makes each row one item (a row of 55 float32
is one 220-byte item), which measured 18 µs for 500 random rows of a 581,012 × 55 array against
24 µs for ``np.take(axis=0)`` and 39 µs for plain fancy indexing (benchmarks/gather_host.py).
Array-likes that are not numpy arrays are read by chunks, in sorted order (what keeps a disk's
reads in order), then put back in draw order: h5py datasets (and any other array-like) by one
slice per span of nearby rows and chunk of the trailing axes (:func:`_take_by_spans`; h5py's own
selection of k random rows costs ~k²), zarr arrays by one orthogonal selection of the distinct
rows, which zarr groups by chunk itself. Time is linear in the rows read. Memmapped
entries are advised for random access, each streamed block for sequential access while it is
read (:func:`advise`: 100x on random rows, 20x on passes, measured on data larger than memory).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from typing import Any, Iterator

import numpy as np
import tensorflow as tf

#: TensorFlow's CPU tensors must start on a 64-byte boundary to be shared without a copy.
TENSOR_ALIGNMENT = 64

#: Bytes of one block of a streaming pass over all rows (the full-data gradient, scans).
BLOCK_BYTES = 16 * 2**20


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array starting on a :data:`TENSOR_ALIGNMENT` boundary
    (so that TensorFlow can read it through DLPack without a copy)."""
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffer = np.empty(n_bytes + TENSOR_ALIGNMENT, np.uint8)
    offset = (-buffer.ctypes.data) % TENSOR_ALIGNMENT
    return buffer[offset : offset + n_bytes].view(dtype).reshape(shape)


def _libc_madvise():
    try:  # any failure (no libc, no madvise: Windows) leaves the advice off
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.madvise
    except Exception:  # noqa: BLE001
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _libc_madvise()
#: ``madvise(2)`` advice values (None where the platform lacks them: advising is then skipped).
RANDOM_ACCESS = getattr(mmap, "MADV_RANDOM", None)
SEQUENTIAL_ACCESS = getattr(mmap, "MADV_SEQUENTIAL", None)


def advise(array: np.ndarray, advice: int | None) -> bool:
    """``madvise(2)`` the pages holding ``array`` (a memmap or a view of one); False where it
    is not possible (no such advice or call here, an empty array, an error).

    Why (measured by ``vignettes/big_data.py`` on a 30 GB memmap, half of it in the page cache):
    with the kernel's default advice every page fault of a random row reads around it, up to
    the disk's readahead window (8 MiB here: 5.5 MB read per fault), and SGLD-CV took 6.1 s per
    iteration of 1,000 random rows; advised :data:`RANDOM_ACCESS`, each fault reads its one
    page and an iteration took 64 ms, 1.35x the disk's measured random-read floor."""
    if _MADVISE is None or advice is None or array.size == 0:
        return False
    bounds = getattr(np.lib, "array_utils", np).byte_bounds(array)
    page = mmap.PAGESIZE
    start = bounds[0] - bounds[0] % page
    return _MADVISE(ctypes.c_void_p(start), ctypes.c_size_t(bounds[1] - start), advice) == 0


def is_array_like(value: Any) -> bool:
    """Whether ``value`` is read in place (a numpy array or an on-disk array-like) rather than
    converted with ``np.asarray`` (pandas, lists, tensors)."""
    if isinstance(value, np.ndarray):
        return True
    return (
        hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "__getitem__")
        and not hasattr(value, "to_numpy") and not hasattr(value, "numpy")
    )


def shared_in_place(entry: Any, dtype: Any) -> bool:
    """Whether TensorFlow can read ``entry`` in place as a CPU tensor of ``dtype``, without a
    copy: a C-contiguous, writeable numpy array already in ``dtype`` on a
    :data:`TENSOR_ALIGNMENT` boundary (what :func:`as_tensor` shares through DLPack).
    A read-only memmap, an unaligned or cast array, h5py or zarr are not."""
    return (
        isinstance(entry, np.ndarray) and entry.dtype == np.dtype(dtype) and entry.flags.c_contiguous
        and entry.flags.writeable and (entry.size == 0 or entry.ctypes.data % TENSOR_ALIGNMENT == 0)
    )


def as_tensor(array: np.ndarray) -> tf.Tensor:
    """A CPU tensor of ``array`` holding at most one copy of it, with no transient copies: the
    package's one host-array-to-tensor function (entries, blocks of minibatches).

    ``tf.convert_to_tensor`` copies a numpy array always, and at 2.2 GB its peak memory was
    the array's size twice over on top of it (benchmarks/bench_memory.py). A C-contiguous,
    writeable array on a 64-byte boundary is shared through DLPack instead (the tensor keeps
    the array alive); anything else is first copied once into such an array. On a machine
    with a GPU the data belong on the GPU, which is a copy anyway: ``tf.convert_to_tensor``."""
    if _ON_GPU[0] is None:
        _ON_GPU[0] = bool(tf.config.list_logical_devices("GPU"))
    if _ON_GPU[0] or array.size == 0:
        return tf.convert_to_tensor(array)
    if not shared_in_place(array, array.dtype):
        copy = aligned_empty(array.shape, array.dtype)
        np.copyto(copy, array)
        array = copy
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


#: Whether TensorFlow sees a GPU (asked once: listing devices costs ~10 µs a call).
_ON_GPU: list = [None]


def output_dtype(dtype: np.dtype, float_dtype: np.dtype) -> np.dtype:
    """What an entry of ``dtype`` becomes in the model: floats the model dtype, booleans int32,
    integers as they are."""
    if dtype.kind == "f":
        return np.dtype(float_dtype)
    if dtype.kind == "b":
        return np.dtype(np.int32)
    return np.dtype(dtype)


def take_rows(entry: Any, indices: np.ndarray) -> np.ndarray:
    """Rows ``indices`` (any shape) of one entry, in its own dtype (a :class:`CastEntry`: its
    reading dtype), ``[*indices.shape, *row_shape]``."""
    if isinstance(entry, CastEntry):
        return take_rows(entry.base, indices).astype(entry.dtype)
    if isinstance(entry, np.ndarray):
        return _take_from_array(entry, indices)
    if hasattr(entry, "oindex"):  # zarr
        return _take_sorted(entry, indices)
    return _take_by_spans(entry, indices)


def _rows_as_items(array: np.ndarray) -> np.ndarray | None:
    """A 1-D view of ``array`` with one ``void`` item per row, or None when a row's elements are
    not contiguous. Rows may be strided: a column slice ``data[:, 1:]`` of a C-ordered array
    qualifies (its rows are contiguous runs of the parent's)."""
    if array.ndim < 2 or array.shape[0] == 0:
        return None
    inner = array[0]
    if not inner.flags.c_contiguous:
        return None
    size = int(np.prod(array.shape[1:]))
    flat = np.lib.stride_tricks.as_strided(array, (array.shape[0], size), (array.strides[0], array.dtype.itemsize))
    return flat.view(np.uint8).view(np.dtype((np.void, size * array.dtype.itemsize)))[:, 0]


def _take_from_array(array: np.ndarray, indices: np.ndarray) -> np.ndarray:
    items = _rows_as_items(array)
    if items is not None:
        return np.asarray(items[indices]).view(array.dtype).reshape(*indices.shape, *array.shape[1:])
    return np.asarray(array[indices])


def _take_sorted(entry: Any, indices: np.ndarray) -> np.ndarray:
    """Rows of a zarr ``Array`` (anything with ``oindex``): one orthogonal selection of the
    sorted distinct rows, which zarr groups by chunk itself (each needed chunk read and decoded
    once), then put back in draw order."""
    unique, inverse = np.unique(indices, return_inverse=True)
    values = np.asarray(entry.oindex[unique])
    return values[inverse.reshape(indices.shape)]


#: Two needed rows of a store closer than this many bytes are read by one slice (reading the
#: rows between costs less than another call: ~17 µs a call against ~27 ns a 216-byte row for
#: a contiguous h5py dataset in the page cache, benchmarks/bench_h5_reads.py).
GAP_BYTES = 64 * 2**10

#: Most bytes of one read of an on-disk store's rows (one chunk of the trailing axes): bounds the
#: extra memory, and keeps the rows gathered from it in the CPU's cache (1 MB took 0.4-0.8x the
#: time of 4 MB on h5py's chunk guess for 10^6 x 54 float32, the same within noise on the other
#: layouts; benchmarks/bench_h5_reads.py).
SPAN_BYTES = 2**20


def _chunk_shape(entry: Any) -> tuple[int, ...] | None:
    """The store's chunk shape (h5py ``Dataset.chunks``; a tuple of ints), or None when it is not
    chunked (a contiguous h5py dataset) or does not say."""
    chunks = getattr(entry, "chunks", None)
    if not isinstance(chunks, tuple) or len(chunks) != len(entry.shape):
        return None
    if not all(isinstance(c, (int, np.integer)) and c > 0 for c in chunks):
        return None
    return tuple(int(c) for c in chunks)


def _pieces(shape: tuple[int, ...], chunks: tuple[int, ...] | None) -> list[tuple[slice, ...]]:
    """The parts of a row read by separate calls: one per chunk of the trailing axes, so that each
    store chunk is copied into contiguous memory. (HDF5 copying a chunk of one column into the
    column of row-major rows was ~8x slower than reading the column by itself.)"""
    if chunks is None or all(c >= s for c, s in zip(chunks[1:], shape[1:])):
        return [()]
    grids = [[slice(a, min(a + c, s)) for a in range(0, s, c)] for c, s in zip(chunks[1:], shape[1:])]
    keys: list[tuple[slice, ...]] = [()]
    for grid in grids:
        keys = [key + (part,) for key in keys for part in grid]
    return keys


def _spans(rows: np.ndarray, gap: int, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the sorted ``rows`` split into spans read by one slice each: a new span starts where
    the next needed row is more than ``gap`` rows on, and at every multiple of ``max_rows``.
    Returns the positions in ``rows`` where spans start and end."""
    new = np.empty(rows.size, bool)
    new[0] = True
    np.greater(np.diff(rows), gap, out=new[1:])
    bucket = rows // max_rows
    new[1:] |= bucket[1:] != bucket[:-1]
    starts = np.flatnonzero(new)
    return starts, np.append(starts[1:], rows.size)


def _slice_reader(entry: Any):
    """``read(first, stop, key, block)``: rows ``first:stop`` of ``entry`` at ``key`` (slices of
    the trailing axes) into ``block``. An h5py ``Dataset`` is read through its low-level
    ``DatasetID.read`` of a hyperslab (~3x less time a call than ``entry[a:b]``, whose selection
    is built in Python, and no new array); anything else by slicing."""
    dataset_id = getattr(entry, "id", None)
    if not (hasattr(dataset_id, "read") and hasattr(dataset_id, "get_space")):

        def read_slice(first: int, stop: int, key: tuple[slice, ...], block: np.ndarray) -> None:
            block[...] = np.asarray(entry[(slice(first, stop), *key)] if key else entry[first:stop])

        return read_slice
    from h5py import h5s

    space = dataset_id.get_space()

    def read(first: int, stop: int, key: tuple[slice, ...], block: np.ndarray) -> None:
        start = (first, *(k.start for k in key), *(0 for _ in block.shape[1 + len(key) :]))
        space.select_hyperslab(start, block.shape)
        dataset_id.read(h5s.create_simple(block.shape), space, block)

    return read


def _row_items(array: np.ndarray) -> np.ndarray | None:
    """``array``'s rows as a 1-D array of items: the array itself when 1-D, its elements when a
    row has one (a ``void`` of 4 bytes copied ~1.6x slower than a float32), else one ``void``
    item per row (:func:`_rows_as_items`; None when a row is not contiguous)."""
    if array.ndim == 1:
        return array
    if all(s == 1 for s in array.shape[1:]):
        return np.squeeze(array, axis=tuple(range(1, array.ndim)))
    return _rows_as_items(array)


def _take_by_spans(entry: Any, indices: np.ndarray, span_bytes: int | None = None) -> np.ndarray:
    """Rows of an on-disk store that reads slices well and scattered rows badly (h5py: its
    selection of k rows costs ~k², 20,000 rows 20 s). The requested rows are sorted (duplicates
    kept) and cut into spans of nearby rows (:func:`_spans`: the rows of one store chunk are
    always in one span, so no chunk is read twice); each span is read by one slice per chunk of
    the trailing axes (:func:`_pieces`) and its rows put where they were asked for. Time is linear
    in the rows read; the result equals numpy's ``entry[indices]``. Extra memory: the rows, and
    one piece of at most ``span_bytes`` (:data:`SPAN_BYTES`; or one store chunk, if larger)."""
    shape = tuple(int(s) for s in entry.shape)
    dtype = np.dtype(entry.dtype)
    row_shape = shape[1:]
    flat = np.asarray(indices, np.int64).reshape(-1)
    out = np.empty((flat.size, *row_shape), dtype)
    if flat.size == 0 or out.size == 0:
        return out.reshape(*np.shape(indices), *row_shape)
    order = np.argsort(flat)  # equal rows get equal values: any order among them will do
    rows = flat[order]
    if rows[0] < 0 or rows[-1] >= shape[0]:
        bad = rows[0] if rows[0] < 0 else rows[-1]
        raise IndexError(f"row {bad} is out of range for an entry of {shape[0]} rows")
    chunks = _chunk_shape(entry)
    chunk_rows = chunks[0] if chunks else 1
    pieces = _pieces(shape, chunks)
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    piece_shapes = [(*(k.stop - k.start for k in key), *row_shape[len(key) :]) for key in pieces]
    piece_size = int(np.prod(piece_shapes[0], dtype=np.int64))  # the first piece is the largest
    span_rows = max(1, (SPAN_BYTES if span_bytes is None else span_bytes) // (piece_size * dtype.itemsize))
    starts, ends = _spans(rows, max(chunk_rows, GAP_BYTES // row_bytes), -(-span_rows // chunk_rows) * chunk_rows)
    firsts, stops = rows[starts], rows[ends - 1] + 1
    buffer = np.empty(int((stops - firsts).max()) * piece_size, dtype)
    read = _slice_reader(entry)
    # a row of a piece as one item, as _row_items makes them
    sizes = [int(np.prod(p, dtype=np.int64)) for p in piece_shapes]
    items = [dtype if size == 1 else np.dtype((np.void, size * dtype.itemsize)) for size in sizes]
    if len(pieces) == 1:  # each span's rows go straight to where they were asked for
        targets = [_row_items(out)]
    else:  # each piece's rows are written into the rows in sorted order, put back at the end
        ordered = np.empty_like(out)
        targets = [_row_items(ordered[(slice(None), *key)]) for key in pieces]
    for s, e, first, stop in zip(starts.tolist(), ends.tolist(), firsts.tolist(), stops.tolist()):
        local = rows[s:e] - first
        for key, piece_shape, size, item, target in zip(pieces, piece_shapes, sizes, items, targets):
            flat_block = buffer[: (stop - first) * size]
            read(first, stop, key, flat_block.reshape(stop - first, *piece_shape))
            if len(pieces) == 1:
                target[order[s:e]] = flat_block.view(item)[local]
            elif target is None:  # a piece not contiguous within the row
                ordered[(slice(s, e), *key)] = flat_block.reshape(stop - first, *piece_shape)[local]
            else:
                target[s:e] = flat_block.view(item)[local]
    if len(pieces) > 1:
        _row_items(out)[order] = _row_items(ordered)
    return out.reshape(*np.shape(indices), *row_shape)


class CastEntry:
    """An entry read in another dtype: the model's float dtype for floats of another precision,
    int32 for booleans. It casts what is read from it (a slice, rows) and never the whole entry,
    unless converted with ``np.asarray``.

    Parameters
    ----------
    base
        The user's entry.
    dtype
        The dtype it is read in.
    """

    def __init__(self, base: Any, dtype: Any):
        self.base = base
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in base.shape)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        return np.asarray(self.base[key]).astype(self.dtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.base[:]).astype(dtype or self.dtype)


class Rows:
    """The dataset as the sampler reads it.

    Parameters
    ----------
    entries
        Name -> entry (see the module docstring), all of the same first-axis length.
    float_dtype
        The model's floating dtype (numpy), which floating entries are cast to when read.
    """

    def __init__(self, entries: dict[str, Any], float_dtype: Any):
        self.entries = {k: v.base if isinstance(v, CastEntry) else v for k, v in entries.items()}
        first = next(iter(self.entries.values()))
        self.n_rows = int(first.shape[0])
        self.dtypes = {k: output_dtype(np.dtype(v.dtype), np.dtype(float_dtype)) for k, v in self.entries.items()}
        self.row_shapes = {k: tuple(int(s) for s in v.shape[1:]) for k, v in self.entries.items()}
        for entry in self.entries.values():
            if isinstance(entry, np.memmap):  # minibatch rows are random rows (:func:`advise`)
                advise(entry, RANDOM_ACCESS)

    def as_read(self) -> dict[str, Any]:
        """Each entry as the model reads it (:attr:`dtypes`): the user's entry when it is
        already in its reading dtype, else a :class:`CastEntry` (float64 in a float32 model,
        booleans) — never a cast copy of the whole entry."""
        return {k: v if np.dtype(v.dtype) == self.dtypes[k] else CastEntry(v, self.dtypes[k]) for k, v in self.entries.items()}

    @property
    def shared_in_place(self) -> bool:
        """Whether every entry can be read as a tensor without a copy (:func:`shared_in_place`)."""
        return all(shared_in_place(v, self.dtypes[k]) for k, v in self.entries.items())

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of every entry, as the model reads it."""
        return sum(int(np.prod(s, dtype=np.int64)) * self.dtypes[k].itemsize for k, s in self.row_shapes.items())

    def take(self, indices: np.ndarray, out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The rows ``indices`` (any shape of int64 row numbers) of every entry: name ->
        ``[*indices.shape, *row_shape]`` in the model's dtypes, written into ``out`` if given."""
        result = {}
        for name, entry in self.entries.items():
            values = take_rows(entry, indices)
            if out is not None:
                np.copyto(out[name], values.reshape(out[name].shape), casting="unsafe")
                result[name] = out[name]
            else:
                result[name] = values.astype(self.dtypes[name], copy=False)
        return result

    def slice(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows ``start:stop`` of every entry (contiguous), in the model's dtypes. A memmapped
        entry's block is read while advised :data:`SEQUENTIAL_ACCESS`, then advised back to
        random access: random advice alone turns the kernel's readahead off, and a streamed pass
        over an evicted 512 MB memmap ran at 24-31 MB/s with it against 600-700 MB/s like this
        (the kernel's default: 310-660 MB/s; /tmp experiment, load ~7)."""
        blocks = {k: v[start:stop] for k, v in self.entries.items()}
        mapped = [b for b in blocks.values() if isinstance(b, np.memmap)]
        for block in mapped:
            advise(block, SEQUENTIAL_ACCESS)
        out = {
            k: np.array(b, self.dtypes[k]) if isinstance(b, np.memmap)  # read now, while advised
            else np.asarray(b).astype(self.dtypes[k], copy=False)
            for k, b in blocks.items()
        }
        for block in mapped:
            advise(block, RANDOM_ACCESS)
        return out

    def block_rows(self, block_bytes: int = BLOCK_BYTES) -> int:
        """Rows per block of a streaming pass: about ``block_bytes`` each."""
        return max(1, min(self.n_rows, block_bytes // max(1, self.row_bytes)))

    def blocks(self, block_rows: int | None = None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """``(start, rows)`` for consecutive blocks covering all rows in order."""
        size = block_rows or self.block_rows()
        for start in range(0, self.n_rows, size):
            yield start, self.slice(start, min(start + size, self.n_rows))
