"""Checks and conversions of user input, run before anything is compiled.

Every check raises with a message that names the problem and the fix (SPEC §4).
"""

from __future__ import annotations

import math
import numbers
import os
import re
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from .._quiet import trial_lines_filtered
from ..data.rows import CastEntry, is_array_like, output_dtype, take_rows

#: Rows used for the trial evaluation of the user's functions.
TRIAL_ROWS = 10


def as_dtype(dtype: Any) -> tf.DType:
    try:
        dtype = tf.as_dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype={dtype!r} is not a TensorFlow dtype: use tf.float32 (default) or tf.float64") from None
    if dtype not in (tf.float32, tf.float64):
        raise ValueError(f"dtype={dtype.name} is not supported: use tf.float32 (default) or tf.float64")
    return dtype


def check_params(params: Any, dtype: tf.DType) -> dict[str, np.ndarray]:
    """Starting values as arrays of the model dtype, keeping each parameter's shape."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict of name -> starting value, got {type(params).__name__}")
    if not params:
        raise ValueError("params is empty: give at least one parameter, e.g. params={'theta': 0.0}")
    out = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise TypeError(f"params names must be strings, got {name!r}")
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(
                f"params[{name!r}] is not numeric (dtype {array.dtype}): give a number or an array of numbers"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"params[{name!r}] contains NaN or Inf: give a finite starting value")
        out[name] = array.astype(dtype.as_numpy_dtype)
    return out


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
    for start in range(0, len(array), chunk_rows):
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


def check_dataset(dataset: Any, dtype: tf.DType) -> dict[str, Any]:
    """Dataset entries as the sampler reads them: floats in the model dtype, integers kept as
    integers, booleans as int32 — without copying any entry (SPEC §11).

    ``dataset`` is a dict of name -> array-like (numpy, ``np.memmap``, h5py ``Dataset``, zarr
    ``Array``, pandas Series, tf tensor) or a pandas DataFrame (each column an entry). Numpy
    arrays and on-disk array-likes are kept where they are: an entry already in its reading
    dtype comes back as the same object (``np.shares_memory``); one that needs a cast (float64
    in a float32 model, booleans) comes back as a :class:`~sgmcmc.data.rows.CastEntry`, which casts
    the rows read from it, never the whole entry. The NaN/Inf check reads the entry once, in
    blocks, and allocates nothing the size of the data."""
    entries = _entries(dataset)
    if not entries:
        raise ValueError("dataset is empty: give at least one entry, e.g. dataset={'x': x}")
    target = np.dtype(dtype.as_numpy_dtype)
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
        reading = output_dtype(np.dtype(array.dtype), target)
        out[name] = array if np.dtype(array.dtype) == reading else CastEntry(array, reading)
    lengths = {name: int(a.shape[0]) for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"dataset entries have different lengths on the first axis {lengths}: every entry must hold "
            "one row per observation"
        )
    return out


#: TensorFlow's CPU tensors must start on a 64-byte boundary (``Tensor::IsAligned``).
TENSOR_ALIGNMENT = 64


def _aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``array`` starting on a :data:`TENSOR_ALIGNMENT` boundary."""
    buffer = np.empty(array.nbytes + TENSOR_ALIGNMENT, np.uint8)
    offset = (-buffer.ctypes.data) % TENSOR_ALIGNMENT
    out = buffer[offset : offset + array.nbytes].view(array.dtype).reshape(array.shape)
    np.copyto(out, array)
    return out


def as_tensor(array: np.ndarray) -> tf.Tensor:
    """A CPU tensor of ``array`` holding at most one copy of it, with no transient copies.

    ``tf.convert_to_tensor`` copies a numpy array always, and at 2.2 GB its peak memory was
    the array's size twice over on top of it (benchmarks/bench_memory.py). A C-contiguous,
    writeable array on a 64-byte boundary is shared through DLPack instead (the tensor keeps
    the array alive); anything else is first copied once into such an array. On a machine
    with a GPU the data belong on the GPU, which is a copy anyway: ``tf.convert_to_tensor``."""
    if tf.config.list_logical_devices("GPU"):
        return tf.convert_to_tensor(array)
    if array.size == 0:
        return tf.convert_to_tensor(array)
    shareable = (
        array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % TENSOR_ALIGNMENT == 0
    )
    if not shareable:
        array = _aligned_copy(array)
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


def as_tensors(dataset: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    """:func:`as_tensor` of every entry (for ``Sampler``)."""
    return {name: as_tensor(array) for name, array in dataset.items()}


def check_positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be positive, got {value}")
    return float(value)


def check_nonnegative(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"{what} must be a number >= 0, got {value!r}")
    return float(value)


def check_count(value: Any, what: str, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{what} must be a whole number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{what} must be a {'whole number >= 0' if allow_zero else 'positive whole number'}, got {value}")
    return int(value)


def _positive_or_schedule(value: Any, what: str):
    """The one rule for a stepsize: a positive number, or a schedule ``h(t)`` — a
    :mod:`sgmcmc.schedules` schedule or any callable of the 1-based iteration t returning a
    tensor (written with TF ops: it is evaluated in-graph), positive at t = 1."""
    if callable(value):
        try:
            h1 = float(tf.cast(value(tf.constant(1, tf.int64)), tf.float64).numpy())
        except Exception as error:
            raise TypeError(f"{what} is a schedule but calling it at t=1 failed: {error}") from error
        if not np.isfinite(h1) or h1 <= 0:
            raise ValueError(f"{what} is a schedule that gives {h1} at t=1: a stepsize must be positive")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number (positive) or a schedule h(t), got {value!r}")
    return check_positive(value, what)


def per_parameter(value: Any, names: list[str], what: str, schedules: bool = False) -> dict[str, Any]:
    """A number (the same for every parameter) or a dict with exactly the names of params; with
    ``schedules``, a :mod:`sgmcmc.schedules` schedule may stand wherever a number may."""
    check = _positive_or_schedule if schedules else check_positive
    if isinstance(value, Mapping):
        missing = [n for n in names if n not in value]
        unknown = [n for n in value if n not in names]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if unknown:
                parts.append(f"unknown {unknown}")
            raise ValueError(
                f"{what} dict must have exactly the names of params {names}: {' and '.join(parts)}; "
                f"or give one number for all parameters"
            )
        return {n: check(value[n], f"{what}[{n!r}]") for n in names}
    number = check(value, what)
    return {n: number for n in names}


def batch_size(minibatch_size: Any, n_rows: int) -> int:
    """Rows per minibatch from ``minibatch_size``: a proportion in (0, 1) of ``n_rows`` (rounded)
    or a whole count in [1, ``n_rows``].

    R's sgmcmc reads any value below 1 as a proportion and anything else as a count, so there
    ``1.0`` is one row — rarely what was meant. Here a float equal to 1 (``1.0``,
    ``np.float32(1)``) is refused as ambiguous, naming the count of all rows; the integer ``1``
    is one row. Other whole floats (``500.0``) are counts. Refused with a message: booleans,
    non-numbers, NaN, infinities, 0 and negatives, fractions above 1, counts above ``n_rows``,
    proportions that round to 0 rows.

    Parameters
    ----------
    minibatch_size
        The user's value.
    n_rows
        N, the dataset's rows.

    Returns
    -------
    int
        The minibatch's rows, in [1, ``n_rows``].
    """
    if isinstance(minibatch_size, bool) or not isinstance(minibatch_size, numbers.Real):
        raise TypeError(f"minibatch_size must be a proportion in (0, 1) or a count, got {minibatch_size!r}")
    if not math.isfinite(minibatch_size):
        raise ValueError(
            f"minibatch_size={minibatch_size} is not a finite number: give a proportion in (0, 1) or a count "
            f"of rows in [1, {n_rows}]"
        )
    if minibatch_size == 1 and not isinstance(minibatch_size, numbers.Integral):
        raise ValueError(
            f"minibatch_size={minibatch_size!r} is ambiguous (in R it means one row): for all rows give the "
            f"count minibatch_size={n_rows}; a proportion must be below 1; for one row give the integer 1"
        )
    if 0 < minibatch_size < 1:
        n = int(round(minibatch_size * n_rows))
        if n == 0:
            raise ValueError(
                f"minibatch_size={minibatch_size} of N={n_rows} rows rounds to 0 rows: "
                "give a larger proportion or a count such as minibatch_size=100"
            )
        return n
    if minibatch_size >= 1 and float(minibatch_size).is_integer():
        n = int(minibatch_size)
        if n > n_rows:
            raise ValueError(
                f"minibatch_size={n} is larger than the dataset (N={n_rows} rows): give at most {n_rows}"
            )
        return n
    if minibatch_size <= 0:
        raise ValueError(
            f"minibatch_size={minibatch_size} must be positive: a proportion in (0, 1) or a count of rows "
            f"in [1, {n_rows}]"
        )
    raise ValueError(
        f"minibatch_size={minibatch_size} is neither a proportion in (0, 1) nor a whole count >= 1"
    )


def _is_dtype_clash(error: Exception) -> bool:
    text = str(error).lower().replace("float64", "double")
    return "double" in text and "float" in text


#: Rows in each of the two disjoint sets of the additivity check.
ADDITIVITY_ROWS = 5

#: Largest |log_lik(A u B) - log_lik(A) - log_lik(B)| accepted, relative to
#: max(|log_lik(A)| + |log_lik(B)|, |log_lik(A u B)|); the same for each parameter's gradient
#: (Euclidean norms). Honest models (tests/test_model_checks.py::test_honest_models_pass_*:
#: logistic regression on covertype-shaped data, a two-component Gaussian mixture, a softmax
#: network with tf.gather of integer labels, the Gaussian and regression models of the test
#: suite; at the start and at 4 random points) stayed below 4.1e-7 in float32 and 2.3e-16 in
#: float64 (worst: the softmax network, 4.1e-7); a log_lik that closes over the
#: full data or takes a mean over rows is off by ~0.5 (the sum counted once instead of twice,
#: or halved). 1e-3 leaves three orders of magnitude on each side, whatever the dtype.
ADDITIVITY_RTOL = 1e-3

_OPT_OUT = (
    "If the model is right as it is (e.g. a deliberately unused parameter, or a log_lik that is "
    "knowingly not a sum over rows), pass check_model=False to skip this check."
)


def _integer_ranges(dataset: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """For each integer entry: its min, max, and a row holding each (read in blocks)."""
    out = {}
    for name, array in dataset.items():
        if np.dtype(array.dtype).kind not in "iu" or len(array) == 0:
            continue
        row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * np.dtype(array.dtype).itemsize)
        step = max(1, SCAN_CHUNK_BYTES // row_bytes)
        low = high = None
        for start in range(0, len(array), step):
            block = np.asarray(array[start : start + step]).reshape(min(step, len(array) - start), -1)
            lows, highs = block.min(axis=1), block.max(axis=1)
            i, j = int(np.argmin(lows)), int(np.argmax(highs))
            if low is None or lows[i] < low[0]:
                low = (int(lows[i]), start + i)
            if high is None or highs[j] > high[0]:
                high = (int(highs[j]), start + j)
        out[name] = (low[0], high[0], low[1], high[1])
    return out


def _rows(dataset: dict[str, Any], rows: np.ndarray) -> dict[str, tf.Tensor]:
    """The given rows of every entry as small tensors (only those rows are read)."""
    return {name: tf.constant(np.ascontiguousarray(take_rows(array, rows))) for name, array in dataset.items()}


def _value_and_grads(fn: Callable, params: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict]:
    with tf.GradientTape() as tape:
        tape.watch(params)
        value = fn(params)
    grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.NONE)
    return value, grads


def _dense(gradient, like: tf.Tensor) -> np.ndarray:
    if gradient is None:
        return np.zeros(like.shape, like.dtype.as_numpy_dtype)
    return tf.convert_to_tensor(gradient).numpy()


def _perturbed(params: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    """The start nudged by about 1% of each value (0.01 where it is 0), in a fixed irregular
    pattern, so a symmetric start (zeros, equal components) cannot hide a wrong model."""
    out, offset = {}, 0
    for name, value in params.items():
        pattern = np.sin(1.0 + 2.39996 * (offset + np.arange(value.size))).reshape(value.shape)
        offset += value.size
        nudged = np.where(value == 0, 0.01 * pattern, value * (1 + 0.01 * pattern))
        out[name] = tf.constant(nudged.astype(value.dtype))
    return out


def _relative_gap(whole: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    gap = float(np.linalg.norm(np.ravel(whole.astype(np.float64) - a - b)))
    scale = max(
        float(np.linalg.norm(np.ravel(a.astype(np.float64)))) + float(np.linalg.norm(np.ravel(b.astype(np.float64)))),
        float(np.linalg.norm(np.ravel(whole.astype(np.float64)))),
    )
    return 0.0 if gap == 0 else (gap / scale if scale > 0 else np.inf)


def additivity_gaps(log_lik: Callable, dataset: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> dict[str, float]:
    """Relative gaps of log_lik(A u B) - log_lik(A) - log_lik(B) for the value (key ``""``)
    and each parameter's gradient, on two disjoint sets of :data:`ADDITIVITY_ROWS` rows taken
    from the first and second halves of the data, at the nudged start (the start itself
    if the nudged one is not finite). Empty if there are fewer than 2 rows."""
    n = len(next(iter(dataset.values())))
    if n < 2:
        return {}
    half = n // 2
    first = np.unique(np.linspace(0, half - 1, ADDITIVITY_ROWS).round().astype(np.int64))
    second = np.unique(np.linspace(half, n - 1, ADDITIVITY_ROWS).round().astype(np.int64))
    sets = [_rows(dataset, first), _rows(dataset, second), _rows(dataset, np.concatenate([first, second]))]
    for point in (_perturbed(params), {k: tf.constant(v) for k, v in params.items()}):
        results = [_value_and_grads(lambda p, batch=batch: log_lik(p, batch), point) for batch in sets]
        if all(np.isfinite(value.numpy()) for value, _ in results):
            break
    (va, ga), (vb, gb), (vab, gab) = results
    gaps = {"": _relative_gap(vab.numpy(), va.numpy(), vb.numpy())}
    for name, like in point.items():
        gaps[name] = _relative_gap(_dense(gab[name], like), _dense(ga[name], like), _dense(gb[name], like))
    return gaps


def _integer_arithmetic(call: Callable, batch: dict[str, tf.Tensor], dtype: tf.DType) -> list[str] | None:
    """The integer entries whose cast to ``dtype`` makes ``call(batch)`` work (one at a time,
    then all together), or None if no such cast does."""
    integers = [name for name, value in batch.items() if value.dtype.is_integer]
    trials = [[name] for name in integers] + ([integers] if len(integers) > 1 else [])
    for names in trials:
        try:
            call({k: tf.cast(v, dtype) if k in names else v for k, v in batch.items()})
        except Exception:  # the user's code may raise anything
            continue
        return names
    return None


_OUT_OF_RANGE = re.compile(r"indices\S* = (-?\d+) is not in \[0, (\d+)\)")


def _out_of_range_message(error: Exception, ranges: dict, params: Mapping[str, Any]) -> str | None:
    """What an out-of-range ``tf.gather`` in the trial evaluation means: labels outside
    [0, size) — or, when the labels are 0-based and a parameter's first axis has exactly that
    size, a start too short for them."""
    match = _OUT_OF_RANGE.search(str(error))
    if match is None:
        return None
    value, size = int(match.group(1)), int(match.group(2))
    suspects = [n for n, (lo, hi, _, _) in ranges.items() if (lo < 0 or hi >= size) and lo <= value <= hi]
    if not suspects:
        suspects = [n for n, (lo, hi, _, _) in ranges.items() if lo < 0 or hi >= size]
    if not suspects:
        return None
    described = ", ".join(f"dataset[{n!r}] holds {ranges[n][0]}..{ranges[n][1]}" for n in suspects)
    short = [n for n, v in params.items() if np.ndim(v) > 0 and np.shape(v)[0] == size]
    if short and all(ranges[n][0] == 0 for n in suspects):
        needed = max(ranges[n][1] for n in suspects) + 1
        starts = ", ".join(f"params[{n!r}] has shape {tuple(np.shape(params[n]))}" for n in short)
        fixed = ", ".join(f"{(needed, *np.shape(params[n])[1:])}" for n in short)
        return (
            f"log_lik indexes something of size {size} (tf.gather or similar) with the value {value}: "
            f"{described} (0-based labels of {needed} groups) but {starts}. A parameter's shape is its "
            f"starting value's: give a start with one entry per group, shape {fixed}"
        )
    one_based = all(ranges[n][0] >= 1 and ranges[n][1] == size for n in suspects)
    hint = " They look 1-based (as labels from R are): pass labels - 1." if one_based else ""
    return (
        f"log_lik indexes something of size {size} (tf.gather or similar) with the value {value}, out of "
        f"range: {described}. Integer entries used as indices must be 0-based, in [0, {size}).{hint}"
    )


def _float_indices(call: Callable, batch: dict[str, tf.Tensor]) -> list[str] | None:
    """The float entries whose cast to int32 makes ``call(batch)`` work (one at a time, then all
    together): float labels used as indices. None if no such cast does."""
    floats = [name for name, value in batch.items() if value.dtype.is_floating]
    trials = [[name] for name in floats] + ([floats] if len(floats) > 1 else [])
    for names in trials:
        try:
            call({k: tf.cast(v, tf.int32) if k in names else v for k, v in batch.items()})
        except Exception:  # the user's code may raise anything
            continue
        return names
    return None


_SHAPE_CLASH = re.compile(
    r"Incompatible shapes|size-incompatible|Dimensions must be equal|shapes must be equal|are incompatible"
    r"|Cannot reshape|Input to reshape is a tensor with|must have the same shape|cannot be broadcast"
)


def _shape_clash_message(error: Exception, batch: dict[str, tf.Tensor], params: Mapping[str, Any]) -> str | None:
    """A shape mismatch in the trial evaluation, said with the starts' and rows' shapes; the
    parameters with none of the sizes the error names are the likeliest culprits."""
    text = str(error)
    if not _SHAPE_CLASH.search(text):
        return None
    sizes = {int(d) for d in re.findall(r"\d+", text)}
    starts = {n: tuple(np.shape(v)) for n, v in params.items()}
    rows = {n: tuple(v.shape[1:]) for n, v in batch.items()}
    data_sizes = {d for shape in rows.values() for d in shape}
    odd = [n for n, shape in starts.items() if shape and any(d in sizes and d not in data_sizes for d in shape)]
    lead = f"params {odd} have sizes the data do not: " if odd else ""
    return (
        f"log_lik failed with a shape mismatch on a trial minibatch ({type(error).__name__}: {error}). "
        f"{lead}the starting values have shapes {starts} and the dataset's rows {rows}. A parameter's shape "
        f"is its starting value's: give each start the shape log_lik expects (e.g. one coefficient per "
        f"column of a data entry)"
    )


def trial_evaluation(
    log_lik: Callable,
    log_prior: Callable | None,
    dataset: dict[str, np.ndarray],
    params: dict[str, np.ndarray],
    dtype: tf.DType,
    check_model: bool = True,
) -> None:
    """Evaluate the user's functions eagerly, on the CPU, before anything is compiled.

    Always: ``log_lik`` on the first :data:`TRIAL_ROWS` rows plus, for each integer entry,
    the rows holding its min and its max (so an out-of-range ``tf.gather`` index fails here),
    and ``log_prior`` once: catches a non-scalar result, a dtype clash, an integer entry used
    in float arithmetic, an out-of-range index, a non-finite value at the start.

    With ``check_model`` (the default), also the mistakes that would otherwise give a wrong
    posterior silently: a parameter with no gradient path to ``log_lik`` or ``log_prior``
    (graph connectivity, not a zero value), and a ``log_lik`` that is not additive over rows
    (:func:`additivity_gaps`: a mean instead of a sum, or one that ignores its ``dataset``
    argument and closes over the full data)."""
    if not callable(log_lik):
        raise TypeError("log_lik must be a function log_lik(params, dataset) returning a scalar tensor")
    if log_prior is not None and not callable(log_prior):
        raise TypeError("log_prior must be a function log_prior(params) returning a scalar tensor, or None")
    # On a GPU an out-of-range tf.gather returns zeros instead of failing.
    # Failures provoked here would log TensorFlow's "Local rendezvous is aborting" W line when the
    # log level lets W through (TensorFlow imported before sgmcmc): dropped, our message says more.
    with tf.device("/CPU:0"), trial_lines_filtered():
        _trial(log_lik, log_prior, dataset, params, dtype, check_model)


def _trial(log_lik, log_prior, dataset, params, dtype, check_model) -> None:
    n = len(next(iter(dataset.values())))
    ranges = _integer_ranges(dataset)
    rows = set(range(min(TRIAL_ROWS, n)))
    for _, _, low_row, high_row in ranges.values():
        rows.update((low_row, high_row))
    batch = _rows(dataset, np.array(sorted(rows), dtype=np.int64))
    tensors = {k: tf.constant(v) for k, v in params.items()}
    checks = [("log_lik", lambda data=batch: log_lik(tensors, data))]
    if log_prior is not None:
        checks.append(("log_prior", lambda: log_prior(tensors)))
    for what, call in checks:
        try:
            value = tf.convert_to_tensor(call())
        except Exception as error:  # the user's code may raise anything
            if what == "log_lik":
                culprits = _integer_arithmetic(lambda data: log_lik(tensors, data), batch, dtype)
                if culprits:
                    entries = " and ".join(f"dataset[{n!r}]" for n in culprits)
                    casts = ", ".join(f"tf.cast(dataset[{n!r}], tf.{dtype.name})" for n in culprits)
                    raise TypeError(
                        f"{entries} holds integers but log_lik uses it in floating-point arithmetic "
                        f"({type(error).__name__}: {error}). Cast it inside log_lik with {casts}, or pass "
                        f"it as floats (e.g. y.astype(np.{dtype.name})); keep integers only for entries used "
                        f"as indices (tf.gather, tf.one_hot)"
                    ) from error
                message = _out_of_range_message(error, ranges, params)
                if message:
                    raise ValueError(f"{message} ({type(error).__name__}: {error})") from error
                labels = _float_indices(lambda data: log_lik(tensors, data), batch)
                if labels:
                    entries = " and ".join(f"dataset[{n!r}]" for n in labels)
                    raise TypeError(
                        f"{entries} holds floats but log_lik uses it as indices (tf.gather, tf.one_hot, ...), "
                        f"which must be integers ({type(error).__name__}: {error}). Pass the labels as 0-based integers, "
                        f"e.g. labels.astype(np.int32), or cast inside log_lik with tf.cast(..., tf.int32)"
                    ) from error
                message = _shape_clash_message(error, batch, params)
                if message:
                    raise ValueError(message) from error
            if _is_dtype_clash(error):
                other = tf.float32 if dtype == tf.float64 else tf.float64
                raise TypeError(
                    f"{what} mixes {other.name} and {dtype.name} tensors ({type(error).__name__}: {error}). "
                    f"The model runs in {dtype.name}: create constants with dtype=tf.{dtype.name} "
                    f"(e.g. tf.constant(x, dtype=tf.{dtype.name})), or run the sampler with "
                    f"dtype=tf.{other.name}"
                ) from error
            raise RuntimeError(
                f"{what} failed on a trial evaluation ({type(error).__name__}: {error}); check that it "
                f"uses params[name] and dataset[name] with the names you passed"
            ) from error
        if value.shape.rank != 0:
            raise ValueError(
                f"{what} must return a scalar (the sum over observations), but returned shape "
                f"{value.shape.as_list()}: wrap the result in tf.reduce_sum"
            )
        if value.dtype != dtype:
            raise TypeError(
                f"{what} returned a {value.dtype.name} value but the model runs in {dtype.name}: "
                f"create constants with dtype=tf.{dtype.name}, or run the sampler with dtype=tf.{value.dtype.name}"
            )
        if not np.isfinite(value.numpy()):
            raise ValueError(
                f"{what} is {value.numpy()} at the starting values: start inside the support of the model"
            )
    if not check_model:
        return
    _check_connected(log_lik, log_prior, batch, tensors)
    _check_additive(log_lik, dataset, params)


def _check_connected(log_lik, log_prior, batch, tensors) -> None:
    def log_post(p):
        value = log_lik(p, batch)
        return value if log_prior is None else value + log_prior(p)

    _, grads = _value_and_grads(log_post, tensors)
    unused = [name for name, g in grads.items() if g is None]
    if unused:
        where = "log_lik or log_prior" if log_prior is not None else "log_lik (there is no log_prior)"
        raise ValueError(
            f"params {unused} have no gradient path to {where}: they are never used (a misspelt "
            f"name such as params['thta'], or a parameter left over), or only through operations "
            f"without a gradient (tf.round, tf.argmax, a cast to integers). The sampler would move "
            f"them by noise alone. Use every parameter in log_lik or log_prior through "
            f"differentiable operations, or remove it from params. {_OPT_OUT}"
        )


def _check_additive(log_lik, dataset, params) -> None:
    gaps = additivity_gaps(log_lik, dataset, params)
    failed = {name: gap for name, gap in gaps.items() if not gap <= ADDITIVITY_RTOL}
    if not failed:
        return
    parts = [("its value" if name == "" else f"the gradient of {name!r}") + f" by {gap:.2g}" for name, gap in failed.items()]
    raise ValueError(
        f"log_lik is not additive over rows: on two disjoint sets A and B of {ADDITIVITY_ROWS} rows, "
        f"log_lik(A and B together) differs from log_lik(A) + log_lik(B) in {', '.join(parts)} "
        f"(relative; at most {ADDITIVITY_RTOL:g} is float rounding). The package expects log_lik(params, "
        f"dataset) to be the SUM of the log-likelihood over the rows it is given, computed from those "
        f"rows only: it scales a minibatch's value by N/n. Use tf.reduce_sum, not tf.reduce_mean, and "
        f"read the data from the dataset argument, not from arrays closed over from outside. "
        f"{_OPT_OUT}"
    )


# -- storage -----------------------------------------------------------------------------------


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation: MemAvailable of /proc/meminfo, else
    free pages x page size (``os.sysconf``), else None (unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n_bytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n_bytes < 1024 or unit == "GiB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    raise AssertionError  # pragma: no cover


def check_storage(
    n_kept: int,
    n_chains: int,
    shapes: dict[str, tuple],
    dtype: Any,
    store_gradients: bool,
    limit_bytes: int | None = None,
) -> int:
    """Bytes needed to store ``n_kept`` draws of ``n_chains`` chains (each parameter of
    ``shapes``, again for the gradients if ``store_gradients``, and one log-posterior value
    per draw); raises MemoryError naming the size and the remedies if that exceeds
    ``limit_bytes`` (default: the memory available now, :func:`available_memory`). Returns
    the bytes needed. Call it before the CV mode search so a run that cannot be stored fails
    at once."""
    itemsize = np.dtype(tf.as_dtype(dtype).as_numpy_dtype).itemsize
    per_draw = sum(int(np.prod(shape, dtype=np.int64)) for shape in shapes.values())
    per_draw = per_draw * (2 if store_gradients else 1) + 1
    needed = int(n_kept) * int(n_chains) * per_draw * itemsize
    limit = available_memory() if limit_bytes is None else int(limit_bytes)
    if limit is not None and needed > limit:
        what = "draws and gradients" if store_gradients else "draws"
        raise MemoryError(
            f"storing {n_kept:,} {what} of {n_chains} chain(s) ({per_draw:,} numbers each) needs "
            f"{_size(needed)}, more than the {_size(limit)} available. Keep fewer: thin the chain "
            f"(thin=k keeps every k-th draw), run fewer n_iters"
            + (", do not store the gradients" if store_gradients else "")
            + ", or use the step-by-step API (sgld_setup + init_sess + sgmcmc_step), which stores "
            "nothing and lets you keep running summaries."
        )
    return needed


# -- simplex samplers (scir, sgrld; SPEC §9) --------------------------------------------------

#: Tolerance on |Σ_j ω_j − 1| for a starting point on the simplex, per dtype.
SIMPLEX_TOLERANCE = {"float32": 1e-4, "float64": 1e-8}


def check_simplex_params(params: dict[str, np.ndarray], dtype: tf.DType, which: str = "params") -> None:
    """Every starting value is a stack of points on the probability simplex: at least one axis,
    a last axis of length >= 2, entries >= 0 that sum to 1 along the last axis."""
    tol = SIMPLEX_TOLERANCE[dtype.name]
    for name, value in params.items():
        if value.ndim == 0 or value.shape[-1] < 2:
            raise ValueError(
                f"{which}[{name!r}] has shape {value.shape}: a simplex parameter needs a last axis of at least 2 "
                f"categories (its probabilities), e.g. np.full(10, 0.1)"
            )
        if np.any(value < 0):
            raise ValueError(f"{which}[{name!r}] has negative entries: a point on the simplex has entries >= 0")
        sums = value.astype(np.float64).sum(axis=-1)
        worst = float(np.max(np.abs(sums - 1.0)))
        if worst > tol:
            raise ValueError(
                f"{which}[{name!r}] is not on the simplex: its last axis sums to {sums.ravel()[np.argmax(np.abs(sums - 1.0).ravel())]:.6g}, "
                f"not 1 (tolerance {tol:g} in {dtype.name}); divide by the sum along the last axis, "
                f"e.g. w / w.sum(axis=-1, keepdims=True)"
            )


def check_alpha(alpha: Any, params: dict[str, np.ndarray], dtype: tf.DType) -> dict[str, np.ndarray]:
    """The Dirichlet prior's concentrations per parameter, broadcast to the parameter's shape: a
    number, an array broadcastable to every parameter's shape, or a dict of those by name."""
    names = list(params)
    if isinstance(alpha, Mapping):
        missing = [n for n in names if n not in alpha]
        unknown = [n for n in alpha if n not in names]
        if missing or unknown:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unknown {unknown}"] if unknown else [])
            raise ValueError(
                f"alpha dict must have exactly the names of params {names}: {' and '.join(parts)}; "
                f"or give one number (or array) for all parameters"
            )
        values = {n: (alpha[n], f"alpha[{n!r}]") for n in names}
    else:
        values = {n: (alpha, "alpha") for n in names}
    out = {}
    for n, (value, what) in values.items():
        if isinstance(value, bool) or (callable(value) and not hasattr(value, "__array__")):
            raise TypeError(f"{what} must be a positive number or array, got {value!r}")
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be a positive number or array, got {value!r}") from None
        if not np.all(np.isfinite(array)) or np.any(array <= 0):
            raise ValueError(f"{what} must be positive and finite (Dirichlet concentrations), got {value!r}")
        try:
            array = np.broadcast_to(array, params[n].shape)
        except ValueError:
            raise ValueError(
                f"{what} has shape {array.shape}, which does not broadcast to params[{n!r}]'s shape "
                f"{params[n].shape}: give a number, an array of that shape, or one of its last axis"
            ) from None
        out[n] = np.array(array, dtype=dtype.as_numpy_dtype)
    return out


def trial_counts(counts: Any, dataset: dict[str, np.ndarray], params: dict[str, np.ndarray], dtype: tf.DType, batch_size: int) -> None:
    """Call the user's ``counts(params, minibatch, seed)`` eagerly, once, on the first
    ``min(batch_size, TRIAL_ROWS)`` rows, before anything is compiled: it must return a dict with
    exactly the names of params, each shaped like its parameter, of the model dtype (or an
    integer dtype), with finite entries >= 0."""
    if not callable(counts):
        raise TypeError(
            "counts must be a function counts(params, minibatch, seed) returning a dict name -> the "
            "minibatch's category counts, shaped like the parameter"
        )
    rows = np.arange(min(batch_size, TRIAL_ROWS))
    batch = _rows(dataset, rows)
    tensors = {k: tf.constant(v) for k, v in params.items()}
    seed = tf.constant([0, 0], tf.int64)
    with tf.device("/CPU:0"):
        try:
            out = counts(tensors, batch, seed)
        except Exception as error:
            raise type(error)(
                f"counts(params, minibatch, seed) failed on a trial minibatch of {len(rows)} rows: {error}"
            ) if isinstance(error, (TypeError, ValueError)) else error
    if not isinstance(out, Mapping):
        raise TypeError(
            f"counts must return a dict name -> counts (one entry per parameter), got {type(out).__name__}"
        )
    names, got = list(params), list(out)
    if sorted(names) != sorted(got):
        raise ValueError(
            f"counts returned the names {got} but params has {names}: return one entry per parameter, "
            f"with the same names"
        )
    for n in names:
        value = tf.convert_to_tensor(out[n])
        if tuple(value.shape) != params[n].shape:
            raise ValueError(
                f"counts returned shape {tuple(value.shape)} for {n!r}, but the parameter has shape "
                f"{params[n].shape}: return the minibatch's category counts summed over its rows, shaped "
                f"like the parameter"
            )
        if value.dtype.is_floating and value.dtype != dtype:
            raise TypeError(
                f"counts returned {value.dtype.name} for {n!r} in a {dtype.name} model: cast with "
                f"tf.cast(..., params[{n!r}].dtype), or return integer counts"
            )
        if not (value.dtype.is_floating or value.dtype.is_integer):
            raise TypeError(f"counts returned dtype {value.dtype.name} for {n!r}: return numbers (counts)")
        array = value.numpy()
        if not np.all(np.isfinite(array)):
            raise ValueError(f"counts returned NaN or Inf for {n!r} on a trial minibatch: counts must be finite")
        if np.any(array < 0):
            raise ValueError(
                f"counts returned negative values for {n!r} on a trial minibatch: return category counts (>= 0)"
            )
