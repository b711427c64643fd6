"""Minibatches from the user's ``tf.data`` pipeline (issue 46.3): ``dataset=`` a
``tf.data.Dataset`` whose elements are dicts of tensors, each a minibatch of n rows, with
``n_rows=N``.

**Which element goes where.** The pipeline is repeated (:meth:`BatchStream.elements`) and its
elements dealt out in order: element ``j`` is minibatch ``d`` of chain ``k`` at iteration ``t``
(1-based) with ``j = ((t − 1)·D + d)·K + k`` — K chains, D minibatches per iteration (SGHMC: L).
So chains get different batches, and within one iterator an iteration's minibatches are a
function of t alone: the whole-chain loop, the step API and the chunks of either read the same
elements, as they read the same rows of an array dataset. The pipeline's order, shuffling and
augmentation are the user's; the sampler's noise is seeded as always.

**Same seed, same chain** — with the same elements. :func:`~sgmcmc.init_sess` starts the pipeline
again (a new iterator: so does a whole-chain call, whether its sampler is new or reused), and so
do the set-up's checks (:meth:`BatchStream.first_rows`). A pipeline that gives the same elements
on every iterator (no shuffle, or ``reshuffle_each_iteration=False``) gives the same chain for the
same seed, call after call. A seeded ``shuffle`` that reshuffles (TensorFlow's default) moves on
to the next order of its seed's sequence at each new iterator of the same dataset object, as each
epoch of Keras' ``fit`` does: the same chains come back when the script runs again (the pipeline
built anew), not when the same object is sampled twice.

**How they reach the compiled loop.** As an array dataset's rows do: in blocks of ``capacity``
iterations ``[capacity, D, K, n, …]`` (:class:`StreamFeed`, a :class:`~sgmcmc.data.pipeline.BlockFeed`
whose blocks come from the pipeline instead of a gather), so the compiled programs, XLA's
included, are the array path's, bit for bit. The pipeline itself batches :data:`FETCH_ELEMENTS`
elements for one ``next()`` (not one call per element) and prefetches the next such chunk on its
own threads; the feed's thread copies them into the next block while a call runs. The iterator is not read
inside the compiled loop: XLA cannot compile an iterator, the step API would need a program of its
own, and a group run and put back (the stored estimate at a run's end,
:meth:`~sgmcmc.run.sampler.Sampler.estimate_for_storage`) would consume elements that the next
call must see again (benchmarks/RESULTS.md, "Round 6, session 4").

**Going back.** :class:`StreamReader` keeps the iterations it read from one chunk (of
:data:`FETCH_ELEMENTS` elements) before the latest request on (a group put back, a run stopped early and continued, the step API's held
block); a request further back (a restore) starts the pipeline again, skipping the elements of the
iterations before it, at the cost of reading them: the elements the saved chain would have read
when the pipeline gives the same elements on every iterator, else the next order's (a valid
continuation, not the same one).

The rows are read in the model's dtype (floats cast, booleans as int32, as for arrays: a ``map``
in the pipeline). No row numbers exist: the block's indices are −1, and what needs them or all
rows (SAGA, SVRG, the control variate, full-data passes) is refused at set-up.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import tensorflow as tf

from .minibatch import MinibatchIndices
from .pipeline import BlockFeed
from .rows import output_dtype


#: Elements the pipeline batches into one of its own, read by one ``next()``: a call costs
#: ~50–100 µs of Python, so 256 elements amortise it to well under a microsecond an element, and
#: what the pipeline prefetched and nobody read when the iterator is dropped (a restart, the end
#: of a whole-chain call, which waits for it) is at most this many elements' work. (A chunk of a
#: whole block, 20,480 elements, made the end of a call wait 4.7 s for an unused prefetch.)
FETCH_ELEMENTS = 256


def _let_go(box: list) -> None:
    """Destroy the iterator in ``box`` (its only reference) on a thread of its own: destroying a
    tf.data iterator waits for its pipeline's autotuning thread to wake (0.7–2.2 s measured after
    a sampler's first call, 4.5 s under load; 2 ms with autotuning off, which would change the
    user's pipeline), and nothing needs to wait for it. Not a daemon: the interpreter's exit waits
    for it rather than stop it mid-destruction."""
    if box and box[0] is not None:
        threading.Thread(target=box.clear, name="sgmcmc-drop-iterator").start()


def is_batch_stream(dataset: Any) -> bool:
    """Whether ``dataset`` is a ``tf.data.Dataset`` (of minibatches) rather than a dict of arrays."""
    return isinstance(dataset, tf.data.Dataset)


class BatchStream:
    """The user's pipeline as the sampler reads it: the ``Rows`` of a ``tf.data.Dataset``.

    Parameters
    ----------
    dataset
        Elements: dicts name -> ``[n, *row_shape]`` tensors, every shape static (checked by
        :func:`sgmcmc.checks.check_batch_stream`).
    n_rows
        N, the rows of the data the pipeline draws its minibatches from (the N/n scaling).
    float_dtype
        The model's floating dtype (numpy): floating entries are cast to it in the pipeline.
    """

    #: No entry can be read as a tensor in place (what SVRG's in-graph pass would slice).
    shared_in_place = False

    def __init__(self, dataset: tf.data.Dataset, n_rows: int, float_dtype: Any):
        spec = dataset.element_spec
        self.entries = list(spec)
        self.n_rows = int(n_rows)
        self.batch_size = int(spec[self.entries[0]].shape[0])
        self.row_shapes = {k: tuple(int(d) for d in spec[k].shape[1:]) for k in self.entries}
        self.dtypes = {k: output_dtype(np.dtype(spec[k].dtype.as_numpy_dtype), np.dtype(float_dtype)) for k in self.entries}
        casts = {k: tf.as_dtype(self.dtypes[k]) for k in self.entries if tf.as_dtype(self.dtypes[k]) != spec[k].dtype}
        if casts:
            dataset = dataset.map(lambda element: {k: tf.cast(v, casts[k]) if k in casts else v for k, v in element.items()})
        self.dataset = dataset

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of every entry, as the model reads it."""
        return sum(int(np.prod(s, dtype=np.int64)) * self.dtypes[k].itemsize for k, s in self.row_shapes.items())

    def elements(self, start: int = 0) -> tf.data.Dataset:
        """The pipeline repeated, from its element ``start`` on."""
        repeated = self.dataset.repeat()
        return repeated.skip(start) if start else repeated

    def first_rows(self, count: int) -> dict[str, np.ndarray]:
        """The rows of the pipeline's first ⌈count/n⌉ elements from a new iterator, joined
        (name -> ``[elements·n, …]``): what the set-up's checks look at (the trial evaluation,
        the stepsize check's row sample). The chains start on the same rows when the pipeline
        gives the same elements on every iterator; a reshuffling shuffle gives them its next order."""
        elements = max(1, -(-int(count) // self.batch_size))
        box = [iter(self.elements().take(elements).batch(elements))]
        try:
            joined = next(box[0])
        except StopIteration:
            raise ValueError("the tf.data dataset yields no elements: it must yield minibatches (dicts of tensors)") from None
        finally:
            _let_go(box)
        return {k: v.numpy().reshape(-1, *self.row_shapes[k]) for k, v in joined.items()}

    def slice(self, start: int, stop: int):
        raise RuntimeError(_NO_ROWS)

    def take(self, indices, out=None):
        raise RuntimeError(_NO_ROWS)

    def blocks(self, block_rows: int | None = None):
        raise RuntimeError(_NO_ROWS)


_NO_ROWS = (
    "a tf.data dataset has no rows to read by index or in a full-data pass: its minibatches come from the "
    "pipeline (the set-up refuses what needs more; this is a bug if reached)"
)


class StreamReader:
    """Iterations' minibatches in order from one iterator of the pipeline (module docstring),
    shared by a sampler's feeds (another block capacity, the storage estimate).

    Parameters
    ----------
    stream
        The pipeline.
    per_iteration, n_chains
        D and K: an iteration takes D·K elements.
    """

    def __init__(self, stream: BatchStream, per_iteration: int, n_chains: int):
        self.stream = stream
        self.per_iteration, self.n_chains = int(per_iteration), int(n_chains)
        #: Iterations the pipeline batches into one element of its own (one ``next()``).
        self.chunk = max(1, FETCH_ELEMENTS // (self.per_iteration * self.n_chains))
        self._lock = threading.Lock()  # feeds of other capacities fill on their own threads
        self._iterator = None
        self._first = 0  # the cached iterations are self._first + 1, …
        self._chunks: list[dict[str, np.ndarray]] = []

    @property
    def _end(self) -> int:
        return self._first + len(self._chunks) * self.chunk

    def close(self) -> None:
        """Drop the iterator and what it read: the next read starts the pipeline again."""
        with self._lock:
            box, self._iterator, self._chunks = [self._iterator], None, []
        _let_go(box)

    def _restart(self, t0: int) -> None:
        elements = self.chunk * self.per_iteration * self.n_chains
        start = t0 * self.per_iteration * self.n_chains
        pipeline = self.stream.elements(start).batch(elements, drop_remainder=True).prefetch(1)
        box, self._iterator = [self._iterator], None
        _let_go(box)
        self._iterator, self._first, self._chunks = iter(pipeline), t0, []

    def _fetch(self) -> None:
        try:
            element = next(self._iterator)
        except StopIteration:
            raise ValueError("the tf.data dataset yields no elements: it must yield minibatches (dicts of tensors)") from None
        lead = (self.chunk, self.per_iteration, self.n_chains, self.stream.batch_size)
        self._chunks.append({k: v.numpy().reshape(lead + self.stream.row_shapes[k]) for k, v in element.items()})

    def read(self, t0: int, n: int, out: dict[str, np.ndarray]) -> None:
        """Write iterations ``t0 + 1 … t0 + n``'s minibatches into ``out`` (name ->
        ``[≥ n, D, K, n_rows_per_batch, …]``)."""
        with self._lock:
            if self._iterator is None or t0 < self._first or t0 >= self._end + self.chunk:
                self._restart(t0)
            while self._chunks and self._first + self.chunk <= t0 - self.chunk:  # keep one chunk behind t0
                self._chunks.pop(0)
                self._first += self.chunk
            while self._end < t0 + n:
                self._fetch()
            done = 0
            while done < n:
                t = t0 + done
                i, offset = divmod(t - self._first, self.chunk)
                m = min(n - done, self.chunk - offset)
                for k, values in self._chunks[i].items():
                    out[k][done : done + m] = values[offset : offset + m]
                done += m


class StreamFeed(BlockFeed):
    """A :class:`~sgmcmc.data.pipeline.BlockFeed` whose blocks are read from the pipeline by a
    :class:`StreamReader` instead of gathered from arrays (same buffers, prefetching thread and
    tensors; indices −1).

    Parameters
    ----------
    reader
        The sampler's reader of the pipeline.
    indices
        The sampler's minibatch layout (D, n); nothing is drawn from it.
    chains
        The chains' indices (K of them).
    capacity
        Iterations per block.
    """

    def __init__(self, reader: StreamReader, indices: MinibatchIndices, chains, capacity: int):
        super().__init__(reader.stream, indices, 0, 0, chains, capacity)
        self.reader = reader
        for buffer in self._buffers:
            buffer["indices"][...] = -1

    def _fill(self, which: int, t0: int, n: int) -> dict[str, Any]:
        buffer = self._buffers[which]
        self.reader.read(t0, n, buffer["rows"])
        return buffer
