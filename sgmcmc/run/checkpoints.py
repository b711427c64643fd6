"""Checkpoints of whole-chain runs (SPEC §10): resume after a crash, losing at most
``checkpoint_every`` iterations.

A checkpoint directory holds

* ``shard_00000.npz``, ``shard_00001.npz``, …: the kept samples, appended, never rewritten —
  each shard holds the draws kept since the previous checkpoint and the estimates (log
  posterior, gradients) that became known since then (a kept sample's estimate is made by the
  next iteration, so it can land one shard later than its draw);
* ``state_00000.*``, …: the sampler's state (:meth:`sgmcmc.Sampler.save`) at each checkpoint;
* ``manifest.json``: the commit point — the fingerprint, the seed in use, the iteration, the
  shards and the state that belong to it, and whether the run finished.

**"The same arguments"** is the fingerprint: the method, settings, parameter names and shapes,
N, the number of chains, the run options (seed included), the starting values, a digest of the
data (:func:`data_digest`) and digests of ``log_lik`` and ``log_prior``
(:func:`function_digest`). A call whose fingerprint differs from the directory's is refused with
what changed; delete the directory (or use another) to start afresh. Both digests are cheap
and can miss a change — their docstrings say what they cannot see.

Every file is written under a temporary name and renamed into place (atomic on POSIX), the
manifest last; files the manifest does not list (a write that a kill interrupted) are ignored
and overwritten later. Resuming restores the state the manifest names and continues; since the
chain does not depend on how it is cut into chunks, the result equals the uninterrupted run's.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
import os
import types
from typing import Any, Callable, Mapping

import numpy as np

from ..data.rows import CastEntry, is_array_like, take_rows
from .saved_state import state_checkpoint

MANIFEST = "manifest.json"
FORMAT = 1


def _describe(value: Any) -> Any:
    """A JSON-able description of a setting; callables (schedules, bijectors) by their repr."""
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


# -- the content digests ------------------------------------------------------------------------
#: An entry up to this many bytes is hashed whole.
WHOLE_BYTES = 16 * 2**20
#: Otherwise: this many rows drawn with a fixed seed, plus the first and last EDGE_ROWS rows.
SAMPLED_ROWS = 4096
EDGE_ROWS = 64
_ROW_SEED = 20231123


def _hasher():
    return hashlib.blake2b(digest_size=16)


def _update_with_array(h, array: np.ndarray) -> None:
    """Bytes that depend on the values only (native byte order, C order); object arrays by repr."""
    array = np.asarray(array)
    if array.dtype.kind == "O":
        h.update(repr(array.tolist()).encode())
        return
    if array.dtype.byteorder not in "=|":
        array = array.astype(array.dtype.newbyteorder("="))
    h.update(np.ascontiguousarray(array).tobytes())


def _as_array_like(value: Any) -> Any:
    """Something with ``.shape``, a numpy ``.dtype`` and first-axis integer indexing."""
    try:
        import pandas as pd

        if isinstance(value, pd.Series):
            if isinstance(value.dtype, pd.CategoricalDtype):
                return np.asarray(value.cat.codes), [repr(c) for c in value.cat.categories]
            return value.to_numpy(), None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    if hasattr(value, "numpy") and callable(value.numpy) and not isinstance(value, np.ndarray):
        try:
            return np.asarray(value.numpy()), None  # an eager tf.Tensor / tf.Variable
        except Exception:  # a symbolic tensor: by its type only
            return None, None
    if is_array_like(value):  # numpy, memmap, h5py, zarr: read in place (sgmcmc.data.rows)
        try:
            np.dtype(value.dtype)
            return value, None
        except TypeError:
            pass
    try:
        return np.asarray(value), None
    except Exception:
        return None, None


def entry_digest(value: Any) -> dict:
    """Shape, dtype and a content digest of one dataset entry (or any array-like).

    ``value`` needs ``.shape``, ``.dtype`` and numpy-style integer indexing on the first axis —
    numpy arrays, ``np.memmap``, h5py and zarr arrays, pandas columns (a categorical: its codes
    and categories), eager tensors; a :class:`~sgmcmc.data.rows.CastEntry` is digested as the entry
    it wraps (the stored values, not their cast). Up to :data:`WHOLE_BYTES` (16 MiB) every byte is hashed.
    Larger entries: the first and last :data:`EDGE_ROWS` rows and :data:`SAMPLED_ROWS` rows
    drawn with a fixed seed, read through :func:`sgmcmc.data.rows.take_rows` (sorted, distinct indices: what h5py needs), so
    a memory-mapped or on-disk entry costs a few thousand row reads, never the whole file. The
    digest depends only on the values (byte order and memory layout do not count), so an
    ``np.memmap`` and the same array in memory agree.

    What it can miss: a change confined to rows not read — for N rows, an edit of r rows of
    a large entry goes unseen with probability about (1 - 4096/N)^r (one row of 10^6: 99.6 %). A
    change of the whole entry (scaled, shifted, re-sorted, a column swapped in) is seen.
    """
    if isinstance(value, CastEntry):
        value = value.base  # the user's stored values, not their cast
    array, categories = _as_array_like(value)
    if array is None:
        return {"type": type(value).__qualname__}
    shape = [int(n) for n in array.shape]
    dtype = np.dtype(array.dtype)
    h = _hasher()
    n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if not shape:
        _update_with_array(h, np.asarray(array[()]))
        rows = "all"
    elif n_bytes <= WHOLE_BYTES or shape[0] <= SAMPLED_ROWS + 2 * EDGE_ROWS:
        _update_with_array(h, np.asarray(array[:]))
        rows = "all"
    else:
        n = shape[0]
        drawn = np.random.default_rng(_ROW_SEED).integers(EDGE_ROWS, n - EDGE_ROWS, SAMPLED_ROWS)
        index = np.unique(np.concatenate([np.arange(EDGE_ROWS), drawn, np.arange(n - EDGE_ROWS, n)]))
        _update_with_array(h, take_rows(array, index))  # sorted, distinct: h5py/zarr-safe
        h.update(index.tobytes())
        rows = int(len(index))
    if categories is not None:
        h.update(repr(categories).encode())
    return {"shape": shape, "dtype": dtype.str.lstrip("<>=|") if dtype.kind != "O" else "object",
            "rows_read": rows, "digest": h.hexdigest()}


def data_digest(dataset: Any) -> dict | None:
    """Name -> :func:`entry_digest` of every entry of a dict or a DataFrame (a lone array: one
    entry named ``""``); None for None."""
    if dataset is None:
        return None
    if hasattr(dataset, "columns") and hasattr(dataset, "iloc"):
        entries = {str(c): dataset[c] for c in dataset.columns}
    elif isinstance(dataset, Mapping):
        entries = {str(k): v for k, v in dataset.items()}
    else:
        entries = {"": dataset}
    return {k: entry_digest(v) for k, v in entries.items()}


#: How deep function_digest follows functions reached from a function (closures, globals).
MAX_DEPTH = 8


def _value(value: Any, seen: set, depth: int) -> Any:
    """A JSON-able description of a value a function uses: numbers and strings as they are,
    arrays by digest, containers element by element, functions by their code, TFP objects by
    their parameters, modules and classes by name, anything else by its type only."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, complex)):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, np.generic):
        return [value.dtype.str, repr(value.item())]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [_value(v, seen, depth) for v in value]
    if isinstance(value, (set, frozenset)):
        return ["set"] + sorted(json.dumps(_value(v, seen, depth), sort_keys=True) for v in value)
    if isinstance(value, Mapping):
        return {str(k): _value(v, seen, depth) for k, v in value.items()}
    if isinstance(value, np.ndarray) or (hasattr(value, "numpy") and hasattr(value, "dtype") and hasattr(value, "shape")):
        return ["array", entry_digest(value)]
    if callable(value) and not hasattr(value, "parameters"):
        return _callable(value, seen, depth + 1)
    parameters = getattr(value, "parameters", None)
    if isinstance(parameters, Mapping):  # tfp distributions and bijectors
        return ["parameters", type(value).__qualname__, _value(dict(parameters), seen, depth + 1)]
    return ["object", type(value).__module__, type(value).__qualname__]


def _code(code: types.CodeType, fn_globals: Mapping[str, Any] | None, seen: set, depth: int) -> Any:
    """Bytecode, constants (nested code objects recursively), the names it uses, its argument
    counts, and the values of the globals it reads. Not line numbers or file names: moving a
    function does not change it."""
    consts = [
        _code(c, fn_globals, seen, depth) if isinstance(c, types.CodeType) else _value(c, seen, depth)
        for c in code.co_consts
    ]
    used = {}
    if fn_globals is not None and depth < MAX_DEPTH:
        for name in code.co_names:
            if name in fn_globals:
                used[name] = _value(fn_globals[name], seen, depth)
            elif not hasattr(builtins, name):
                used[name] = None
    return {
        "code": code.co_code.hex(),
        "consts": consts,
        "names": list(code.co_names),
        "args": [code.co_argcount, code.co_kwonlyargcount, code.co_flags],
        "globals": used,
    }


def _callable(fn: Any, seen: set, depth: int) -> Any:
    if depth > MAX_DEPTH:
        return ["too deep", getattr(fn, "__qualname__", type(fn).__qualname__)]
    if id(fn) in seen:
        return ["seen", getattr(fn, "__qualname__", type(fn).__qualname__)]
    seen = seen | {id(fn)}
    inner = getattr(fn, "python_function", None)  # a tf.function
    if inner is not None:
        return ["tf.function", _callable(inner, seen, depth)]
    if isinstance(fn, functools.partial):
        return ["partial", _callable(fn.func, seen, depth + 1), _value(fn.args, seen, depth), _value(fn.keywords, seen, depth)]
    if isinstance(fn, types.MethodType):
        return ["method", _callable(fn.__func__, seen, depth + 1), _value(fn.__self__, seen, depth + 1)]
    if isinstance(fn, types.FunctionType):
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(_value(cell.cell_contents, seen, depth + 1))
            except ValueError:  # an empty cell
                cells.append("empty")
        return {
            "function": _code(fn.__code__, fn.__globals__, seen, depth),
            "defaults": _value(fn.__defaults__, seen, depth + 1),
            "kwdefaults": _value(fn.__kwdefaults__, seen, depth + 1),
            "closure": cells,
        }
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, np.ufunc)):
        return ["builtin", getattr(fn, "__module__", None) or "", fn.__qualname__ if hasattr(fn, "__qualname__") else fn.__name__]
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):  # a callable object: its class's __call__
        return ["callable object", type(fn).__qualname__, _callable(call, seen, depth + 1)]
    return ["object", type(fn).__module__, type(fn).__qualname__]


def function_digest(fn: Callable | None) -> str | None:
    """A digest of what a Python function computes, as far as its objects show it.

    Covered: the bytecode, constants and names of its code object and of every code object
    nested in it (lambdas, inner functions, comprehensions); its defaults and keyword defaults;
    its closure's cell values; and the values of the module globals its code reads — each value
    described by :func:`_value`: numbers, strings, arrays (by :func:`entry_digest`), containers,
    TFP distributions and bijectors (by their ``parameters``), and functions followed
    recursively (to depth :data:`MAX_DEPTH`). A ``tf.function`` by its Python function, a
    ``functools.partial`` by its function and arguments, a bound method by its function and its
    object, a callable object by its class's ``__call__``.

    Not seen: the code of C functions and TensorFlow ops (``tf.reduce_sum``'s meaning), library
    versions, attributes of objects other than those above (``self.scale`` of a user's class
    counts by its type only; a Keras model's weights), files or environment variables the
    function reads, and attribute values of modules (``config.SCALE`` with ``import config``).
    A new Python version changes the bytecode: a directory written under another Python is
    refused. Line numbers, file names and comments do not count.
    """
    if fn is None:
        return None
    text = json.dumps(_callable(fn, set(), 0), sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def fingerprint(
    method: str,
    settings: dict,
    shapes: dict,
    n_rows: int,
    n_chains: int,
    options: dict,
    *,
    data: Any = None,
    functions: Mapping[str, Callable | None] | None = None,
    starts: Any = None,
) -> str:
    """What "the same arguments" means for a resume: the method, its settings, the parameters'
    names and shapes, N, the number of chains and the run options (including the seed, when one
    was given), the starting values, the data (:func:`data_digest`) and the user's functions
    (:func:`function_digest`). Returns ``"<hash>:<JSON description>"``."""
    description = {
        "method": method,
        "settings": _describe(settings),
        "shapes": {k: list(v) for k, v in shapes.items()},
        "n_rows": int(n_rows),
        "n_chains": int(n_chains),
        "options": _describe(options),
        "starts": _value(starts, set(), 0),
        "data": data_digest(data),
        "functions": {k: function_digest(f) for k, f in (functions or {}).items()},
    }
    text = json.dumps(description, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16] + ":" + text


#: How the parts of a fingerprint are named in the refusal.
_PARTS = {
    "method": "the method", "settings": "settings", "shapes": "parameter names or shapes",
    "n_rows": "the number of rows N", "n_chains": "n_chains", "options": "run options",
    "starts": "the starting values (params)",
}


def combine_fingerprints(prints: list[str]) -> str:
    """One fingerprint for a run whose rows are sharded across workers, from every worker's own
    :func:`fingerprint` in worker order: the hash of their hashes, and their descriptions as a
    list (so that a refusal names the worker whose arguments changed)."""
    hashes = [p.split(":", 1)[0] for p in prints]
    description = {"workers": [json.loads(p.split(":", 1)[1]) for p in prints]}
    combined = hashlib.sha256(":".join(hashes).encode()).hexdigest()[:16]
    return combined + ":" + json.dumps(description, sort_keys=True)


def _differences(saved: dict, now: dict) -> list[str]:
    """What changed between two fingerprint descriptions, in words (a run sharded across
    workers: each worker's changes, named by worker)."""
    if "workers" in saved or "workers" in now:
        old, new = saved.get("workers"), now.get("workers")
        if old is None or new is None or len(old) != len(new):
            count = lambda w: "1 process (no rows sharding)" if w is None else f"{len(w)} workers"  # noqa: E731
            return [f"the rows were sharded over {count(old)}; this call: {count(new)}"]
        return [f"worker {w}: {change}" for w, (a, b) in enumerate(zip(old, new)) for change in _differences(a, b)]
    out = []
    for key in sorted(set(saved) | set(now)):
        old, new = saved.get(key), now.get(key)
        if old == new:
            continue
        if key not in saved:
            out.append(f"{key}: not recorded by the saved run (an older sgmcmc wrote it)")
        elif key == "data":
            old, new = old or {}, new or {}
            for name in sorted(set(old) | set(new)):
                a, b = old.get(name), new.get(name)
                if a == b:
                    continue
                if a is None or b is None:
                    out.append(f"data: entry {name!r} {'added' if a is None else 'removed'}")
                elif a.get("shape") != b.get("shape") or a.get("dtype") != b.get("dtype"):
                    out.append(f"data: entry {name!r} shape/dtype {a.get('shape')} {a.get('dtype')} -> "
                               f"{b.get('shape')} {b.get('dtype')}")
                else:
                    out.append(f"data: entry {name!r} has other values")
        elif key == "functions":
            old, new = old or {}, new or {}
            for name in sorted(set(old) | set(new)):
                if old.get(name) != new.get(name):
                    out.append(f"{name}: its code, or a value it uses (closure, default, global), changed")
        elif isinstance(old, dict) and isinstance(new, dict):
            for sub in sorted(set(old) | set(new)):
                if old.get(sub) != new.get(sub):
                    out.append(f"{_PARTS.get(key, key)}: {sub} {old.get(sub)!r} -> {new.get(sub)!r}")
        else:
            out.append(f"{_PARTS.get(key, key)}: {old!r} -> {new!r}")
    return out


def _replace_atomically(path: str, write) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    write(tmp)
    os.replace(tmp, path)


def write_json_atomically(path: str, value: Any) -> None:
    """``value`` as JSON at ``path``, synced, under a temporary name renamed into place."""

    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(value, f, indent=1)
            f.flush()
            os.fsync(f.fileno())

    _replace_atomically(path, write)


class CheckpointDirectory:
    """Reads and writes one run's checkpoint directory. ``writer=False`` (the workers other than
    the chief of a run whose rows are sharded, :mod:`sgmcmc.run.distributed_checkpoints`): read only —
    the directory is not even created, and :meth:`commit` is refused."""

    def __init__(self, directory: str, writer: bool = True):
        self.directory = os.fspath(directory)
        self.writer = writer
        if writer:
            os.makedirs(self.directory, exist_ok=True)
        self.manifest: dict | None = None
        #: The manifest file's bytes as read (b"" when there is none): what the workers compare.
        self.manifest_bytes = b""
        path = os.path.join(self.directory, MANIFEST)
        if os.path.exists(path):
            with open(path, "rb") as f:
                self.manifest_bytes = f.read()
            self.manifest = json.loads(self.manifest_bytes)

    def check(self, expected: str) -> None:
        """Refuse a directory written by a different call."""
        if self.manifest is None:
            return
        got = self.manifest["fingerprint"]
        if got != expected:
            changes = _differences(json.loads(got.split(":", 1)[1]), json.loads(expected.split(":", 1)[1]))
            listed = "\n".join(f"  - {c}" for c in changes) or "  - (the fingerprint format)"
            raise ValueError(
                f"checkpoint_dir={self.directory!r} holds a run with other arguments; what changed:\n"
                f"{listed}\nTo resume it, call again with the saved run's data, functions and settings. "
                f"To start afresh, delete the directory (shutil.rmtree({self.directory!r})) or pass "
                f"another checkpoint_dir."
            )

    # -- reading ---------------------------------------------------------------------------
    def load_arrays(self) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray] | None, int, int]:
        """Concatenate the listed shards: draws ``(K, m, …)``, log posteriors ``(K, m_e)``,
        gradients ``(K, m_e, …)`` or None, and the counts ``m`` and ``m_e``."""
        draws, log_posts, grads = {}, [], {}
        for name in self.manifest["shards"]:
            with np.load(os.path.join(self.directory, name)) as shard:
                for key in shard.files:
                    kind, _, param = key.partition("/")
                    if kind == "draws":
                        draws.setdefault(param, []).append(shard[key])
                    elif kind == "grads":
                        grads.setdefault(param, []).append(shard[key])
                    elif kind == "log_posterior":
                        log_posts.append(shard[key])
        cat = lambda parts: np.concatenate(parts, axis=1)  # noqa: E731
        draws = {k: cat(v) for k, v in draws.items()}
        log_post = cat(log_posts) if log_posts else None
        grads = {k: cat(v) for k, v in grads.items()} or None
        return draws, log_post, grads, self.manifest["n_draws"], self.manifest["n_estimates"]

    @property
    def state_prefix(self) -> str:
        return os.path.join(self.directory, self.manifest["state"])

    # -- writing -----------------------------------------------------------------------------
    def commit(
        self,
        sampler,
        fingerprint_text: str,
        shard: dict[str, np.ndarray],
        n_draws: int,
        n_estimates: int,
        finished: bool,
    ) -> None:
        """Append ``shard``, save the sampler's state, then rewrite the manifest (the commit)."""
        if not self.writer:
            raise RuntimeError(f"{self.directory!r} was opened read-only (a worker other than the chief)")
        previous = self.manifest or {"shards": [], "checkpoints": 0}
        index = previous["checkpoints"]
        shards = list(previous["shards"])
        if shard:
            name = f"shard_{index:05d}.npz"
            _replace_atomically(os.path.join(self.directory, name), lambda p: _savez(p, shard))
            shards.append(name)
        state = f"state_{index:05d}"
        state_checkpoint(sampler).write(os.path.join(self.directory, state))
        manifest = {
            "format": FORMAT,
            "fingerprint": fingerprint_text,
            "seed": sampler.seed,
            "iteration": sampler.iteration,
            "n_draws": n_draws,
            "n_estimates": n_estimates,
            "shards": shards,
            "state": state,
            "checkpoints": index + 1,
            "finished": finished,
        }

        write_json_atomically(os.path.join(self.directory, MANIFEST), manifest)
        self._remove_stale_states(keep=state)
        self.manifest = manifest

    def _remove_stale_states(self, keep: str) -> None:
        for name in os.listdir(self.directory):
            if name.startswith("state_") and not name.startswith(keep + "."):
                try:
                    os.remove(os.path.join(self.directory, name))
                except OSError:
                    pass


def _savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
