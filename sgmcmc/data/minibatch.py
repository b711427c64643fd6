"""Minibatch row indices, a function of (seed, stream, chain, iteration, draw) alone (SPEC §11).

Each chain has its own Philox-4×64 key, made from the seed, a stream number (the chain's own
draws, the storage stream, the mode search) and the chain's index
(:func:`philox_key`); the minibatches of global iteration t (1-based) come from the counter
blocks ``(t − 1)·B … t·B − 1``, B blocks of four 64-bit words per iteration. So a whole chunk's
indices are one call of the generator per chain, a chain does not depend on how it is cut into
chunks nor on how many chains run beside it, and the step API draws the same rows as the loop.

How n rows of N are chosen (exactly SPEC §3):

* ``replace=True``: n i.i.d. uniform rows, ``word mod N`` (bias below N/2^64).
* n ≤ N/2, without replacement — *first distinct*: M i.i.d. uniform draws, keep the first n
  distinct in draw order. That is sequential sampling with every repeat rejected, so the
  ordered n values are uniform over ordered n-tuples of distinct rows. M is the mean plus 4
  standard deviations (+1) of the number of draws that collect n distinct values; when M draws
  hold fewer, the whole draw is repeated from a fresh counter (attempt a ≥ 1 in the counter's
  top word), which keeps the result exact. Rows whose first n draws are distinct (81 % for
  n = 500, N = 581,012) are found by one vectorised sort; the others by two more
  (:func:`first_distinct`). Where a repeat-free row is unlikely (prod (1 − i/N) < ½: N = 3,000,
  n = 500), every row goes to :func:`first_distinct` at once: 38 → 26 ms for 1,000 minibatches.
* n > N/2: the rows of the n largest of N i.i.d. 53-bit keys (a tie has probability ~N²/2^54).
* n = N: every row in order (no draw: the log-likelihood is a sum).
"""

from __future__ import annotations

import math

import numpy as np

_MASK64 = (1 << 64) - 1

#: Streams of draws that must not overlap.
CHAIN_STREAM, STORAGE_STREAM, MODE_SEARCH_STREAM = 0, 1, 2


def splitmix64(x: int) -> int:
    """SplitMix64's finaliser: a bijective 64-bit mix, so nearby seeds give unrelated keys."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def philox_key(seed: int, stream: int, chain: int) -> int:
    """The 128-bit Philox key of chain ``chain``'s draws of stream ``stream`` for ``seed``."""
    low = splitmix64(int(seed) & _MASK64)
    high = splitmix64(((int(stream) & 0xFFFF) << 48) ^ (int(chain) & ((1 << 48) - 1)) ^ low)
    return low | (high << 64)


def draws_for_distinct(n_rows: int, batch_size: int) -> int:
    """M: the mean + 4 sd (+1) of the number of i.i.d. uniform draws from ``[0, n_rows)`` that
    collect ``batch_size`` distinct values (draw i+1 is new with probability (N − i)/N)."""
    i = np.arange(batch_size, dtype=np.float64)
    p = (n_rows - i) / n_rows
    mean, var = np.sum(1 / p), np.sum((1 - p) / p**2)
    return int(math.ceil(mean + 4 * math.sqrt(var))) + 1


def first_distinct(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``values`` ``[R, M]``, its first ``n`` distinct values in draw order
    ``[R, n]``, and whether the row has that many (where not, the row's output is meaningless).

    Vectorised over rows: sort ``value·M + position`` (one key per draw, so equal values sort by
    position), mark each value's first occurrence, then sort the positions of the first
    occurrences (the rest pushed to the end) and take the first n."""
    rows, m = values.shape
    keys = values * m + np.arange(m, dtype=np.int64)
    keys.sort(axis=1)
    value, position = keys // m, keys % m
    first = np.ones(keys.shape, bool)
    first[:, 1:] = value[:, 1:] != value[:, :-1]
    positions = np.where(first, position, m)
    positions.sort(axis=1)
    taken = positions[:, :n]
    enough = taken[:, -1] < m
    return np.take_along_axis(values, np.minimum(taken, m - 1), axis=1), enough


class MinibatchIndices:
    """The row indices of every minibatch of a sampler.

    Parameters
    ----------
    n_rows
        N, the rows of the dataset.
    batch_size
        n, the rows of a minibatch.
    replace
        Rows i.i.d. with replacement (``minibatch_replace=True``) instead of an n-subset.
    per_iteration
        Minibatches each iteration draws per chain (SGHMC: L, one per inner step).
    """

    def __init__(self, n_rows: int, batch_size: int, replace: bool = False, per_iteration: int = 1):
        self.n_rows, self.batch_size = int(n_rows), int(batch_size)
        self.replace, self.per_iteration = bool(replace), int(per_iteration)
        if self.replace:
            self.mode, width = "replace", self.batch_size
        elif self.batch_size == self.n_rows:
            self.mode, width = "all", 0
        elif 2 * self.batch_size > self.n_rows:
            self.mode, width = "top", self.n_rows
        else:
            self.mode, width = "distinct", draws_for_distinct(self.n_rows, self.batch_size)
        self.width = width  # 64-bit words one minibatch uses
        #: "distinct": the chance that a minibatch's first n draws are distinct, prod (1 - i/N);
        #: below 1/2, :meth:`_choose` skips the look for repeat-free rows (the same result).
        self.p_no_repeat = 1.0
        if self.mode == "distinct":
            self.p_no_repeat = float(np.exp(np.sum(np.log1p(-np.arange(self.batch_size) / self.n_rows))))
        self.blocks_per_iteration = -(-self.per_iteration * width // 4)

    def draw(self, seed: int, stream: int, chains: np.ndarray, t0: int, n_iters: int) -> np.ndarray:
        """``[n_iters, per_iteration, len(chains), n]`` int64: the minibatches of iterations
        ``t0 + 1 … t0 + n_iters`` of the chains numbered ``chains``."""
        chains = np.asarray(chains, dtype=np.int64).reshape(-1)
        shape = (n_iters, self.per_iteration, len(chains), self.batch_size)
        if self.mode == "all":
            return np.broadcast_to(np.arange(self.n_rows, dtype=np.int64), shape).copy()
        out = np.empty(shape, np.int64)
        for j, chain in enumerate(chains):
            key = philox_key(seed, stream, int(chain))
            words = self._words(key, t0 * self.blocks_per_iteration, n_iters)
            out[:, :, j] = self._choose(words, key, t0)
        return out

    def _words(self, key: int, counter: int, n_iters: int) -> np.ndarray:
        """``[n_iters, per_iteration, width]`` uint64 from consecutive counter blocks."""
        raw = np.random.Philox(key=key, counter=counter).random_raw(n_iters * self.blocks_per_iteration * 4)
        raw = raw.reshape(n_iters, self.blocks_per_iteration * 4)[:, : self.per_iteration * self.width]
        return raw.reshape(n_iters, self.per_iteration, self.width)

    def _choose(self, words: np.ndarray, key: int, t0: int) -> np.ndarray:
        n, big_n = self.batch_size, np.uint64(self.n_rows)
        if self.mode == "replace":
            return (words % big_n).astype(np.int64)
        if self.mode == "top":
            keys = words >> np.uint64(11)
            return np.argpartition(keys, self.n_rows - n, axis=-1)[..., self.n_rows - n :].astype(np.int64)
        values = (words % big_n).astype(np.int64)
        if self.p_no_repeat < 0.5:  # nearly every row has a repeat: all rows at once (the same result)
            firsts, enough = first_distinct(values.reshape(-1, self.width), n)
            chosen = firsts.reshape(*values.shape[:-1], n)
            where = np.unravel_index(np.arange(enough.size), values.shape[:-1])
        else:
            chosen = values[..., :n].copy()
            ordered = np.sort(chosen, axis=-1)
            where = np.nonzero(np.any(ordered[..., 1:] == ordered[..., :-1], axis=-1))
            if not len(where[0]):
                return chosen
            firsts, enough = first_distinct(values[where], n)
            chosen[where] = firsts
        for j in np.flatnonzero(~enough):  # fewer than n distinct in M draws: draw again
            i, d = int(where[0][j]), int(where[1][j])
            chosen[i, d] = self._first_distinct(values[i, d], key, int(t0) + i, d)
        return chosen

    def _first_distinct(self, values: np.ndarray, key: int, t_before: int, d: int) -> np.ndarray:
        """The first n distinct of ``values`` in draw order; a fresh attempt while too few."""
        attempt = 0
        while True:
            firsts, enough = first_distinct(values[None], self.batch_size)
            if enough[0]:
                return firsts[0]
            attempt += 1
            counter = t_before * self.blocks_per_iteration + (attempt << 192) + (d << 128)
            raw = np.random.Philox(key=key, counter=counter).random_raw(-(-self.width // 4) * 4)[: self.width]
            values = (raw % np.uint64(self.n_rows)).astype(np.int64)
