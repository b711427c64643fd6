"""The minibatch pipeline: a chunk's rows, gathered ahead on the host, handed to the compiled loop.

For a call that runs iterations ``t0 + 1 … t0 + n``, :class:`BlockFeed` draws every minibatch's
indices (:class:`~sgmcmc.data.minibatch.MinibatchIndices`, a function of seed, chain and t), gathers
their rows from the user's arrays where they are (:class:`~sgmcmc.data.rows.Rows`) into a block
``rows: name -> [capacity, D, K, n, …]``, ``indices: [capacity, D, K, n]``, and hands it to
TensorFlow without a copy (DLPack on a 64-byte-aligned buffer). The compiled loop reads
iteration i's minibatches as ``block[i]``: contiguous memory, no gather inside the loop.

The block has a fixed ``capacity`` of iterations (only the first n are filled), so one compiled
program, XLA's included, serves every call length, and the step API can pass the loop's own
program a block holding one iteration. Two buffers alternate: while TensorFlow runs a call on
one, a background thread fills the other for the call expected next (``prefetch``). Because the
rows depend only on (seed, chain, t), what the thread gathers cannot change the chain; a
prediction that turns out wrong (a chain that stopped early) is discarded.

Memory: two blocks of at most :data:`BLOCK_BYTES` each (more only when one thinning group of
``thin`` iterations needs more), whatever N.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
import tensorflow as tf

from .minibatch import MinibatchIndices
from .rows import Rows, aligned_empty, as_tensor

#: Bytes of one block (rows and indices of ``capacity`` iterations).
BLOCK_BYTES = 32 * 2**20
#: Most iterations one block holds (small models: the call overhead is amortised long before).
MAX_BLOCK_ITERATIONS = 2048


def iterations_per_block(indices: MinibatchIndices, n_chains: int, row_bytes: int, block_bytes: int = BLOCK_BYTES) -> int:
    """How many iterations' minibatches fit in ``block_bytes``."""
    per_iteration = indices.per_iteration * n_chains * indices.batch_size * (row_bytes + 8)
    return int(max(1, min(MAX_BLOCK_ITERATIONS, block_bytes // max(1, per_iteration))))


class BlockFeed:
    """Blocks of minibatches for one stream of a sampler.

    Parameters
    ----------
    rows
        The dataset.
    indices
        How minibatch indices are drawn (rows, n, replacement, minibatches per iteration).
    seed, stream
        The sampler's seed and the stream (:mod:`sgmcmc.data.minibatch`).
    chains
        Indices of the chains the blocks are for.
    capacity
        Iterations per block.
    """

    def __init__(self, rows: Rows, indices: MinibatchIndices, seed: int, stream: int, chains, capacity: int):
        self.rows, self.indices = rows, indices
        self.seed, self.stream = int(seed), int(stream)
        self.chains = np.asarray(list(chains), np.int64)
        self.capacity = int(capacity)
        lead = (self.capacity, indices.per_iteration, len(self.chains), indices.batch_size)
        self._buffers = [
            {
                "rows": {k: aligned_empty(lead + rows.row_shapes[k], rows.dtypes[k]) for k in rows.entries},
                "indices": aligned_empty(lead, np.int64),
            }
            for _ in range(2)
        ]
        self._next = 0  # the buffer the next fill writes
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: tuple[tuple[int, int], concurrent.futures.Future] | None = None
        #: Blocks handed out so far: a block stays valid until the second block after it.
        self.calls = 0

    def _fill(self, which: int, t0: int, n: int) -> dict[str, Any]:
        buffer = self._buffers[which]
        idx = self.indices.draw(self.seed, self.stream, self.chains, t0, n)
        buffer["indices"][:n] = idx
        self.rows.take(idx, out={k: v[:n] for k, v in buffer["rows"].items()})
        return buffer

    def block(self, t0: int, n: int, prefetch: tuple[int, int] | None = None) -> dict[str, Any]:
        """The block for iterations ``t0 + 1 … t0 + n`` (n ≤ capacity) as tensors; ``prefetch``
        ``(t0', n')``: start gathering that block in the background."""
        if not 0 < n <= self.capacity:
            raise ValueError(f"a block holds 1 to {self.capacity} iterations, not {n}")
        buffer = None
        if self._pending is not None:
            (pt0, pn), future = self._pending
            self._pending = None
            filled = future.result()  # also frees its buffer if the guess was wrong
            if (pt0, pn) == (t0, n):
                buffer = filled
        if buffer is None:
            buffer = self._fill(self._next, t0, n)
            self._next = 1 - self._next
        if prefetch is not None and 0 < prefetch[1] <= self.capacity:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sgmcmc-rows")
            which = self._next
            self._next = 1 - self._next
            self._pending = (tuple(prefetch), self._executor.submit(self._fill, which, *prefetch))
        self.calls += 1
        return {
            "rows": {k: as_tensor(v) for k, v in buffer["rows"].items()},
            "indices": as_tensor(buffer["indices"]),
        }

    def cancel(self) -> None:
        """Drop a prefetch in flight (waiting for it, so its buffer is free)."""
        if self._pending is not None:
            self._pending[1].result()
            self._pending = None

    def close(self) -> None:
        self.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def iteration_of(block: dict, i: tf.Tensor) -> dict:
    """Iteration ``i`` of a block, inside the compiled program: ``rows`` name -> ``[D, K, n, …]``,
    ``indices`` ``[D, K, n]``. A gather, not a slice: XLA compiles a slice whose start depends on
    a variable (the iteration counter) for each value of it, i.e. at every call."""
    return tf.nest.map_structure(lambda x: tf.gather(x, i), block)
