"""Checks of the simplex samplers' model (SPEC §9): starting points on the simplex, the
Dirichlet prior, the trial evaluation of ``counts``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from .model import TRIAL_ROWS, rows_as_tensors


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
    batch = rows_as_tensors(dataset, rows)
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
