"""Quiet TensorFlow's start-up chatter by default, without hiding real errors.

Where each line of ``import sgmcmc`` (then the first TensorFlow op) on a CPU-only machine
comes from, TensorFlow 2.21:

* ``I ... cpu_feature_guard.cc] This TensorFlow binary is optimized to use ... AVX2 FMA``
  and, on some CPUs, ``I ... oneDNN custom operations are on``: TensorFlow's C++ INFO log,
  hidden by ``TF_CPP_MIN_LOG_LEVEL=2`` (INFO and WARNING off, ERROR and FATAL kept).
* ``WARNING: All log messages before absl::InitializeLog() is called are written to STDERR``
  and ``I ... cudart_stub.cc] Could not find cuda drivers on your machine, GPU will not be
  used.`` (each twice, as TensorFlow's shared libraries load): logged through absl, before
  absl logging is initialised, so ``TF_CPP_MIN_LOG_LEVEL`` does not reach them. Nothing set
  from Python before the import changes them; they remain.
* ``E ... cuda_platform.cc] failed call to cuInit: ... UNKNOWN ERROR (303)`` at the first
  op: an ERROR-level line, hidden only by ``TF_CPP_MIN_LOG_LEVEL=3``, which would also hide
  real errors, so it remains.
"""

from __future__ import annotations

import os
import sys

#: Hide TensorFlow's C++ INFO and WARNING lines; keep ERROR and FATAL.
DEFAULT_TF_CPP_MIN_LOG_LEVEL = "2"


def quiet_tensorflow_startup() -> bool:
    """Set ``TF_CPP_MIN_LOG_LEVEL=2`` unless the user set it or TensorFlow is already loaded
    (its C++ logging reads the variable once, when the library loads). Returns whether it
    was set. Call it before anything imports TensorFlow."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = DEFAULT_TF_CPP_MIN_LOG_LEVEL
    return True
