"""Running compiled chunks of iterations from Python: storage, progress, divergence, Ctrl-C.

The chain itself never leaves TensorFlow within a chunk; between chunks Python copies the
chunk's samples into preallocated numpy storage, checks them for NaN/Inf, and updates the
progress bar. Chunk lengths adapt so a chunk takes about :data:`SECONDS_PER_CHUNK`.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from .errors import DivergenceError

SECONDS_PER_CHUNK = 0.5
FIRST_CHUNK = 100
MAX_CHUNK = 50_000
#: Upper bound on one chunk's samples held in TensorFlow before the copy to numpy.
MAX_CHUNK_BYTES = 256 * 2**20

RunChunk = Callable[[int], tuple[dict[str, tf.Tensor], tf.Tensor]]


def _first_nonfinite(samples: dict[str, np.ndarray], log_posts: np.ndarray) -> int | None:
    ok = np.isfinite(log_posts)
    for values in samples.values():
        ok &= np.isfinite(values.reshape(len(values), -1)).all(axis=1)
    return None if ok.all() else int(np.argmin(ok))


def run_chunked(
    run_chunk: RunChunk,
    n_iters: int,
    shapes: dict[str, tuple[int, ...]],
    dtype: np.dtype,
    *,
    desc: str,
    verbose: bool,
    hint: str,
    keep_on_interrupt: bool,
) -> dict[str, np.ndarray]:
    """Call ``run_chunk(k)`` until ``n_iters`` iterations are done; return the samples.

    Parameters
    ----------
    run_chunk
        Runs ``k`` iterations, returning ``(samples, log_posts)``: per name an array
        ``(k, *shape)`` (may be empty for a run that stores nothing) and ``k`` estimates.
    shapes
        Shape of each stored parameter.
    hint
        Advice for the divergence message (e.g. "try a smaller stepsize").
    keep_on_interrupt
        On Ctrl-C, return the samples of the completed chunks with a ``RuntimeWarning``
        (True), or let ``KeyboardInterrupt`` through (False).

    Raises
    ------
    DivergenceError
        At the first NaN/Inf in a sample or log-posterior estimate, carrying every earlier
        sample.
    """
    storage = {k: np.empty((n_iters, *shape), dtype=dtype) for k, shape in shapes.items()}
    bytes_per_iter = max(1, sum(int(np.prod(s)) for s in shapes.values()) * np.dtype(dtype).itemsize)
    max_chunk = max(1, min(MAX_CHUNK, MAX_CHUNK_BYTES // bytes_per_iter))
    target = SECONDS_PER_CHUNK if verbose else 4 * SECONDS_PER_CHUNK
    chunk, done, first = min(FIRST_CHUNK, max_chunk), 0, True
    bar = tqdm(total=n_iters, desc=desc, disable=not verbose, unit="it", dynamic_ncols=True)
    try:
        while done < n_iters:
            k = min(chunk, n_iters - done)
            start = time.perf_counter()
            samples, log_posts = run_chunk(k)
            samples = {name: s.numpy() for name, s in samples.items()}
            log_posts = log_posts.numpy()
            elapsed = time.perf_counter() - start
            bad = _first_nonfinite(samples, log_posts)
            kept = k if bad is None else bad
            for name in storage:
                storage[name][done : done + kept] = samples[name][:kept]
            if bad is not None:
                at = done + bad + 1
                culprits = [name for name, s in samples.items() if not np.isfinite(s[bad]).all()]
                what = f"parameter {', '.join(map(repr, culprits))}" if culprits else "the log-posterior estimate"
                raise DivergenceError(
                    f"{desc} diverged at iteration {at}: {what} became NaN or Inf; {hint}. The "
                    f"{at - 1} samples drawn before it are in the exception's `samples` attribute",
                    iteration=at,
                    samples={name: s[: at - 1].copy() for name, s in storage.items()},
                )
            done += k
            bar.update(k)
            bar.set_postfix(log_post=f"{log_posts[-1]:.6g}", refresh=False)
            # The first call includes tracing and compilation, so its time says nothing.
            growth = 4.0 if first else min(4.0, max(0.25, target / max(elapsed, 1e-6)))
            chunk = int(min(max_chunk, max(1, k * growth)))
            first = False
    except KeyboardInterrupt:
        if not keep_on_interrupt:
            raise
        warnings.warn(
            f"{desc} interrupted: returning the {done} of {n_iters} iterations completed",
            RuntimeWarning,
            stacklevel=3,
        )
        return {name: s[:done] for name, s in storage.items()}
    finally:
        bar.close()
    return storage
