"""Compiled programs reused across whole-chain calls (issue 31.3).

A whole-chain call (``sgmcmc.sgld(...)`` and the others) builds a
:class:`~sgmcmc.run.sampler.Sampler` whose compiled functions are traced and compiled on their
first use: about a second for a logistic regression, minutes for a large network — on every
call, although a second call with the same model and settings would trace the same programs. So
the sampler of a finished whole-chain call is kept here, and a later call whose key equals its
key (built by :func:`sgmcmc.api.build.whole_chain_sampler` from the records of
:mod:`sgmcmc.programs`) takes it instead of building a new one: new starting values and seed
(:func:`start_again`), then the usual :func:`~sgmcmc.init_sess` (reset, mode search,
stepsize check) and run. Its programs read the seed's keys, the starts and every state from
variables, so the chain is the one a new sampler gives, bit for bit
(``tests/test_compile_reuse.py``).

**What the key holds** (a change in any of them builds a new sampler):

- the method and its kernel (every hyperparameter by value), the estimator spec, the number of
  chains, their layout (one start or one per chain), the parameters' names and shapes, dtype,
  minibatch size and drawing, constraints, the compilation mode chosen;
- the dataset's entries *by identity* (the same array objects; their rows are read where they
  are at every call, so changing an entry in place is seen, as by a new sampler), or the
  ``tf.data`` pipeline by identity (:func:`~sgmcmc.init_sess` starts it again);
- ``log_lik``, ``log_prior`` (and ``counts``): their code, and what they read from outside —
  closure variables, defaults and globals, by value for numbers, strings, small containers and
  arrays of ≤ :data:`~sgmcmc.programs.SNAPSHOT_ELEMENTS` elements (at most
  :data:`~sgmcmc.programs.SNAPSHOT_BYTES` a record), by identity for everything else — followed
  into the Python functions they call, :data:`~sgmcmc.programs.FUNCTION_DEPTH` levels deep.
  Rebinding a global or a closure variable, or changing a small array or list in place, is
  therefore noticed.

**What it does not notice**, as ``tf.function`` does not: a change *inside* an object the model
reads (an attribute of a class instance, an element of a large array), or in a function more
than :data:`~sgmcmc.programs.FUNCTION_DEPTH` calls away. Pass what changes through ``dataset`` or
``params``, call :func:`clear_compiled_cache`, or turn reuse off with ``SGMCMC_REUSE=0``.

Only whole-chain calls on one device reuse (not ``*_setup``, whose sampler the user holds; not
under a ``strategy``; not with ``checkpoint_dir``). The cache keeps the last :data:`KEEP`
samplers whose variables take at most :data:`KEEP_BYTES` in all (each holds its variables, its
compiled programs and a reference to its dataset's entries, not its block buffers);
:func:`clear_compiled_cache` frees them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..programs import clear_model_programs, records_equal
from ..run.sampler import Sampler
from ..run.saved_state import state_bytes

#: Samplers kept (least recently used dropped first) ...
KEEP = 4
#: ... and the most bytes of their variables kept in all (a sampler above it alone: not kept).
KEEP_BYTES = 256 * 2**20


def enabled() -> bool:
    """Whether whole-chain calls reuse samplers (``SGMCMC_REUSE=0`` turns it off)."""
    return os.environ.get("SGMCMC_REUSE", "1").strip() not in ("0", "false", "False", "no")


@dataclasses.dataclass(eq=False)
class _Entry:
    key: Any
    sampler: Sampler
    in_use: bool = False
    nbytes: int = 0


_lock = threading.Lock()
_entries: list[_Entry] = []


def clear_compiled_cache() -> None:
    """Forget the samplers kept for reuse by later whole-chain calls (:mod:`sgmcmc.api.reuse`):
    their variables and compiled programs, and their references to the datasets' entries; and
    the programs shared by one model's estimators (:mod:`sgmcmc.programs`)."""
    with _lock:
        _entries.clear()
    clear_model_programs()


@contextlib.contextmanager
def reused_or_new(
    make_key: Callable[[], Any] | None, build: Callable[[], Sampler], start_again: Callable[[Sampler], None]
) -> Iterator[Sampler]:
    """The kept sampler whose key equals ``make_key()``, made ready by ``start_again`` — or a
    new one from ``build`` — for one whole-chain run; kept for reuse after the run ends,
    dropped if it raised (a divergence, an interrupted trace: the next call builds afresh).
    ``make_key=None`` or reuse turned off: never reused (and no key is made)."""
    entry = None
    key = make_key() if make_key is not None and enabled() else None
    if key is not None:
        with _lock:
            for i, candidate in enumerate(_entries):
                if not candidate.in_use and records_equal(candidate.key, key):
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
        if key is not None:
            entry = _Entry(key, sampler, in_use=True)
            with _lock:
                _entries.append(entry)
    try:
        yield sampler
    except BaseException:
        if entry is not None:
            _drop(entry)  # an interrupted trace or an unexpected error: build afresh next time
        raise
    finally:
        if entry is not None:
            entry.sampler.release_buffers()
            entry.nbytes = state_bytes(entry.sampler)
            entry.in_use = False
            _trim()


def _trim() -> None:
    """Drop the least recently used idle samplers until at most :data:`KEEP` are kept and their
    variables take at most :data:`KEEP_BYTES`."""
    with _lock:
        while len(_entries) > KEEP or sum(e.nbytes for e in _entries) > KEEP_BYTES:
            idle = next((e for e in _entries if not e.in_use), None)
            if idle is None:
                return
            _entries.remove(idle)


def _drop(entry: _Entry) -> None:
    with _lock:
        if entry in _entries:
            _entries.remove(entry)


def cached_count() -> int:
    """How many samplers are kept (for tests and benchmarks)."""
    with _lock:
        return len(_entries)


def start_again(
    sampler: Sampler,
    starts: list[dict[str, np.ndarray]],
    seed: int | None,
    *,
    starts_given_per_chain: bool,
    mode_start: dict[str, np.ndarray] | None,
    stepsize_check: bool,
    verbose: bool,
    settings: dict,
) -> None:
    """Make ``sampler`` the sampler a new set-up with these starts and seed would make, keeping
    its compiled functions: the whole-chain call that reuses it (same model, shapes and settings)
    then prepares it with :func:`~sgmcmc.init_sess`, which resets every state variable from the
    starts. Nothing compiled holds a start or the seed."""
    shapes = {k: tuple(np.shape(v)) for k, v in starts[0].items()}
    if shapes != sampler.shapes or len(starts) != sampler.n_chains:
        raise ValueError(f"start_again needs {sampler.n_chains} starts of shapes {sampler.shapes}, got {len(starts)} of {shapes}")
    sampler.starts = starts
    sampler.mode_start = starts[0] if mode_start is None else mode_start
    sampler.starts_given_per_chain = bool(starts_given_per_chain)
    if sampler.control_variate is not None:
        sampler.estimator.mode_start = sampler.mode_start
        sampler.control_variate = dataclasses.replace(sampler.control_variate, verbose=verbose)
    sampler.stepsize_check = bool(stepsize_check)
    sampler.settings = dict(settings)  # the earlier runs' samples keep their own
    sampler.adopt_seed(int(seed) if seed is not None else secrets.randbits(63))
    sampler.initialised = False
