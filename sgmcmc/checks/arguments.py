"""Checks of the samplers' arguments: dtype, starting values, numbers, counts, per-parameter
values and stepsizes (one rule: a positive number or a schedule), the minibatch size."""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np
import tensorflow as tf


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
