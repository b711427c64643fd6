"""Checks of datasets: entries kept where they are (SPEC §11), categorical columns refused,
non-finite rows named, unequal lengths refused. How the model reads the entries (their dtype,
casts of the rows read) is :mod:`sgmcmc.data.rows`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from ..data.rows import is_array_like
from ..data.stream import is_batch_stream
from .arguments import batch_size, check_count

#: Who takes a tf.data dataset: the samplers whose estimator is the plain minibatch estimate.
BATCH_STREAM_SAMPLERS = "the gradient samplers without a control variate (sgld, sghmc, sgnht, psgld, …)"


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
    if is_batch_stream(dataset):
        raise TypeError(
            "dataset is a tf.data.Dataset, but this function reads rows by index (a full-data pass or a row "
            "subsample): give the rows as a dict of name -> array. A tf.data.Dataset of minibatches is taken "
            f"by {BATCH_STREAM_SAMPLERS} with n_rows=N"
        )
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


def check_dataset(dataset: Any, rows_of: str = "") -> dict[str, Any]:
    """The dataset's entries, checked, without copying any of them (SPEC §11).

    ``dataset`` is a dict of name -> array-like (numpy, ``np.memmap``, h5py ``Dataset``, zarr
    ``Array``, pandas Series, tf tensor) or a pandas DataFrame (each column an entry). Numpy
    arrays and on-disk array-likes come back as the same objects (``np.shares_memory``);
    pandas columns, tensors and lists as numpy arrays. Refused: an empty dataset, scalars,
    categorical or non-numeric entries, NaN/Inf (the first row named), unequal lengths. The
    NaN/Inf check reads each float entry once, in blocks, and allocates nothing the size of the
    data. :meth:`sgmcmc.data.rows.Rows.as_read` then says how the model reads them. ``rows_of``
    follows the row number in a message (``" of the pipeline's first 2 elements"``)."""
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
                    f"dataset[{name!r}] contains NaN or Inf (first at row {bad}{rows_of}): remove or impute those rows"
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


def check_batch_stream(dataset: Any, n_rows: Any, minibatch_size: Any | None) -> int:
    """n, the rows of each element of a ``tf.data.Dataset`` of minibatches, after its checks
    (issue 46.3; :mod:`sgmcmc.data.stream`): elements are flat dicts of dense tensors of numbers
    whose shapes are static, with one leading dimension n (``.batch(n, drop_remainder=True)``);
    ``n_rows`` (N) is a whole number ≥ n; ``minibatch_size`` (None: not given) is n, as a count
    or as the proportion n/N. Reads the element spec only, not an element."""
    spec = dataset.element_spec
    if not isinstance(spec, Mapping) or not spec:
        raise TypeError(
            f"dataset is a tf.data.Dataset whose elements are {type(spec).__name__ if not isinstance(spec, tuple) else 'tuples'}"
            f" ({spec}), not dicts: each element must be one minibatch as a dict name -> tensor, the names "
            f"log_lik reads, e.g. tf.data.Dataset.from_tensor_slices({{'x': x, 'y': y}}).shuffle(N).batch(n, "
            f"drop_remainder=True), or .map(lambda x, y: {{'x': x, 'y': y}}) on a dataset of tuples"
        )
    for name, entry in spec.items():
        if not isinstance(entry, tf.TensorSpec):
            raise TypeError(
                f"dataset's elements hold {name!r} as {type(entry).__name__ if not isinstance(entry, Mapping) else 'a dict'}: "
                f"every entry must be one dense tensor (flatten nested dicts into names; pad ragged or sparse values "
                f"to a fixed shape, e.g. with .padded_batch(n, padded_shapes, drop_remainder=True) or tf.sparse.to_dense)"
            )
        if entry.shape.rank is None or entry.shape.rank == 0:
            raise ValueError(
                f"dataset's elements hold {name!r} of shape {entry.shape}: each element must be a minibatch, its "
                f"rows on the first axis: batch the pipeline with .batch(n, drop_remainder=True)"
            )
        if entry.shape[0] is None:
            raise ValueError(
                f"dataset's elements have no fixed batch size ({name!r} has shape {entry.shape}): the minibatch "
                f"size n is read from the elements, so every element must hold exactly n rows. Batch the pipeline "
                f"with .batch(n, drop_remainder=True) (the last, smaller batch of an epoch is then dropped)"
            )
        if not entry.shape[1:].is_fully_defined():
            raise ValueError(
                f"dataset's elements hold {name!r} of shape {entry.shape}: every dimension after the first must be "
                f"fixed (the minibatches are stacked into blocks); pad to a fixed shape, e.g. with "
                f".padded_batch(n, padded_shapes, drop_remainder=True), or give the element shapes with ensure_shape"
            )
        if not (entry.dtype.is_floating or entry.dtype.is_integer or entry.dtype.is_bool):
            raise TypeError(f"dataset's elements hold {name!r} as {entry.dtype.name}: convert it to numbers in the pipeline")
    sizes = {name: int(entry.shape[0]) for name, entry in spec.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"dataset's elements hold different numbers of rows {sizes}: every entry needs one row per observation")
    n = next(iter(sizes.values()))
    if n_rows is None:
        raise ValueError(
            f"dataset is a tf.data.Dataset: give n_rows=N, the number of rows of the data it draws its "
            f"minibatches of n={n} from (the gradient estimate scales each minibatch's log-likelihood by N/n; "
            f"e.g. n_rows=len(x) for tf.data.Dataset.from_tensor_slices({{'x': x, ...}}))"
        )
    n_rows = check_count(n_rows, "n_rows")
    if n_rows < n:
        raise ValueError(
            f"n_rows={n_rows} is smaller than the {n} rows of each element: n_rows is N, the rows of the whole "
            f"data the pipeline batches (the gradient is scaled by N/n)"
        )
    if minibatch_size is not None and batch_size(minibatch_size, n_rows) != n:
        raise ValueError(
            f"minibatch_size={minibatch_size!r} ({batch_size(minibatch_size, n_rows)} rows of N={n_rows}) but the "
            f"dataset's elements hold n={n} rows: with a tf.data dataset the minibatch is the element; leave "
            f"minibatch_size at its default or give {n}"
        )
    return n
