"""Will the kept samples fit? The storage estimate, refused before any iteration."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation: MemAvailable of /proc/meminfo, else
    free pages x page size (``os.sysconf``), else None (unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n_bytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n_bytes < 1024 or unit == "GiB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    raise AssertionError  # pragma: no cover


def check_storage(
    n_kept: int,
    n_chains: int,
    shapes: dict[str, tuple],
    dtype: Any,
    store_gradients: bool,
    limit_bytes: int | None = None,
) -> int:
    """Bytes needed to store ``n_kept`` draws of ``n_chains`` chains (each parameter of
    ``shapes``, again for the gradients if ``store_gradients``, and one log-posterior value
    per draw); raises MemoryError naming the size and the remedies if that exceeds
    ``limit_bytes`` (default: the memory available now, :func:`available_memory`). Returns
    the bytes needed. Call it before the CV mode search so a run that cannot be stored fails
    at once."""
    itemsize = np.dtype(tf.as_dtype(dtype).as_numpy_dtype).itemsize
    per_draw = sum(int(np.prod(shape, dtype=np.int64)) for shape in shapes.values())
    per_draw = per_draw * (2 if store_gradients else 1) + 1
    needed = int(n_kept) * int(n_chains) * per_draw * itemsize
    limit = available_memory() if limit_bytes is None else int(limit_bytes)
    if limit is not None and needed > limit:
        what = "draws and gradients" if store_gradients else "draws"
        raise MemoryError(
            f"storing {n_kept:,} {what} of {n_chains} chain(s) ({per_draw:,} numbers each) needs "
            f"{_size(needed)}, more than the {_size(limit)} available. Keep fewer: thin the chain "
            f"(thin=k keeps every k-th draw), run fewer n_iters"
            + (", do not store the gradients" if store_gradients else "")
            + ", or use the step-by-step API (sgld_setup + init_sess + sgmcmc_step), which stores "
            "nothing and lets you keep running summaries."
        )
    return needed


# -- simplex samplers (scir, sgrld; SPEC §9) --------------------------------------------------

#: Tolerance on |Σ_j ω_j − 1| for a starting point on the simplex, per dtype.
