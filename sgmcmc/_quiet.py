"""Quiet TensorFlow's start-up chatter by default, without hiding real errors.

Where each line of ``import sgmcmc`` (then the first TensorFlow op) on a CPU-only machine
comes from, TensorFlow 2.21:

* ``I ... cpu_feature_guard.cc] This TensorFlow binary is optimized to use ... AVX2 FMA``
  (and its continuation ``To enable the following instructions: ...``): TensorFlow's C++ INFO
  log, hidden by ``TF_CPP_MIN_LOG_LEVEL=2`` (INFO and WARNING off, ERROR and FATAL kept).
* ``WARNING: All log messages before absl::InitializeLog() is called are written to STDERR``,
  ``I ... port.cc] oneDNN custom operations are on ...`` and ``I ... cudart_stub.cc] Could not
  find cuda drivers on your machine, GPU will not be used.`` (each twice, as TensorFlow's
  shared libraries load): logged through absl before absl logging is initialised, so
  ``TF_CPP_MIN_LOG_LEVEL`` does not reach them and no setting made from Python can. They are
  written to file descriptor 2 while ``import tensorflow`` runs: :func:`import_tensorflow_quietly`
  imports TensorFlow with descriptor 2 pointed at a temporary file, then writes back every
  captured line except these known start-up lines (:data:`STARTUP_LINES`). Anything else —
  a real error, a Python warning — still reaches stderr, after the import.

What cannot be hidden:

* everything above, when TensorFlow was imported before sgmcmc (by the user, or by another
  package): the lines were printed before sgmcmc was loaded. Set ``TF_CPP_MIN_LOG_LEVEL=2``
  in the environment to hide the INFO lines that can be hidden; the absl lines remain;
* ``E ... cuda_platform.cc] failed call to cuInit: ... UNKNOWN ERROR (303)`` at the first op
  (not at import) with a CUDA build of TensorFlow on a machine without a GPU: an ERROR-level
  line, hidden only by ``TF_CPP_MIN_LOG_LEVEL=3``, which would also hide real errors, so it
  remains.

A user who sets ``TF_CPP_MIN_LOG_LEVEL`` (to any value) chooses TensorFlow's logging: then
nothing is set and nothing is filtered.

**Keras, deferred.** TensorFlow 2.21's ``__init__`` imports ``keras.src.optimizers`` eagerly (in
a ``try`` that accepts an ``ImportError``: Keras is optional to TensorFlow), and Keras imports
scikit-learn, SciPy's stats and matplotlib's pyplot; TensorFlow Probability reads ``tf.keras``
at import. sgmcmc needs none of them, so :func:`import_tensorflow_quietly` imports TensorFlow
and TFP with ``sys.modules["keras"] = None`` (Python's "not importable" marker), then removes
the marker: Keras loads on first use (``import keras``, ``tf.keras``, ``tfp.layers``,
``sgmcmc.keras``), as when TensorFlow is imported without it. Measured on 2 cores, a fresh
process each, three runs: ``import sgmcmc`` 5.6 → 4.5 s wall, 5.3 → 4.1 CPU s (RESULTS.md,
round 6 session 9). Nothing is deferred when TensorFlow or Keras is already loaded.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Callable, Iterator

#: Hide TensorFlow's C++ INFO and WARNING lines; keep ERROR and FATAL.
DEFAULT_TF_CPP_MIN_LOG_LEVEL = "2"

#: The start-up lines dropped from what ``import tensorflow`` writes to stderr (INFO level or
#: absl's own notice; nothing of level W, E or F).
STARTUP_LINES = (
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR\s*$"),
    re.compile(r"^I\d{4} [\d:. ]+\d+ (port|cudart_stub|cpu_feature_guard)\.cc:\d+\] "),
    re.compile(r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.\s*$"),
)


def is_startup_line(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's known start-up lines (:data:`STARTUP_LINES`)."""
    return any(p.search(line) for p in STARTUP_LINES)


#: The line TensorFlow's C++ runtime logs (level W) when an eager op fails, e.g. an out-of-range
#: ``tf.gather``: ``W... local_rendezvous.cc:412] Local rendezvous is aborting with status:
#: INVALID_ARGUMENT: ...``. The trial evaluation provokes such failures to diagnose them and
#: raises its own message, so the line is noise there (:func:`trial_lines_filtered`).
RENDEZVOUS_LINE = re.compile(r"^W\d{4} [\d:. ]+\d+ local_rendezvous\.cc:\d+\] Local rendezvous is aborting")


def is_rendezvous_line(line: str) -> bool:
    """Whether ``line`` is the :data:`RENDEZVOUS_LINE` of a failed eager op."""
    return RENDEZVOUS_LINE.search(line) is not None


@contextlib.contextmanager
def _lines_filtered(dropped: Callable[[str], bool]) -> Iterator[None]:
    """Point file descriptor 2 at a temporary file for the block, then write back to the real
    stderr every captured line for which ``dropped`` is false. No-op if descriptor 2 cannot be
    duplicated."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, AttributeError, ValueError):
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not dropped(line))
            if kept:
                os.write(2, kept.encode())


def _startup_lines_filtered() -> contextlib.AbstractContextManager[None]:
    """:func:`_lines_filtered` dropping TensorFlow's start-up lines (:data:`STARTUP_LINES`)."""
    return _lines_filtered(is_startup_line)


def trial_lines_filtered() -> contextlib.AbstractContextManager[None]:
    """:func:`_lines_filtered` dropping :data:`RENDEZVOUS_LINE` (for the trial evaluation, whose
    own message says what failed). Whatever the user's code prints comes through, after the
    block."""
    return _lines_filtered(is_rendezvous_line)


def quiet_tensorflow_startup() -> bool:
    """Set ``TF_CPP_MIN_LOG_LEVEL=2`` unless the user set it or TensorFlow is already loaded
    (its C++ logging reads the variable once, when the library loads). Returns whether it
    was set. Call it before anything imports TensorFlow."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = DEFAULT_TF_CPP_MIN_LOG_LEVEL
    return True


@contextlib.contextmanager
def _keras_deferred() -> Iterator[None]:
    """Keras not importable inside the block, unless TensorFlow or Keras is already loaded
    (module docstring, "Keras, deferred")."""
    if "keras" in sys.modules or "tensorflow" in sys.modules:
        yield
        return
    sys.modules["keras"] = None
    try:
        yield
    finally:
        if "keras" in sys.modules and sys.modules["keras"] is None:
            del sys.modules["keras"]


def import_tensorflow_quietly() -> bool:
    """What ``import sgmcmc`` does first: import TensorFlow and TensorFlow Probability without
    Keras (module docstring, "Keras, deferred"); when :func:`quiet_tensorflow_startup` sets the
    level (the user did not, and TensorFlow is not loaded yet), with TensorFlow's absl start-up
    lines filtered out of stderr. Returns whether the lines were filtered."""
    quiet = quiet_tensorflow_startup()
    with _keras_deferred(), (_startup_lines_filtered() if quiet else contextlib.nullcontext()):
        import tensorflow  # noqa: F401
        import tensorflow_probability  # noqa: F401
    return quiet
