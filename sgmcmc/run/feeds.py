"""A sampler's minibatch feeds, and the loop that hands a compiled program its blocks.

A feed (:mod:`sgmcmc.data.pipeline`, :mod:`sgmcmc.data.stream`) gathers the rows of a block of
iterations on the host, the next block on its thread meanwhile. A sampler has up to three kinds,
each on its own random stream: ``"chain"`` (the chains' minibatches), ``"storage"`` (the estimate
stored at a run's end, one iteration a block) and ``"mode"`` (the control variate's mode search,
one chain); :func:`run_blocks` runs n iterations as calls of a compiled program, a block each.
"""

from __future__ import annotations

from typing import Callable

from ..data.minibatch import CHAIN_STREAM, MODE_SEARCH_STREAM, STORAGE_STREAM, MinibatchIndices
from ..data.pipeline import BlockFeed, iterations_per_block
from ..data.rows import Rows
from ..data.stream import BatchStream, StreamFeed, StreamReader
from ..distribute.placement import RowShard


class ChainFeeds:
    """The feeds of one sampler, made on first use and kept (their buffers with them).

    ``rows``: the arrays (:class:`~sgmcmc.data.rows.Rows`) or the user's ``tf.data`` pipeline
    (:class:`~sgmcmc.data.stream.BatchStream`); ``minibatches``: the chains' index scheme;
    ``chain_ids``: the global indices of the chains; ``shard``: this worker's part when the rows
    are sharded across workers (each worker draws from its own rows, on its own stream)."""

    def __init__(self, rows: Rows | BatchStream, minibatches: MinibatchIndices, seed: int, chain_ids: list[int],
                 shard: RowShard | None = None):
        self.rows = rows
        self.minibatches = minibatches
        self.seed = seed
        self.chain_ids = chain_ids
        self.shard = shard
        self._feeds: dict = {}
        self._reader: StreamReader | None = None  # a tf.data pipeline's iterator

    def get(self, kind: str = "chain", capacity: int | None = None) -> BlockFeed:
        """The feed of ``kind`` (module docstring); ``capacity`` overrides the iterations per block."""
        key = (kind, capacity)
        if key not in self._feeds:
            self._feeds[key] = self._stream_feed(kind, capacity) if isinstance(self.rows, BatchStream) else self._block_feed(kind, capacity)
        return self._feeds[key]

    def for_sampling(self, thin: int) -> BlockFeed:
        """The chains' feed for sampling calls: a block holds at least one group of ``thin``."""
        feed = self.get("chain")
        return feed if thin <= feed.capacity else self.get("chain", thin)

    def _block_feed(self, kind: str, capacity: int | None) -> BlockFeed:
        if kind == "chain":
            indices, chains, stream = self.minibatches, self.chain_ids, CHAIN_STREAM
        else:
            indices = MinibatchIndices(self.minibatches.n_rows, self.minibatches.batch_size, self.minibatches.replace, 1)
            chains = [0] if kind == "mode" else self.chain_ids
            stream = MODE_SEARCH_STREAM if kind == "mode" else STORAGE_STREAM
            capacity = 1 if kind == "storage" else capacity
        if self.shard is not None:
            stream += self.shard.stream_offset
        if capacity is None:  # with rows sharded: from the total n, the same on every worker
            sizing = indices if self.shard is None else MinibatchIndices(
                self.shard.n_rows, self.shard.batch_size, indices.replace, indices.per_iteration
            )
            capacity = iterations_per_block(sizing, len(chains), self.rows.row_bytes)
        return BlockFeed(self.rows, indices, self.seed, stream, chains, capacity)

    def _stream_feed(self, kind: str, capacity: int | None) -> StreamFeed:
        """A feed of the user's ``tf.data`` pipeline (:mod:`sgmcmc.data.stream`): every kind
        reads the chains' own elements through one reader, so the storage estimate at a run's
        end is made on the minibatch of the iteration that follows, as a continuing run makes it."""
        if kind == "mode":
            raise RuntimeError("a tf.data dataset has no mode search (the control variate is refused at set-up)")
        if self._reader is None:
            self._reader = StreamReader(self.rows, self.minibatches.per_iteration, len(self.chain_ids))
        if capacity is None:  # as for arrays: the same compiled programs
            capacity = iterations_per_block(self.minibatches, len(self.chain_ids), self.rows.row_bytes)
        capacity = 1 if kind == "storage" else capacity
        return StreamFeed(self._reader, self.minibatches, self.chain_ids, capacity)

    def reseed(self, seed: int) -> None:
        """Draw on ``seed``'s streams from now on: the feeds are made again on their next use."""
        self.seed = int(seed)
        self.close_feeds()

    def close_feeds(self) -> None:
        """Free the feeds' block buffers (made again on next use)."""
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()

    def close(self) -> None:
        """Free the buffers and close a ``tf.data`` pipeline's iterator."""
        self.close_feeds()
        if self._reader is not None:
            self._reader.close()

    def restart_stream(self) -> bool:
        """A ``tf.data`` pipeline starts again from its first element (a reset); False for arrays,
        whose draws are a function of the seed and the iteration."""
        if self._reader is None:
            return False
        for feed in self._feeds.values():
            feed.cancel()
        self._reader.close()
        return True

    @property
    def holds_buffers(self) -> bool:
        return bool(self._feeds)


def run_blocks(n: int, feed: BlockFeed, per_call: int, call: Callable, start: int) -> list:
    """Run ``n`` iterations from iteration ``start`` as calls of at most ``per_call``
    iterations, each given its block (the next one gathered meanwhile); ``call(m, block)`` runs m
    of them and returns ``(done, diverged_at, …)``. Stops at a divergence or when a call completes
    fewer iterations than asked (a kernel's ``ready``). Returns every call's result."""
    results, t, remaining = [], start, n
    while True:
        m = min(remaining, per_call)
        after = min(remaining - m, per_call)
        block = feed.block(t, max(m, 1), prefetch=(t + m, after) if after else None)
        result = call(m, block)
        results.append(result)
        done = int(result[0])
        t, remaining = t + done, remaining - done
        if int(result[1]) or remaining <= 0 or done < m:
            feed.cancel()
            return results
