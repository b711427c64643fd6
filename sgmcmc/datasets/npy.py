"""Datasets on disk as a directory of ``.npy`` files, one per entry (SPEC §11).

:func:`write_npy` converts a pandas DataFrame, a Parquet file or directory, a CSV file or a dict
of array-likes into such a directory in blocks of bounded memory; :func:`open_npy` opens it as a
dict of read-only memmaps, which every sampler takes as ``dataset`` without loading it (rows are
gathered from the files as needed). The files are written under a temporary directory that is
renamed into place at the end, so a failed conversion never leaves a directory that
:func:`open_npy` would accept.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

#: Bytes of one block read from the source and written out.
BLOCK_BYTES = 64 * 2**20


def open_npy(directory: str | os.PathLike) -> dict[str, np.memmap]:
    """Open a directory written by :func:`write_npy` (or any directory of ``NAME.npy`` files).

    Parameters
    ----------
    directory
        The directory; each ``NAME.npy`` in it becomes entry ``NAME``.

    Returns
    -------
    dict
        Name -> read-only ``np.memmap``, in name order.

    Raises
    ------
    FileNotFoundError
        The directory does not exist or holds no ``.npy`` file.
    ValueError
        The entries' first-axis lengths differ, or an entry holds Python objects.
    """
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(f"open_npy: {str(path)!r} is not a directory (write one with sgmcmc.datasets.write_npy)")
    files = sorted(path.glob("*.npy"))
    if not files:
        raise FileNotFoundError(f"open_npy: {str(path)!r} holds no .npy files (write them with sgmcmc.datasets.write_npy)")
    out = {}
    for file in files:
        try:
            out[file.stem] = np.load(file, mmap_mode="r", allow_pickle=False)
        except ValueError as error:
            raise ValueError(f"open_npy: {file.name} cannot be memory-mapped ({error}): object arrays are not data") from error
    lengths = {name: a.shape[0] if a.ndim else None for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"open_npy: the entries of {str(path)!r} have different lengths on the first axis: {lengths}")
    return out


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq") or (path.is_dir() and any(path.glob("*.parquet")))


def _columns_of(names: Sequence[str], columns: Any) -> dict[str, list[str] | str]:
    """Entry name -> the source column (a name: a 1-d entry) or columns (a list: stacked into a
    2-d entry), from ``columns`` (None: every column, each its own entry)."""
    if columns is None:
        return {name: name for name in names}
    if isinstance(columns, Mapping):
        spec = {str(k): (list(v) if not isinstance(v, str) else v) for k, v in columns.items()}
    else:
        spec = {str(c): str(c) for c in columns}
    wanted = [c for v in spec.values() for c in ([v] if isinstance(v, str) else v)]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise KeyError(f"write_npy: column(s) {missing} are not in the source (it has {list(names)[:20]})")
    return spec


def _blocks(source: Any, block_rows: int | None) -> tuple[list[str], int | None, Iterator[dict[str, np.ndarray]]]:
    """The source's column names, its row count if known, and an iterator of column blocks."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"write_npy: {str(path)!r} does not exist")
        if _is_parquet(path):
            import pyarrow.parquet as pq

            dataset = pq.ParquetDataset(path) if path.is_dir() else None
            files = [Path(f) for f in dataset.files] if dataset is not None else [path]
            if not files:
                raise FileNotFoundError(f"write_npy: {str(path)!r} holds no Parquet files")
            first = pq.ParquetFile(files[0])
            names = list(first.schema_arrow.names)
            total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            size = block_rows or max(1, BLOCK_BYTES // max(1, 8 * len(names)))

            def parquet_blocks():
                for f in files:
                    for batch in pq.ParquetFile(f).iter_batches(batch_size=size):
                        yield {n: batch.column(n).to_numpy(zero_copy_only=False) for n in batch.schema.names}

            return names, total, parquet_blocks()
        import pandas as pd

        names = list(pd.read_csv(path, nrows=0).columns)
        size = block_rows or max(1, BLOCK_BYTES // max(1, 8 * len(names)))
        return names, None, ({n: chunk[n].to_numpy() for n in chunk.columns} for chunk in pd.read_csv(path, chunksize=size))
    if hasattr(source, "columns") and hasattr(source, "iloc"):  # a pandas DataFrame
        names = [str(c) for c in source.columns]
        total = len(source)
        size = block_rows or max(1, BLOCK_BYTES // max(1, 8 * len(names)))
        frame = source

        def frame_blocks():
            for start in range(0, total, size):
                part = frame.iloc[start : start + size]
                yield {str(n): part[n] for n in part.columns}  # Series: a categorical stays one

        return names, total, frame_blocks()
    if isinstance(source, Mapping):
        names = [str(k) for k in source]
        lengths = {str(k): int(np.shape(v)[0]) if np.ndim(v) else None for k, v in source.items()}
        if len(set(lengths.values())) > 1 or None in lengths.values():
            raise ValueError(f"write_npy: the source's entries have different first-axis lengths: {lengths}")
        total = next(iter(lengths.values()))
        row_bytes = sum(
            int(np.prod(np.shape(v)[1:], dtype=np.int64)) * np.dtype(getattr(v, "dtype", np.float64)).itemsize
            for v in source.values()
        )
        size = block_rows or max(1, BLOCK_BYTES // max(1, row_bytes))
        entries = {str(k): v for k, v in source.items()}

        def dict_blocks():
            for start in range(0, total, size):
                yield {k: np.asarray(v[start : start + size]) for k, v in entries.items()}

        return names, total, dict_blocks()
    raise TypeError(
        f"write_npy: source must be a pandas DataFrame, a Parquet file or directory, a CSV file or a dict of "
        f"arrays, got {type(source).__name__}"
    )


def _check_block(name: str, column: str, raw: Any, start: int, allow_nan: bool) -> np.ndarray:
    categorical = str(getattr(raw, "dtype", "")) == "category"
    values = np.asarray(raw)
    kind = values.dtype.kind
    if kind == "b":
        return values.astype(np.int32)
    if kind not in "iuf" or categorical:
        what = "categorical" if categorical else f"dtype {values.dtype}"
        raise TypeError(
            f"write_npy: column {column!r} (entry {name!r}) is not numeric ({what}) in rows {start}–"
            f"{start + len(values) - 1}: convert it to numbers first (e.g. codes for a categorical column)"
        )
    if kind == "f" and not allow_nan:
        bad = ~np.isfinite(values)
        if bad.any():
            row = start + int(np.argmax(bad.reshape(len(values), -1).any(axis=1)))
            raise ValueError(
                f"write_npy: column {column!r} (entry {name!r}) holds NaN or Inf at row {row} (block of rows "
                f"{start}–{start + len(values) - 1}): remove or impute those rows, or pass allow_nan=True"
            )
    return values


def write_npy(
    source: Any,
    directory: str | os.PathLike,
    columns: Sequence[str] | Mapping[str, Sequence[str] | str] | None = None,
    block_rows: int | None = None,
    *,
    float_dtype: Any = np.float32,
    allow_nan: bool = False,
    overwrite: bool = False,
    verbose: bool = True,
) -> dict[str, np.memmap]:
    """Write a dataset as a directory of ``.npy`` files, one per entry, in blocks of bounded memory.

    Parameters
    ----------
    source
        A pandas DataFrame; a path to a Parquet file or a directory of Parquet files (read one
        record batch at a time with pyarrow); a path to a CSV file (read in chunks); or a dict of
        array-likes with a common first axis (numpy, memmap, h5py, zarr).
    directory
        Where to write; must not exist yet unless ``overwrite``.
    columns
        None: every column is an entry of its own. A list of column names: those entries, in that
        order. A dict ``entry -> column`` or ``entry -> [columns]``: a list of columns is stacked
        into one 2-d entry (e.g. ``{"X": ["f1", "f2"], "y": "label"}``).
    block_rows
        Rows per block; default about 64 MB of source columns per block.
    float_dtype
        The dtype floating columns are written in (float32 by default: the samplers' default).
    allow_nan
        Write NaN/Inf instead of refusing them.
    overwrite
        Replace an existing ``directory``.
    verbose
        A progress bar over rows.

    Returns
    -------
    dict
        :func:`open_npy` of the written directory.

    Raises
    ------
    FileExistsError, FileNotFoundError, KeyError, TypeError, ValueError
        An existing directory, a missing source, an unknown column, a non-numeric column or a
        NaN (the block's rows and the column named), entries of different lengths. Nothing is
        left at ``directory`` when writing fails.
    """
    target = Path(directory)
    if target.exists() and not overwrite:
        raise FileExistsError(f"write_npy: {str(target)!r} exists; choose another directory or pass overwrite=True")
    names, total, blocks = _blocks(source, block_rows)
    spec = _columns_of(names, columns)
    temporary = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    parts: dict[str, list[Path]] = {name: [] for name in spec}
    written = 0
    bar = tqdm(total=total, desc="write_npy", unit="rows", unit_scale=True, disable=not verbose)
    try:
        for block in blocks:
            length = len(next(iter(block.values())))
            for name, cols in spec.items():
                if isinstance(cols, str):
                    values = _check_block(name, cols, block[cols], written, allow_nan)
                else:
                    checked = [_check_block(name, c, block[c], written, allow_nan) for c in cols]
                    values = np.stack(checked, axis=1)
                if values.dtype.kind == "f":
                    values = values.astype(float_dtype, copy=False)
                part = temporary / f"{name}.{len(parts[name]):06d}.part.npy"
                np.save(part, values)
                parts[name].append(part)
            written += length
            bar.update(length)
        for name, files in parts.items():
            _concatenate(files, temporary / f"{name}.npy", written)
        if target.exists():
            shutil.rmtree(target)
        temporary.rename(target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    finally:
        bar.close()
    return open_npy(target)


def _concatenate(parts: list[Path], out: Path, n_rows: int) -> None:
    """Join the block files of one entry into ``out`` (preallocated, filled part by part), then
    delete the parts: disk holds at most the entry twice, memory one part."""
    first = np.load(parts[0], mmap_mode="r")
    result = np.lib.format.open_memmap(out, mode="w+", dtype=first.dtype, shape=(n_rows, *first.shape[1:]))
    start = 0
    for part in parts:
        values = np.load(part, mmap_mode="r")
        if values.dtype != first.dtype:
            raise TypeError(f"write_npy: entry {out.stem!r} changes dtype between blocks ({first.dtype} then {values.dtype})")
        result[start : start + len(values)] = values
        start += len(values)
        del values
        part.unlink()
    result.flush()
    del result
