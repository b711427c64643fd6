"""Who computes what under a ``tf.distribute`` strategy (SPEC §12): the ``strategy=`` and
``shard_rows=`` arguments turned into a :class:`Placement`, checked before anything is computed.

Two uses, decided here:

* **Chains across replicas** (``MirroredStrategy`` over local devices; ``MultiWorkerMirroredStrategy``
  with ``shard_rows=False``): the K chains are split into R equal, contiguous groups, replica r
  (worker-major order) stepping chains ``r·K/R … (r+1)·K/R − 1`` on its device. A chain's random
  streams depend only on (seed, chain) (:mod:`sgmcmc.step.random`, :mod:`sgmcmc.data.minibatch`), so the
  chains are those of one ``n_chains=K`` run.
* **Rows sharded across workers** (``MultiWorkerMirroredStrategy``, ``shard_rows=True``, its
  default): every worker holds all K chains and its own rows; each gradient evaluation is a sum
  over the workers' strata (:func:`stratified_batch_sizes`), all-reduced
  (:mod:`sgmcmc.distribute.collective`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .collective import Collective, gather_or_raise

#: Worker w draws its minibatch indices on stream ``stream + w·SHARD_STREAM_STRIDE`` (its own
#: rows, independent of the other strata); the noise streams are the same on every worker.
SHARD_STREAM_STRIDE = 256

@dataclass(frozen=True)
class Placement:
    """Where the chains run and whose rows they read.

    Attributes
    ----------
    n_chains
        K, all chains of the run.
    worker, n_workers
        This process's index in the cluster and the cluster's size (0 and 1 without one).
    devices
        This process's replica devices (``("",)``: TensorFlow's default placement).
    chains
        Per local device, the global indices of the chains it steps.
    shard_rows
        Whether the rows are sharded across the workers (then every worker steps all K chains).
    """

    n_chains: int
    worker: int = 0
    n_workers: int = 1
    devices: tuple[str, ...] = ("",)
    chains: tuple[tuple[int, ...], ...] = ()
    shard_rows: bool = False

    @property
    def distributed(self) -> bool:
        return self.n_workers > 1 or len(self.devices) > 1

    @property
    def splits_chains(self) -> bool:
        return not self.shard_rows and self.distributed


@dataclass(frozen=True)
class RowShard:
    """This worker's part of a run whose rows are sharded (:class:`Placement` ``shard_rows``).

    Attributes
    ----------
    collective
        The sums over the workers.
    n_rows
        N = Σ N_w, all workers' rows.
    batch_size
        n = Σ n_w, the total minibatch.
    """

    collective: Collective
    n_rows: int
    batch_size: int

    @property
    def stream_offset(self) -> int:
        return SHARD_STREAM_STRIDE * self.collective.worker


def _rank(strategy) -> tuple[int, int]:
    """(this worker's index, number of workers) of a MultiWorkerMirroredStrategy: the chief (if
    any) is worker 0, then the workers in task order — the strategy's own ordering."""
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec()
    jobs = spec.jobs
    n_chief = spec.num_tasks("chief") if "chief" in jobs else 0
    n_workers = n_chief + (spec.num_tasks("worker") if "worker" in jobs else 0)
    if resolver.task_type == "chief":
        return 0, max(1, n_workers)
    return n_chief + int(resolver.task_id or 0), max(1, n_workers)


def topology(strategy, shard_rows) -> tuple[int, int, tuple[str, ...], bool]:
    """This process's (worker, n_workers, replica devices, rows sharded) under ``strategy``,
    with clear errors for what is not supported."""
    if shard_rows is not None and not isinstance(shard_rows, (bool, np.bool_)):
        raise TypeError(f"shard_rows must be True, False or None, got {shard_rows!r}")
    if strategy is None:
        if shard_rows:
            raise ValueError(
                "shard_rows=True needs strategy=tf.distribute.MultiWorkerMirroredStrategy(): each worker "
                "passes its own rows. Without a strategy, pass all rows and leave shard_rows unset"
            )
        return 0, 1, ("",), False
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"strategy must be a tf.distribute.Strategy (or None), got {type(strategy).__name__}")
    devices = tuple(strategy.extended.worker_devices)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        worker, n_workers = _rank(strategy)
    elif isinstance(strategy, (tf.distribute.MirroredStrategy, tf.distribute.OneDeviceStrategy)):
        worker, n_workers = 0, 1
    else:
        raise TypeError(
            f"strategy={type(strategy).__name__} is not supported: use tf.distribute.MirroredStrategy (chains "
            f"across this machine's devices) or tf.distribute.MultiWorkerMirroredStrategy (across processes "
            f"or machines)"
        )
    if n_workers > SHARD_STREAM_STRIDE:
        raise ValueError(f"{n_workers} workers: at most {SHARD_STREAM_STRIDE} are supported")
    sharded = bool(shard_rows) if shard_rows is not None else n_workers > 1
    if sharded and not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError(
            f"shard_rows=True splits the rows across the workers of a MultiWorkerMirroredStrategy; with "
            f"{type(strategy).__name__} every replica reads this process's rows: leave shard_rows unset"
        )
    if sharded and len(devices) != 1:
        raise ValueError(
            f"shard_rows=True runs one replica per worker; this worker has {len(devices)} devices "
            f"({', '.join(devices)}). Start one worker per device (e.g. CUDA_VISIBLE_DEVICES per process)"
        )
    return worker, n_workers, devices, sharded


def placement(strategy, shard_rows, n_chains: int, what: str, shard_refusal: str | None) -> Placement:
    """Check ``strategy``/``shard_rows`` for a run of ``n_chains`` chains and say who computes
    what; clear errors before anything is computed. ``shard_refusal``: why the run's dynamics or
    estimator (named by ``what``) cannot have its rows sharded, or None."""
    worker, n_workers, devices, sharded = topology(strategy, shard_rows)
    if strategy is None:
        return Placement(n_chains, chains=(tuple(range(n_chains)),))
    if sharded:
        if shard_refusal:
            raise ValueError(
                f"{what} cannot run with shard_rows=True: {shard_refusal}. Use shard_rows=False (every worker "
                f"passes all rows; the chains are split across workers) or another estimator"
            )
        return Placement(n_chains, worker, n_workers, devices, (tuple(range(n_chains)),), True)
    replicas = n_workers * len(devices)
    if n_chains % replicas:
        raise ValueError(
            f"n_chains={n_chains} chains cannot be split evenly over the strategy's {replicas} replicas "
            f"({n_workers} worker(s) x {len(devices)} device(s)): use a multiple of {replicas}"
        )
    per = n_chains // replicas
    first = worker * len(devices)
    chains = tuple(tuple(range((first + j) * per, (first + j + 1) * per)) for j in range(len(devices)))
    return Placement(n_chains, worker, n_workers, devices, chains, False)


def _digest(value) -> int:
    """A CRC-32 of ``value``'s content: arrays by their bytes, dicts by their sorted items."""
    if isinstance(value, dict):
        return zlib.crc32(repr([(k, _digest(value[k])) for k in sorted(value)]).encode())
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.ascontiguousarray(value)
        return zlib.crc32(array.tobytes(), zlib.crc32(f"{array.dtype.str}{array.shape}".encode()))
    return zlib.crc32(repr(value).encode())


def row_collective(strategy, shard_rows, what: str, same: dict) -> Collective | None:
    """For a pass over all rows outside a sampler (``full_gradients``, ``check_stepsize``, named
    by ``what``): the collective that adds up the workers' terms when the rows are sharded (a
    ``MultiWorkerMirroredStrategy`` of two or more workers, ``shard_rows`` True or unset), else
    None (this process holds all rows). The same checks as the samplers'; and every worker must
    pass the same ``same`` (name -> value: the point, the settings), compared by digest before
    any work, else a ValueError on every worker naming what differs."""
    worker, n_workers, _, sharded = topology(strategy, shard_rows)
    if not (sharded and n_workers > 1):
        return None
    collective = Collective(n_workers, worker)
    differ, others = differing_values(collective, same, f"{what} (every worker calls it with its rows)")
    if differ:
        raise ValueError(
            f"{what} with rows sharded: every worker must pass the same {', '.join(differ)}; "
            f"worker(s) {', '.join(map(str, others))} passed other values than worker {worker}"
        )
    return collective


def differing_values(collective: Collective, values: dict, what: str) -> tuple[list[str], list[int]]:
    """Which of ``values`` (name -> value) differ between the workers, compared by digest (one
    gather, named ``what`` if a worker does not reach it), and the workers whose values differ
    from this one's."""
    names = sorted(values)
    mine = np.array([_digest(values[k]) for k in names], np.int64)
    everyone = gather_or_raise(collective, mine, what)
    differ = [k for j, k in enumerate(names) if np.any(everyone[:, j] != mine[j])]
    return differ, [w for w in range(collective.n_workers) if np.any(everyone[w] != mine)]


def stratified_batch_sizes(batch_size: int, shard_rows: list[int]) -> list[int]:
    """n_w for each worker: ``batch_size``·N_w/N rounded by largest remainder (ties to the lower
    worker index), so that Σ n_w = n exactly and each n_w is within 1 of its share (so n_w ≤ N_w:
    the share n·N_w/N ≤ N_w, an integer). Every n_w ≥ 1, else a ValueError naming the shard (the estimate Σ_w (N_w/n_w)·Σ_{S_w} is
    unbiased for any such allocation; proportional allocation keeps its variance near that of
    one uniform minibatch of n)."""
    total = int(sum(shard_rows))
    shares = np.array(shard_rows, np.float64) * batch_size / total
    sizes = np.floor(shares).astype(np.int64)
    order = sorted(range(len(sizes)), key=lambda w: (-(shares[w] - sizes[w]), w))
    for w in order[: batch_size - int(sizes.sum())]:
        sizes[w] += 1
    for w, (n_w, rows) in enumerate(zip(sizes, shard_rows)):
        if n_w < 1:
            raise ValueError(
                f"worker {w}'s shard has {rows} of N = {total} rows: its share of minibatch_size={batch_size} "
                f"rounds to 0 rows. Use a larger minibatch (at least {int(np.ceil(total / max(1, rows)))}) or "
                f"balance the shards"
            )
    return [int(s) for s in sizes]
