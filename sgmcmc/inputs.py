"""Checks and conversions of user input, run before anything is compiled.

Every check raises with a message that names the problem and the fix (SPEC §4).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from .minibatch import gather_rows

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


def check_dataset(dataset: Any, dtype: tf.DType) -> dict[str, np.ndarray]:
    """Dataset entries as arrays: floats cast to the model dtype, integers kept as integers."""
    if not isinstance(dataset, Mapping):
        raise TypeError(f"dataset must be a dict of name -> array, got {type(dataset).__name__}")
    if not dataset:
        raise ValueError("dataset is empty: give at least one entry, e.g. dataset={'x': x}")
    out = {}
    for name, value in dataset.items():
        array = np.asarray(value)
        if array.ndim == 0:
            raise ValueError(
                f"dataset[{name!r}] is a scalar: observations lie on the first axis, so every entry needs one"
            )
        if array.dtype.kind == "b":
            array = array.astype(np.int32)
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)):
                bad = int(np.argmax(~np.isfinite(array).reshape(len(array), -1).all(axis=1)))
                raise ValueError(
                    f"dataset[{name!r}] contains NaN or Inf (first at row {bad}): remove or impute those rows"
                )
            array = array.astype(dtype.as_numpy_dtype)
        elif array.dtype.kind not in "iu":
            raise TypeError(f"dataset[{name!r}] is not numeric (dtype {array.dtype}): convert it to numbers")
        out[name] = array
    lengths = {name: len(a) for name, a in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"dataset entries have different lengths on the first axis {lengths}: every entry must hold "
            "one row per observation"
        )
    return out


def check_positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be positive, got {value}")
    return float(value)


def check_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{what} must be a whole number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{what} must be a positive whole number, got {value}")
    return int(value)


def per_parameter(value: Any, names: list[str], what: str) -> dict[str, float]:
    """A number (the same for every parameter) or a dict with exactly the names of params."""
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
        return {n: check_positive(value[n], f"{what}[{n!r}]") for n in names}
    number = check_positive(value, what)
    return {n: number for n in names}


def batch_size(minibatch_size: Any, n_rows: int) -> int:
    """A proportion in (0, 1) of ``n_rows`` (rounded) or a count in [1, n_rows]."""
    if isinstance(minibatch_size, bool) or not isinstance(minibatch_size, numbers.Real):
        raise TypeError(f"minibatch_size must be a proportion in (0, 1) or a count, got {minibatch_size!r}")
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
    raise ValueError(
        f"minibatch_size={minibatch_size} is neither a proportion in (0, 1) nor a whole count >= 1"
    )


def _is_dtype_clash(error: Exception) -> bool:
    text = str(error).lower().replace("float64", "double")
    return "double" in text and "float" in text


def trial_evaluation(
    log_lik: Callable,
    log_prior: Callable | None,
    dataset: dict[str, np.ndarray],
    params: dict[str, np.ndarray],
    dtype: tf.DType,
    check_model: bool = True,
) -> None:
    """Evaluate ``log_lik`` on a few rows and ``log_prior`` once, eagerly, to catch a
    non-scalar result, a dtype clash or a non-finite value before anything is compiled."""
    if not callable(log_lik):
        raise TypeError("log_lik must be a function log_lik(params, dataset) returning a scalar tensor")
    if log_prior is not None and not callable(log_prior):
        raise TypeError("log_prior must be a function log_prior(params) returning a scalar tensor, or None")
    tensors = {k: tf.constant(v) for k, v in params.items()}
    rows = tf.range(min(TRIAL_ROWS, len(next(iter(dataset.values())))))
    batch = gather_rows({k: tf.constant(v) for k, v in dataset.items()}, rows)
    checks = [("log_lik", lambda: log_lik(tensors, batch))]
    if log_prior is not None:
        checks.append(("log_prior", lambda: log_prior(tensors)))
    for what, call in checks:
        try:
            value = tf.convert_to_tensor(call())
        except Exception as error:  # the user's code may raise anything
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
