"""Datasets on disk as a directory of ``.npy`` files, one per entry, opened as memmaps.

``open_npy(directory)`` gives ``{name: np.memmap}`` for every ``NAME.npy`` in a directory:
a ``dataset`` argument of the samplers whose rows stay on disk until they are read.
``write_npy(source, directory)`` makes such a directory from a pandas DataFrame, a Parquet
file or directory of Parquet files, a CSV file, or a dict of array-likes (numpy arrays,
memmaps, h5py datasets), reading and writing ``block_rows`` rows at a time so that data far
larger than memory can be converted.

How a write works. Each entry is written sequentially to an ``.npy`` file in a temporary
directory beside ``directory`` (``.NAME.partial-<pid>``): a fixed-size header first, holding a
placeholder length of 999,999,999,999,999,999 rows, then the rows block by block; when every
row is written the headers are rewritten with the number of rows and the temporary directory
is renamed to ``directory`` (one ``rename``, so the entries appear together). The number of
rows need not be known in advance (a CSV file is read once, never counted first). A write that
fails or is interrupted removes its temporary directory; one that is killed leaves it behind,
but no file there has its length yet, so :func:`open_npy` refuses it.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

__all__ = ["open_npy", "write_npy", "BLOCK_BYTES"]

#: Default size of one block of output rows; ``block_rows`` defaults to this many bytes' worth.
#: The writer's peak extra memory is a few blocks (the source's block, its conversion, the
#: stacked entries) plus, for Parquet, what pyarrow holds of the row group being read.
#: Measured (benchmarks/bench_write_npy.py, 2*10^6 x 76 float32): 16 MiB blocks gave the best
#: rate, and 64 MiB blocks were 2-3x slower (every block a fresh mmap'ed allocation).
BLOCK_BYTES = 16 * 2**20

#: Bytes of an ``.npy`` header as written here (a multiple of 64, so rows start aligned).
_HEADER_BYTES = 128
#: The length written into the header until the last row is in (never a real length).
_PLACEHOLDER_ROWS = 999_999_999_999_999_999
_MAGIC = b"\x93NUMPY\x01\x00"


# == reading ====================================================================================

def open_npy(directory: str | os.PathLike) -> dict[str, np.memmap]:
    """Open a directory of ``.npy`` files as a dataset of read-only memmaps.

    Parameters
    ----------
    directory : str or os.PathLike
        A directory holding one ``NAME.npy`` file per dataset entry (as written by
        :func:`write_npy`, or by ``np.save``). Other files are ignored.

    Returns
    -------
    dict of str to np.memmap
        ``{NAME: np.load(path, mmap_mode="r")}`` sorted by name. Nothing is read until it is
        indexed; pass the dict as the samplers' ``dataset``.

    Raises
    ------
    FileNotFoundError
        The directory does not exist or holds no ``.npy`` file.
    NotADirectoryError
        ``directory`` is a file.
    ValueError
        An entry is not a complete ``.npy`` file (a write that did not finish), is a scalar, or
        the entries' first-axis lengths differ (all are named with their lengths).
    TypeError
        An entry has an object dtype (Python objects cannot be memory-mapped).
    """
    path = Path(directory)
    if not path.exists():
        raise FileNotFoundError(f"open_npy: no directory {str(path)!r}; make one with sgmcmc.datasets.write_npy")
    if not path.is_dir():
        raise NotADirectoryError(
            f"open_npy: {str(path)!r} is a file, not a directory of .npy files (one per dataset entry); "
            "for a single array use np.load(path, mmap_mode='r')"
        )
    files = sorted(p for p in path.iterdir() if p.suffix == ".npy" and p.is_file())
    if not files:
        others = sorted(p.name for p in path.iterdir())[:10]
        raise FileNotFoundError(
            f"open_npy: no .npy files in {str(path)!r} (it holds {others or 'nothing'}); convert a "
            "DataFrame, Parquet or CSV source with sgmcmc.datasets.write_npy(source, directory)"
        )
    out: dict[str, np.memmap] = {}
    for file in files:
        out[file.stem] = _open_one(file)
    lengths = {name: len(array) for name, array in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"open_npy: the entries in {str(path)!r} have different first-axis lengths {lengths}: every "
            "entry must hold one row per observation; remove or rewrite the odd ones"
        )
    return out


def _open_one(file: Path) -> np.memmap:
    """``np.load(file, mmap_mode="r")`` with messages that name the file and the fix."""
    try:
        array = np.load(file, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        text = str(error)
        if "Object arrays" in text or "Python objects" in text or "pickle" in text.lower():
            raise TypeError(
                f"open_npy: {file.name} holds Python objects (object dtype), which cannot be memory-mapped: "
                "save numbers instead (e.g. categories as integer codes)"
            ) from error
        raise ValueError(
            f"open_npy: {file.name} is not a complete .npy file ({text}): a write that did not finish? "
            "Write the directory again"
        ) from error
    except (OverflowError, OSError) as error:
        raise ValueError(
            f"open_npy: {file.name} is not a complete .npy file ({error}): a write that did not finish? "
            "Write the directory again"
        ) from error
    if array.dtype.hasobject:  # np.load refuses these first, but be explicit
        raise TypeError(f"open_npy: {file.name} has object dtype {array.dtype}: save numbers instead")
    if array.ndim == 0:
        raise ValueError(
            f"open_npy: {file.name} is a scalar: observations lie on the first axis, so every entry needs one"
        )
    if len(array) == _PLACEHOLDER_ROWS:
        raise ValueError(f"open_npy: {file.name} was never finished; write the directory again")
    return array


# == writing ====================================================================================

def write_npy(
    source: Any,
    directory: str | os.PathLike,
    columns: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
    block_rows: int | None = None,
    dtype: str | np.dtype | None = "float32",
    allow_nan: bool = False,
    overwrite: bool = False,
    csv_options: Mapping[str, Any] | None = None,
    verbose: bool = True,
) -> dict[str, np.memmap]:
    """Write a dataset as a directory of ``.npy`` files, block by block, and open it.

    Parameters
    ----------
    source : pandas.DataFrame, str, os.PathLike or dict of array-likes
        Where the rows come from. A DataFrame (each column a source column); a path to a
        ``.parquet`` file or to a directory of ``*.parquet`` files (concatenated in name order,
        read by batches with pyarrow, never whole); a path to a ``.csv`` / ``.txt`` / ``.tsv``
        file (read with ``pandas.read_csv`` in chunks); or a mapping (dict, h5py ``File`` or
        ``Group``) of name -> array-like with ``.shape``, ``.dtype`` and slicing on the first
        axis (numpy arrays, memmaps, h5py ``Dataset``, zarr ``Array``), each a source column.
    directory : str or os.PathLike
        The output directory; it must not exist yet unless ``overwrite=True``. Entries appear
        in it together when every row is written (see the module docstring).
    columns : list of str, dict or None
        Which entries to write. None: one entry per source column, named after it. A list:
        those source columns only, in that order, one entry each. A dict maps an entry name to
        a source column (a 1-D entry, or the array's own shape for array sources) or to a list
        of source columns stacked side by side into one 2-D entry of shape (N, total width),
        e.g. ``{"X": ["f1", "f2", "f3"], "y": "label"}``; in a stack a 1-D column adds one
        column and a 2-D array of shape (N, k) adds k. A list of one column gives shape (N, 1).
    block_rows : int, optional
        Rows read, converted and written at a time. Default: as many as fit in
        :data:`BLOCK_BYTES` (16 MiB) of output; the writer's peak extra memory is a few blocks,
        plus for Parquet about one row group (pyarrow decodes a row group's columns whole).
        Parquet batches never span two files, so a block may be shorter.
    dtype : str, np.dtype or None
        Floating entries are cast to this (default ``"float32"``, the samplers' default model
        dtype, which halves the disk and memory of float64 sources and spares the sampler a
        cast). None keeps each source's float dtype. Integer entries always keep their dtype;
        booleans become int32 (as the samplers treat dataset entries). A stack of integer and
        float columns is a floating entry.
    allow_nan : bool
        False (default): a NaN or Inf in a floating column (a missing value in a Parquet
        column, an empty CSV field) is refused, naming the row and column. True writes it.
        Missing values in integer columns are always refused.
    overwrite : bool
        Replace an existing ``directory`` (only once the new one is complete).
    csv_options : dict, optional
        Extra keyword arguments for ``pandas.read_csv`` (``sep``, ``header``, ``dtype``, ...).
        A CSV column's dtype is the one pandas infers from the first 1,000 rows; a later block
        that does not fit it (text, or non-integer values in an integer column) is refused, and
        ``csv_options={"dtype": {"col": "float64"}}`` is the fix.
    verbose : bool
        Show a progress bar (rows written).

    Returns
    -------
    dict of str to np.memmap
        :func:`open_npy` of the new directory.

    Raises
    ------
    FileNotFoundError
        The source file or directory does not exist, or a Parquet directory holds no
        ``*.parquet`` file.
    FileExistsError
        ``directory`` exists and ``overwrite`` is False.
    KeyError
        A requested source column does not exist (the available ones are listed).
    TypeError
        A column is not numeric (string, categorical, date, ...): its name and dtype are given;
        convert it to numbers first (e.g. ``df[c].astype("category").cat.codes``).
    ValueError
        Source columns of different lengths, a NaN/Inf (unless ``allow_nan``) or a missing
        value in an integer column (the block's rows, the row and the column are named), a
        stack of arrays with more than two dimensions, or a bad entry name.

    Notes
    -----
    Checks that need only the schema (columns, dtypes, lengths) run before anything is
    written; checks of values run on each block as it is read, and a refusal leaves nothing
    behind. Each output row is written once, sequentially, with buffered file writes.
    """
    out_dir = Path(directory)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(
            f"write_npy: {str(out_dir)!r} exists; pass overwrite=True to replace it, or choose another directory"
        )
    if block_rows is not None and (isinstance(block_rows, bool) or not isinstance(block_rows, (int, np.integer))
                                   or block_rows < 1):
        raise ValueError(f"write_npy: block_rows must be a positive integer, got {block_rows!r}")
    float_dtype = None if dtype is None else np.dtype(dtype)
    if float_dtype is not None and float_dtype.kind != "f":
        raise TypeError(f"write_npy: dtype is the dtype of floating entries, so a float dtype or None; got {dtype!r}")

    src = _make_source(source, csv_options)
    plan = _plan(src, columns, float_dtype)
    row_bytes = sum(max(1, e.dtype.itemsize * int(np.prod(e.row_shape))) for e in plan)
    n_block = int(block_rows) if block_rows is not None else max(1, BLOCK_BYTES // row_bytes)

    tmp = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    writers: list[_NpyWriter] = []
    try:
        writers = [_NpyWriter(tmp / f"{e.name}.npy", e.dtype, e.row_shape) for e in plan]
        done = 0
        with tqdm(total=src.n_rows, desc=f"write_npy {out_dir.name}", unit="rows", unit_scale=True,
                  disable=not verbose, dynamic_ncols=True) as bar:
            for start, block in src.blocks(sorted({c for e in plan for c in e.sources}), n_block):
                if start != done:  # a source bug, not a user error
                    raise RuntimeError(f"write_npy: block starts at row {start}, expected {done}")
                n = _block_length(block, start)
                for entry, writer in zip(plan, writers):
                    writer.write(entry.build(block, start, n, allow_nan))
                done += n
                bar.update(n)
        if done == 0:
            raise ValueError(f"write_npy: {src.what} has no rows: there is nothing to sample from")
        if src.n_rows is not None and done != src.n_rows:
            raise ValueError(f"write_npy: the source announced {src.n_rows} rows but gave {done}")
        for writer in writers:
            writer.finish(done)
        writers = []
        _move_into_place(tmp, out_dir)
    except BaseException:
        for writer in writers:
            writer.abandon()
        _discard(tmp)
        raise
    return open_npy(out_dir)


def _discard(tmp: Path) -> None:
    """Remove a temporary directory (a failed write's)."""
    shutil.rmtree(tmp, ignore_errors=True)


def _move_into_place(tmp: Path, out_dir: Path) -> None:
    """Rename the finished temporary directory to ``out_dir``, replacing an old one last."""
    if out_dir.exists():
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out_dir)


def _block_length(block: dict[str, np.ndarray], start: int) -> int:
    lengths = {name: len(values) for name, values in block.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"write_npy: in the block starting at row {start} the source columns have different lengths "
            f"{lengths}: every column must hold one value per row"
        )
    return next(iter(lengths.values()))


class _NpyWriter:
    """One ``.npy`` file written sequentially: a placeholder header, rows, the real header."""

    def __init__(self, path: Path, dtype: np.dtype, row_shape: tuple[int, ...]) -> None:
        self.path, self.dtype, self.row_shape = path, dtype, row_shape
        self.file = open(path, "wb")
        self.file.write(_npy_header(dtype, (_PLACEHOLDER_ROWS, *row_shape)))

    def write(self, rows: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(rows, dtype=self.dtype).data)

    def finish(self, n_rows: int) -> None:
        self.file.flush()
        self.file.seek(0)
        self.file.write(_npy_header(self.dtype, (n_rows, *self.row_shape)))
        self.file.close()

    def abandon(self) -> None:
        self.file.close()


def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version-1.0 ``.npy`` header padded to :data:`_HEADER_BYTES` (so it can be rewritten)."""
    text = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (np.lib.format.dtype_to_descr(dtype), shape)
    body = _HEADER_BYTES - len(_MAGIC) - 2
    if len(text) + 1 > body:
        raise ValueError(f"write_npy: an entry of shape {shape} needs a longer .npy header than {_HEADER_BYTES} bytes")
    text = text + " " * (body - len(text) - 1) + "\n"
    return _MAGIC + struct.pack("<H", body) + text.encode("latin1")


# == the plan: which source columns make which entry ============================================

class _Entry:
    """One output entry: its name, source columns, dtype and row shape; builds its blocks."""

    def __init__(self, name: str, sources: list[str], stacked: bool, dtype: np.dtype,
                 row_shape: tuple[int, ...], widths: list[int]) -> None:
        self.name, self.sources, self.stacked = name, sources, stacked
        self.dtype, self.row_shape, self.widths = dtype, row_shape, widths

    def build(self, block: dict[str, np.ndarray], start: int, n: int, allow_nan: bool) -> np.ndarray:
        if not self.stacked:
            values = _convert(block[self.sources[0]], self.sources[0], self.dtype, start, allow_nan)
            return values
        out = np.empty((n, *self.row_shape), self.dtype)
        at = 0
        for column, width in zip(self.sources, self.widths):
            values = _convert(block[column], column, self.dtype, start, allow_nan)
            out[:, at : at + width] = values.reshape(n, width)
            at += width
        return out


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or os.sep in name:
        raise ValueError(
            f"write_npy: entry name {name!r} cannot be a file name: use a non-empty name without '/' that "
            "does not start with '.'"
        )
    return name


def _entry_dtype(dtypes: list[np.dtype], float_dtype: np.dtype | None) -> np.dtype:
    """The entry dtype of source columns: bool -> int32, ints kept, floats -> ``float_dtype``."""
    kinds = [np.dtype(np.int32) if d.kind == "b" else d for d in dtypes]
    result = np.result_type(*kinds)
    if result.kind == "f" and float_dtype is not None:
        result = float_dtype
    return result.newbyteorder("=")


def _plan(src: _Source, columns: Any, float_dtype: np.dtype | None) -> list[_Entry]:
    """Entries from ``columns`` (see :func:`write_npy`), checked against the source's schema."""
    if columns is None:
        spec: dict[str, Any] = {str(c): c for c in src.columns}
    elif isinstance(columns, Mapping):
        spec = dict(columns)
    elif isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
        raise TypeError(
            f"write_npy: columns must be None, a list of source columns or a dict of entry name -> "
            f"column(s); got {type(columns).__name__}"
        )
    else:
        spec = {str(c): c for c in columns}
    if not spec:
        raise ValueError("write_npy: columns selects nothing: give at least one column")
    wanted = [c for cols in spec.values() for c in (list(cols) if _is_stack(cols) else [cols])]
    missing = [c for c in wanted if c not in src.columns]
    if missing:
        shown = list(src.columns)[:20]
        raise KeyError(
            f"write_npy: {src.what} has no column(s) {missing}; it has {shown}"
            + (" ..." if len(src.columns) > 20 else "")
        )
    plan = []
    for name, cols in spec.items():
        _check_name(str(name))
        stacked = _is_stack(cols)
        sources = list(cols) if stacked else [cols]
        if stacked and not sources:
            raise ValueError(f"write_npy: entry {name!r} stacks no columns")
        for c in sources:
            _check_numeric(src.dtype_of(c), c, src.what)
        dtype = _entry_dtype([src.dtype_of(c) for c in sources], float_dtype)
        if not stacked:
            plan.append(_Entry(str(name), sources, False, dtype, src.row_shape_of(cols), [1]))
            continue
        widths = []
        for c in sources:
            shape = src.row_shape_of(c)
            if len(shape) > 1:
                raise ValueError(
                    f"write_npy: entry {name!r} stacks column {c!r} of row shape {shape}; only 1-D columns and "
                    "2-D arrays (N, k) can be stacked side by side: write it as its own entry"
                )
            widths.append(shape[0] if shape else 1)
        plan.append(_Entry(str(name), sources, True, dtype, (sum(widths),), widths))
    return plan


def _is_stack(cols: Any) -> bool:
    """A list or tuple of source columns makes one stacked entry; anything else is one column."""
    return isinstance(cols, (list, tuple))


def _check_numeric(dtype: Any, column: str, what: str) -> None:
    """Refuse a non-numeric source column up front, naming it, its dtype and the fix."""
    kind = getattr(dtype, "kind", None)
    if isinstance(dtype, np.dtype) and kind in "biuf":
        return
    hint = "convert it to numbers first"
    name = str(dtype)
    if "categor" in name or "dictionary" in name:
        hint = "store its integer codes instead, e.g. df[c].cat.codes"
    elif kind in ("O", "U", "S", "T") or "str" in name or "object" in name:
        hint = "if it holds categories store integer codes, e.g. df[c].astype('category').cat.codes"
    elif kind in ("M", "m") or "date" in name or "time" in name:
        hint = "store numbers instead, e.g. seconds since an epoch as int64"
    elif kind == "c":
        hint = "store the real and imaginary parts as two columns"
    raise TypeError(f"write_npy: column {column!r} of {what} is not numeric (dtype {name}): {hint}")


def _convert(values: np.ndarray, column: str, dtype: np.dtype, start: int, allow_nan: bool) -> np.ndarray:
    """One block of one source column in the entry's dtype, refusing what does not fit."""
    values = np.asarray(values)
    rows = f"rows {start}-{start + len(values) - 1}"
    if values.dtype.kind not in "biuf":
        raise TypeError(
            f"write_npy: column {column!r} is not numeric in the block of {rows} (dtype {values.dtype}, "
            f"e.g. {_first_text(values)!r}): clean the source, or read the column as text and convert it"
        )
    if dtype.kind in "iu" and values.dtype.kind == "f":
        ok = np.isfinite(values) & (values == np.round(values))
        if not ok.all():
            bad = _first_false(ok)
            raise ValueError(
                f"write_npy: column {column!r} is an integer column, but in the block of {rows} row "
                f"{start + bad[0]} holds {values[bad].item()!r} (missing or not an integer): fill it, or make "
                f"the column floating (for a CSV: csv_options={{'dtype': {{{column!r}: 'float64'}}}})"
            )
    with np.errstate(over="ignore"):  # a float64 beyond float32's range: reported just below
        out = values.astype(dtype, copy=False)
    if dtype.kind == "f" and not allow_nan:
        finite = np.isfinite(out)
        if not finite.all():
            bad = _first_false(finite)
            raise ValueError(
                f"write_npy: column {column!r} holds {values[bad].item()!r} at row {start + bad[0]} (block of {rows})"
                + (f" (Inf after the cast to {dtype})" if np.isfinite(values[bad]) else "")
                + ": remove or impute it, or pass allow_nan=True"
            )
    return out


def _first_false(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmin(mask.ravel())), mask.shape))


def _first_text(values: np.ndarray) -> Any:
    for v in values.ravel():
        if isinstance(v, (str, bytes)):
            return v
    return values.ravel()[0] if values.size else None


# == sources =====================================================================================

class _Source:
    """Rows of named columns: names, dtypes and row shapes up front, then blocks of rows."""

    what: str
    columns: list
    n_rows: int | None

    def dtype_of(self, column: str) -> Any:
        raise NotImplementedError

    def row_shape_of(self, column: str) -> tuple[int, ...]:
        return ()

    def blocks(self, columns: list[str], block_rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        raise NotImplementedError


def _make_source(source: Any, csv_options: Mapping[str, Any] | None) -> _Source:
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return _FrameSource(source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"write_npy: no file or directory {str(path)!r}")
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
            if not files:
                raise FileNotFoundError(
                    f"write_npy: directory {str(path)!r} holds no *.parquet file (a directory source is a "
                    "Parquet dataset)"
                )
            return _ParquetSource(files)
        if path.suffix in (".parquet", ".pq"):
            return _ParquetSource([path])
        if path.suffix in (".csv", ".txt", ".tsv") or path.name.endswith((".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")):
            return _CsvSource(path, dict(csv_options or {}))
        raise ValueError(
            f"write_npy: cannot tell the format of {str(path)!r} from its name: use a .parquet or .csv file, "
            "a directory of .parquet files, or load it yourself and pass a DataFrame or a dict of arrays"
        )
    if isinstance(source, Mapping):
        return _ArraysSource(source)
    raise TypeError(
        f"write_npy: source must be a pandas DataFrame, a Parquet/CSV path, a directory of Parquet files or a "
        f"dict of arrays; got {type(source).__name__}"
    )


class _FrameSource(_Source):
    def __init__(self, frame: Any) -> None:
        self.frame, self.what = frame, "the DataFrame"
        self.columns, self.n_rows = list(frame.columns), len(frame)
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"write_npy: the DataFrame has repeated column names {self.columns}")

    def dtype_of(self, column: str) -> Any:
        dtype = self.frame[column].dtype
        numpy_dtype = getattr(dtype, "numpy_dtype", None)  # pandas' nullable Int64, Float32, boolean
        if not isinstance(dtype, np.dtype) and isinstance(numpy_dtype, np.dtype) and numpy_dtype.kind in "biuf":
            return numpy_dtype
        return dtype

    def blocks(self, columns: list[str], block_rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for start in range(0, self.n_rows, block_rows):
            part = self.frame.iloc[start : start + block_rows]
            yield start, {c: _series_values(part[c], self.dtype_of(c)) for c in columns}


def _series_values(series: Any, dtype: np.dtype) -> np.ndarray:
    """A pandas column's values; a nullable column's missing values become NaN (refused later
    for integer columns, and for floats unless ``allow_nan``)."""
    if isinstance(series.dtype, np.dtype):
        return series.to_numpy()
    if series.hasnans:
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    return series.to_numpy(dtype=dtype)


class _ArraysSource(_Source):
    def __init__(self, arrays: Mapping) -> None:
        self.arrays, self.what = {}, "the dict of arrays"
        for name, value in arrays.items():
            if not (hasattr(value, "shape") and hasattr(value, "dtype")):
                if hasattr(value, "keys"):  # an h5py group inside a file
                    continue
                value = np.asarray(value)
            if len(value.shape) == 0:
                raise ValueError(
                    f"write_npy: source entry {name!r} is a scalar: observations lie on the first axis"
                )
            self.arrays[name] = value
        if not self.arrays:
            raise ValueError("write_npy: the dict of arrays is empty")
        self.columns = list(self.arrays)
        lengths = {name: int(a.shape[0]) for name, a in self.arrays.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"write_npy: the source arrays have different first-axis lengths {lengths}: every array must hold "
                "one row per observation"
            )
        self.n_rows = next(iter(lengths.values()))

    def dtype_of(self, column: str) -> Any:
        return np.dtype(self.arrays[column].dtype)

    def row_shape_of(self, column: str) -> tuple[int, ...]:
        return tuple(int(s) for s in self.arrays[column].shape[1:])

    def blocks(self, columns: list[str], block_rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for start in range(0, self.n_rows, block_rows):
            stop = min(start + block_rows, self.n_rows)
            yield start, {c: np.asarray(self.arrays[c][start:stop]) for c in columns}


class _ParquetSource(_Source):
    def __init__(self, files: list[Path]) -> None:
        import pyarrow.parquet as pq

        self.files = files
        self.what = f"the Parquet file {str(files[0])!r}" if len(files) == 1 else f"the Parquet files in {str(files[0].parent)!r}"
        self.schema = pq.read_schema(files[0])
        self.n_rows = 0
        for file in files:
            meta = pq.ParquetFile(file).metadata
            schema = meta.schema.to_arrow_schema()
            if schema.names != self.schema.names or schema.types != self.schema.types:
                raise ValueError(
                    f"write_npy: {file.name} has columns {_schema_text(schema)}, but {files[0].name} has "
                    f"{_schema_text(self.schema)}: every Parquet file of a directory must have the same columns"
                )
            self.n_rows += meta.num_rows
        self.columns = list(self.schema.names)

    def dtype_of(self, column: str) -> Any:
        import pyarrow as pa

        arrow = self.schema.field(column).type
        if pa.types.is_boolean(arrow) or pa.types.is_integer(arrow) or pa.types.is_floating(arrow):
            return np.dtype(arrow.to_pandas_dtype())
        return arrow

    def blocks(self, columns: list[str], block_rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        import pyarrow.parquet as pq

        start = 0
        for file in self.files:
            with pq.ParquetFile(file, pre_buffer=False) as reader:  # pre_buffer held ~80 MB more
                for batch in reader.iter_batches(batch_size=block_rows, columns=columns, use_threads=False):
                    block = {}
                    for c in columns:
                        array = batch.column(c)
                        if array.null_count and self.dtype_of(c).kind != "f":
                            at = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
                            raise ValueError(
                                f"write_npy: column {c!r} has a missing value (null) at row {start + at} (file "
                                f"{file.name}, block of rows {start}-{start + len(batch) - 1}): fill it"
                            )
                        block[c] = array.to_numpy(zero_copy_only=False)
                    yield start, block
                    start += len(batch)


def _schema_text(schema: Any) -> str:
    return "[" + ", ".join(f"{n}: {t}" for n, t in zip(schema.names, schema.types)) + "]"


class _CsvSource(_Source):
    """A CSV file read in chunks; column dtypes are pandas' inference from the first 1,000 rows."""

    def __init__(self, path: Path, options: dict[str, Any]) -> None:
        import pandas as pd

        for key in ("chunksize", "iterator", "usecols", "nrows"):
            if key in options:
                raise ValueError(f"write_npy: csv_options may not set {key!r}; use columns= and block_rows=")
        self.path, self.options, self.what = path, options, f"the CSV file {str(path)!r}"
        self.n_rows = None  # read once, never counted first
        self.head = pd.read_csv(path, nrows=1000, **options)
        self.columns = list(self.head.columns)

    def dtype_of(self, column: str) -> Any:
        return self.head[column].dtype

    def blocks(self, columns: list[str], block_rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        import pandas as pd

        with pd.read_csv(self.path, chunksize=block_rows, usecols=columns, **self.options) as reader:
            start = 0
            for chunk in reader:
                yield start, {c: chunk[c].to_numpy() for c in columns}
                start += len(chunk)
