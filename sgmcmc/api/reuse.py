"""Compiled programs reused across whole-chain calls (issue 31.3).

A whole-chain call (``sgmcmc.sgld(...)`` and the others) builds a :class:`~sgmcmc.run.sampler.Sampler`
whose compiled functions are traced and compiled on their first use: about a second for a
logistic regression, minutes for a large network — each call, although a second call with the
same model and settings would trace the same programs. So the sampler of a finished whole-chain
call is kept here, and a later call whose key (:func:`sampler_key`) equals its key takes it
instead of building a new one: new starting values and seed (:meth:`Sampler.start_again`), then
the usual :func:`~sgmcmc.init_sess` (reset, mode search, stepsize check) and run. Its programs
read the seed's keys, the starts and every state from variables, so the chain is the one a new
sampler gives, bit for bit (``tests/test_compile_reuse.py``).

**What the key holds** (a change in any of them builds a new sampler):

- the method and its kernel (every hyperparameter by value), the estimator spec, the number of
  chains, their layout (one start or one per chain), the parameters' names and shapes, dtype,
  minibatch size and drawing, constraints, the compilation mode chosen;
- the dataset's entries *by identity* (the same array objects; their rows are read where they
  are at every call, so changing an entry in place is seen, as by a new sampler);
- ``log_lik``, ``log_prior`` (and ``counts``): their code, and what they read from outside —
  closure variables, defaults and globals, by value for numbers, strings, small containers and
  arrays of ≤ :data:`SNAPSHOT_ELEMENTS` elements, by identity for everything else — followed into
  the Python functions they call, :data:`FUNCTION_DEPTH` levels deep. Rebinding a global or a
  closure variable, or changing a small array or list in place, is therefore noticed.

**What it does not notice**, as ``tf.function`` does not: a change *inside* an object the model
reads (an attribute of a class instance, an element of an array larger than
:data:`SNAPSHOT_ELEMENTS`), or in a function more than :data:`FUNCTION_DEPTH` calls away. Pass what
changes through ``dataset`` or ``params``, call :func:`clear_compiled_cache`, or turn reuse off
with ``SGMCMC_REUSE=0``.

Only whole-chain calls on one device reuse (not ``*_setup``, whose sampler the user holds; not
under a ``strategy``; not with ``checkpoint_dir``). The cache keeps the last :data:`KEEP`
samplers (each holds its variables, compiled programs and a reference to its dataset's
entries); :func:`clear_compiled_cache` frees them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from ..run.sampler import Sampler

#: Samplers kept (least recently used dropped first).
KEEP = 4
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


def snapshot(value: Any, depth: int = 0, level: int = 0) -> Any:
    """A comparable record of ``value`` as a compiled program would have captured it: equal
    records mean the same program. ``depth`` counts function calls followed, ``level`` nesting."""
    if level > _MAX_LEVEL:
        return _Same(value)
    down = level + 1
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if isinstance(value, np.ndarray) and not isinstance(value, np.memmap):
        if value.size <= SNAPSHOT_ELEMENTS and value.dtype != object:
            return ("array", value.dtype.str, value.shape, value.tobytes())
        return ("array", _Same(value), value.dtype.str, value.shape)
    if isinstance(value, tf.Variable):
        return _Same(value)  # read when the program runs
    if isinstance(value, tf.Tensor) and hasattr(value, "numpy"):  # eager: captured as a constant
        return ("tensor", snapshot(value.numpy(), depth, down))
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


def enabled() -> bool:
    """Whether whole-chain calls reuse samplers (``SGMCMC_REUSE=0`` turns it off)."""
    return os.environ.get("SGMCMC_REUSE", "1").strip() not in ("0", "false", "False", "no")


@dataclasses.dataclass(eq=False)
class _Entry:
    key: Any
    sampler: Sampler
    in_use: bool = False


_lock = threading.Lock()
_entries: list[_Entry] = []


def clear_compiled_cache() -> None:
    """Forget the samplers kept for reuse by later whole-chain calls (:mod:`sgmcmc.api.reuse`):
    their variables and compiled programs, and their references to the datasets' entries."""
    with _lock:
        _entries.clear()


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object whose comparison fails is never the same
        return False


@contextlib.contextmanager
def reused_or_new(key: Any, build: Callable[[], Sampler], start_again: Callable[[Sampler], None]) -> Iterator[Sampler]:
    """The kept sampler of ``key``, made ready by ``start_again`` — or a new one from ``build``
    — for one whole-chain run; kept for reuse after the run ends, dropped if it raised (a
    divergence, an interrupted trace: the next call builds afresh). ``key=None``: never reused."""
    entry = None
    if key is not None and enabled():
        with _lock:
            for i, candidate in enumerate(_entries):
                if not candidate.in_use and _equal(candidate.key, key):
                    entry = _entries.pop(i)
                    entry.in_use = True
                    _entries.append(entry)  # most recently used last
                    break
    if entry is not None:
        try:
            start_again(entry.sampler)
        except BaseException:
            _drop(entry)
            raise
        sampler = entry.sampler
    else:
        sampler = build()
        if key is not None and enabled():
            entry = _Entry(key, sampler, in_use=True)
            with _lock:
                _entries.append(entry)
                while len(_entries) > KEEP:
                    idle = next((e for e in _entries if not e.in_use), None)
                    if idle is None:
                        break
                    _entries.remove(idle)
    try:
        yield sampler
    except BaseException:
        if entry is not None:
            _drop(entry)  # an interrupted trace or an unexpected error: build afresh next time
        raise
    finally:
        if entry is not None:
            entry.in_use = False


def _drop(entry: _Entry) -> None:
    with _lock:
        if entry in _entries:
            _entries.remove(entry)


def cached_count() -> int:
    """How many samplers are kept (for tests and benchmarks)."""
    with _lock:
        return len(_entries)
