"""Checks of datasets: entries kept where they are (SPEC §11), categorical columns refused,
non-finite rows named, unequal lengths refused. How the model reads the entries (their dtype,
casts of the rows read) is :mod:`sgmcmc.data.rows`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..data.rows import is_array_like


def _entries(dataset: Any) -> Mapping:
    """The entries of ``dataset``: a mapping as it is, or a pandas DataFrame's columns."""
    if isinstance(dataset, Mapping):
        return dataset
    columns = getattr(dataset, "columns", None)
    if columns is not None and hasattr(dataset, "to_numpy"):  # a pandas DataFrame
        names = list(columns)
        bad = [c for c in names if not isinstance(c, str)]
        if bad:
            raise TypeError(
                f"dataset is a DataFrame whose column names {bad[:5]} are not strings: the columns are the "
                "entries log_lik reads by name, so rename them (e.g. df.columns = [str(c) for c in df.columns])"
            )
        if len(set(names)) != len(names):
            repeated = sorted({c for c in names if names.count(c) > 1})
            raise ValueError(f"dataset is a DataFrame with repeated column names {repeated}: make them unique")
        return {name: dataset[name] for name in names}
    raise TypeError(
        f"dataset must be a dict of name -> array (or a pandas DataFrame), got {type(dataset).__name__}"
    )


def _first_non_finite_row(array: Any, chunk_rows: int) -> int | None:
    """The first row of ``array`` holding NaN or Inf, or None.

    For a numpy array (a memmap too) ``min`` and ``max`` propagate NaN and expose ±Inf without
    a temporary the size of the data; only if they are not finite is the offending row looked
    for. Other array-likes (h5py, zarr) are read block by block."""
    if isinstance(array, np.ndarray) and np.isfinite(array.min()) and np.isfinite(array.max()):
        return None
    for start in range(0, int(array.shape[0]), chunk_rows):
        finite = np.isfinite(np.asarray(array[start : start + chunk_rows]))
        rows = finite.reshape(len(finite), -1).all(axis=1)
        if not rows.all():
            return start + int(np.argmin(rows))
    return None


#: Bytes per chunk when a dataset entry is scanned for the row holding NaN or Inf.
SCAN_CHUNK_BYTES = 1 << 24


def _refuse_categorical(name: str, value: Any) -> None:
    """A pandas categorical entry (a ``pd.Categorical`` column, Series or array) is refused by
    name: as numpy it is its categories' values (strings: dtype object), not labels."""
    dtype = getattr(value, "dtype", None)
    if type(dtype).__name__ != "CategoricalDtype":
        return
    categories = list(dtype.categories)
    shown = ", ".join(repr(c) for c in categories[:5]) + (", ..." if len(categories) > 5 else "")
    raise TypeError(
        f"dataset[{name!r}] is a pandas Categorical with {len(categories)} categories ({shown}): pass "
        f"0-based integer labels, e.g. df[{name!r}].cat.codes.to_numpy() (code k is the k-th category), "
        f"or its values converted to numbers if they are numbers"
    )


def _as_entry(value: Any) -> Any:
    """The user's entry as something read in place: numpy arrays (memmaps included) and
    on-disk array-likes (h5py, zarr) as they are; pandas, tensors and lists as numpy arrays."""
    if is_array_like(value):
        return value
    if hasattr(value, "to_numpy"):
        return value.to_numpy()
    return np.asarray(value)


def check_dataset(dataset: Any) -> dict[str, Any]:
    """The dataset's entries, checked, without copying any of them (SPEC §11).

    ``dataset`` is a dict of name -> array-like (numpy, ``np.memmap``, h5py ``Dataset``, zarr
    ``Array``, pandas Series, tf tensor) or a pandas DataFrame (each column an entry). Numpy
    arrays and on-disk array-likes come back as the same objects (``np.shares_memory``);
    pandas columns, tensors and lists as numpy arrays. Refused: an empty dataset, scalars,
    categorical or non-numeric entries, NaN/Inf (the first row named), unequal lengths. The
    NaN/Inf check reads each float entry once, in blocks, and allocates nothing the size of the
    data. :meth:`sgmcmc.data.rows.Rows.as_read` then says how the model reads them."""
    entries = _entries(dataset)
    if not entries:
        raise ValueError("dataset is empty: give at least one entry, e.g. dataset={'x': x}")
    out = {}
    for name, value in entries.items():
        _refuse_categorical(name, value)
        array = _as_entry(value)
        if len(array.shape) == 0:
            raise ValueError(
                f"dataset[{name!r}] is a scalar: observations lie on the first axis, so every entry needs one"
            )
        kind = np.dtype(array.dtype).kind
        if kind == "f":
            row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * np.dtype(array.dtype).itemsize)
            bad = _first_non_finite_row(array, max(1, SCAN_CHUNK_BYTES // row_bytes))
            if bad is not None:
                raise ValueError(
                    f"dataset[{name!r}] contains NaN or Inf (first at row {bad}): remove or impute those rows"
                )
        elif kind not in "iub":
            raise TypeError(f"dataset[{name!r}] is not numeric (dtype {array.dtype}): convert it to numbers")
        out[name] = array
    lengths = {name: int(a.shape[0]) for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"dataset entries have different lengths on the first axis {lengths}: every entry must hold "
            "one row per observation"
        )
    return out
