"""Which compiled programs are the same: comparable records of a model's functions and values
(:func:`snapshot`, :func:`function_record`), and a process-wide table of the programs made from
one model (:func:`model_program`), shared by every sampler and estimator of that model.

Used by :mod:`sgmcmc.api.reuse` (whole-chain calls reuse a sampler whose key equals theirs) and by
the full-data passes (the curvature's Hessian-vector products, the noise's directional sums,
the streamed gradients): a program is a ``tf.function`` of its arguments and of the model's
``log_lik``/``log_prior``, so two estimators of one model can share it, traced once per argument
shape. What a record notices and what it cannot is in :mod:`sgmcmc.api.reuse`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

#: Arrays up to this many elements are compared by value; larger ones by identity.
SNAPSHOT_ELEMENTS = 100_000
#: How many calls deep the Python functions a model calls are followed.
FUNCTION_DEPTH = 3
#: Longest list, tuple or dict compared element by element (longer: by identity).
SNAPSHOT_ITEMS = 10_000


class _Same:
    """Compares equal to another ``_Same`` of the very same object (and holds it, so its id
    cannot be reused while the key lives)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"same({type(self.obj).__name__} at {id(self.obj):#x})"


#: Nesting of containers followed (deeper: by identity; also stops at a container holding itself).
_MAX_LEVEL = 12


#: Bytes of array values one record copies at most (beyond: the rest by identity).
SNAPSHOT_BYTES = 32 * 2**20
_budget = threading.local()


def snapshot(value: Any, depth: int = 0, level: int = 0) -> Any:
    """A comparable record of ``value`` as a compiled program would have captured it: equal
    records mean the same program. ``depth`` counts function calls followed, ``level`` nesting."""
    if depth == 0 and level == 0:  # a new record: its array copies are bounded
        _budget.left = SNAPSHOT_BYTES
    if level > _MAX_LEVEL:
        return _Same(value)
    down = level + 1
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if isinstance(value, np.ndarray) and not isinstance(value, np.memmap):
        if value.size <= SNAPSHOT_ELEMENTS and value.dtype != object and _spend(value.nbytes):
            return ("array", value.dtype.str, value.shape, value.tobytes())
        return ("array", _Same(value), value.dtype.str, value.shape)
    if isinstance(value, tf.Variable):
        return _Same(value)  # read when the program runs
    if isinstance(value, tf.Tensor) and hasattr(value, "numpy"):  # eager: captured as a constant
        elements = value.shape.num_elements()
        if elements is not None and elements <= SNAPSHOT_ELEMENTS and _spend(elements * value.dtype.size):
            return ("tensor", snapshot(value.numpy(), depth, down))
        return ("tensor", _Same(value), value.dtype.name, tuple(value.shape))
    if isinstance(value, (list, tuple)) and len(value) <= SNAPSHOT_ITEMS:
        return (type(value).__name__, tuple(snapshot(v, depth, down) for v in value))
    if isinstance(value, dict) and len(value) <= SNAPSHOT_ITEMS:
        return (type(value).__name__, tuple((snapshot(k, depth, down), snapshot(v, depth, down)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)) and len(value) <= SNAPSHOT_ITEMS:
        return (type(value).__name__, frozenset(snapshot(v, depth, down) for v in value))
    if isinstance(value, types.FunctionType):
        return function_record(value, depth)
    if isinstance(value, types.MethodType):
        return ("method", _Same(value.__self__), snapshot(value.__func__, depth, down))
    if isinstance(value, functools.partial):
        return ("partial", snapshot(value.func, depth, down), snapshot(value.args, depth, down),
                snapshot(value.keywords, depth, down))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple((f.name, snapshot(getattr(value, f.name), depth, down)) for f in dataclasses.fields(value))
        return ("dataclass", type(value), fields)
    return _Same(value)  # modules, classes, builtins, other objects: by identity


def _spend(nbytes: int) -> bool:
    """Whether the current record may still copy ``nbytes`` of array values (then spent)."""
    left = getattr(_budget, "left", SNAPSHOT_BYTES)
    if nbytes > left:
        return False
    _budget.left = left - nbytes
    return True


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object and the code nested in it may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _library(code: types.CodeType) -> bool:
    """Code of an installed package or of Python itself (fixed while the process runs)."""
    filename = code.co_filename
    return "site-packages" in filename or "dist-packages" in filename or filename.startswith(_STDLIB)


_STDLIB = os.path.dirname(os.__file__)


def function_record(fn: types.FunctionType, depth: int = 0) -> Any:
    """A Python function as its code, defaults, closure variables and the globals it reads
    (a library's function, or one more than :data:`FUNCTION_DEPTH` calls away, by identity)."""
    if depth > FUNCTION_DEPTH or _library(fn.__code__):
        return _Same(fn)
    inner = depth + 1
    cells = tuple(
        snapshot(cell.cell_contents, inner) if _filled(cell) else ("empty",) for cell in (fn.__closure__ or ())
    )
    namespace = fn.__globals__
    read = tuple((name, snapshot(namespace[name], inner)) for name in sorted(_names(fn.__code__)) if name in namespace)
    return (
        "function", _Same(fn.__code__), snapshot(fn.__defaults__, inner), snapshot(fn.__kwdefaults__, inner),
        cells, read,
    )


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a closure variable not yet assigned
        return False
    return True


def callable_record(fn: Callable | None) -> Any:
    """``log_lik`` and the like: a function by :func:`function_record`, anything else by
    :func:`snapshot` (a bound method: its object by identity)."""
    return snapshot(fn)


def entry_record(entry: Any) -> Any:
    """A checked dataset entry by identity (a cast entry by its user's entry)."""
    base = getattr(entry, "base", None)
    if base is not None and type(entry).__name__ == "CastEntry":
        return ("cast", _Same(base), np.dtype(entry.dtype).str)
    return _Same(entry)



#: Models whose programs are kept (least recently used dropped first).
KEEP_MODELS = 8
_lock = threading.Lock()
_models: list[tuple[Any, dict[str, Any]]] = []


def model_program(name: str, log_lik: Callable | None, log_prior: Callable | None, make: Callable[[], Any]) -> Any:
    """The program ``name`` of the model (``log_lik``, ``log_prior``): made by ``make()`` on
    first use, then shared by every caller whose model has equal records (the same code and
    values read, :func:`callable_record`). ``make`` must close over nothing but the model."""
    key = (callable_record(log_lik), callable_record(log_prior))
    with _lock:
        for i, (k, programs) in enumerate(_models):
            if records_equal(k, key):
                _models.append(_models.pop(i))
                break
        else:
            programs = {}
            _models.append((key, programs))
            del _models[:-KEEP_MODELS]
        if name not in programs:
            programs[name] = make()
        return programs[name]


def clear_model_programs() -> None:
    """Forget every model's programs."""
    with _lock:
        _models.clear()


def records_equal(a: Any, b: Any) -> bool:
    """Whether two records are equal (a comparison that fails: not equal)."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object whose comparison fails is never the same
        return False
