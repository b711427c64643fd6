"""``checkpoint_dir`` under a ``tf.distribute`` strategy (SPEC §12; issue 21, item 4).

The single-process checkpoint directory (:mod:`sgmcmc.run.checkpoints`) serves both uses of a
strategy (:mod:`.placement`):

* **Rows sharded across workers.** Every worker holds all K chains and the same state (the same
  noise, all-reduced gradients; the estimators allowed under sharding keep only all-reduced
  quantities, except SAGA's tables of each worker's rows: SAGA is refused with ``checkpoint_dir``
  under sharding, ``EstimatorSpec.state_per_worker``). So the run has ONE checkpoint: the chief
  (worker 0) writes it, exactly the files a single-process run writes; the other workers never
  write there (the directory is not even created by them). On a rerun every worker reads the
  chief's manifest, state and shards and all resume at the same iteration. ``checkpoint_dir``
  must therefore be one directory every worker sees: on several machines a shared filesystem.
  Before anything else the workers compare the manifest each of them read
  (:func:`agree_on_directory`): a worker that sees another one, or none (a local disk), makes
  every worker raise the same ValueError. The fingerprint covers every worker's arguments and
  rows: each worker's own :func:`~sgmcmc.run.checkpoints.fingerprint` (its shard's data digest
  included) is gathered and combined in worker order
  (:func:`~sgmcmc.run.checkpoints.combine_fingerprints`), so every worker compares the same
  combined fingerprint with the same manifest and a change on any worker is refused by all,
  naming the worker and what changed. At each checkpoint (the same iterations on every worker:
  their chunks are the same) the workers gather a digest of their state; the chief writes only
  when they agree, then tells the others whether its commit succeeded
  (:func:`commit_on_chief`), so a failed write raises on every worker instead of leaving the
  others waiting in the next all-reduce.
* **Chains split across replicas.** The replicas' chains are independent, so each replica
  (global index r, worker-major) checkpoints its own chains in ``checkpoint_dir/replica-<r>/``
  (an ordinary checkpoint directory, written by the worker that runs the replica) and resumes
  from its own last checkpoint: after a crash replicas may stand at different iterations; each
  continues its chains exactly, and the gathered result equals the uninterrupted run's.
  ``checkpoint_dir/replicas.json`` (written by the chief before any replica starts) records the
  split (number of replicas, n_chains) and the seed in use (a ``seed=None`` run resumes with
  the seed it drew); a call that splits the chains otherwise is refused, naming the split that
  resumes. With several workers the directory must again be shared (checked as above).

A single-process directory is refused with a strategy that splits the chains, and a
``replicas.json`` directory without one (each names the call that resumes it).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable

import numpy as np
import tensorflow as tf

from .checkpoints import MANIFEST, CheckpointDirectory, combine_fingerprints, write_json_atomically
from .saved_state import state_checkpoint
from ..distribute.collective import Collective, gather_or_raise
from ..distribute.placement import Placement

#: The split of a run whose chains are split over replicas (its top-level file).
RECORD = "replicas.json"
SHARED = (
    "every worker must see the same checkpoint_dir: on several machines a directory on a shared "
    "filesystem (NFS or a cluster filesystem), not each machine's local disk"
)


def gather_bytes(collective: Collective, data: bytes, what: str) -> list[bytes]:
    """Every worker's ``data`` (any lengths), in worker order: the lengths, then the bytes padded
    to the longest."""
    lengths = gather_or_raise(collective, np.array([len(data)], np.int64), what)[:, 0]
    padded = np.zeros(int(lengths.max()), np.int32)  # a byte an int32: the collective takes no uint8
    padded[: len(data)] = np.frombuffer(data, np.uint8)
    rows = gather_or_raise(collective, padded, what).astype(np.uint8)
    return [rows[w, : lengths[w]].tobytes() for w in range(collective.n_workers)]


def differing(collective: Collective, digest: bytes, what: str) -> list[int]:
    """The workers whose ``digest`` differs from the chief's (the same list on every worker)."""
    digests = gather_bytes(collective, digest, what)
    return [w for w, d in enumerate(digests) if d != digests[0]]


def agree_or_raise(collective: Collective, error: BaseException | None, what: str) -> None:
    """After a step every worker took on its own (``error``: its failure, or None): raise on
    every worker if any failed — this worker's own error, else a ValueError naming the others."""
    failed = gather_or_raise(collective, np.array([error is not None], np.int64), what)[:, 0]
    if error is not None:
        raise error
    others = [w for w in range(collective.n_workers) if failed[w]]
    if others:
        raise ValueError(f"worker(s) {', '.join(map(str, others))} refused {what} (see their output)")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def agree_on_directory(collective: Collective, directory: str) -> None:
    """Refuse, on every worker alike, a ``directory`` whose top-level files (``manifest.json``,
    ``replicas.json``) some worker sees otherwise than the chief."""
    seen = hashlib.sha256(_read(os.path.join(directory, MANIFEST)) + b"\0" + _read(os.path.join(directory, RECORD)))
    differ = differing(collective, seen.digest(), f"the check of checkpoint_dir={directory!r}")
    if differ:
        raise ValueError(
            f"checkpoint_dir={directory!r}: worker(s) {', '.join(map(str, differ))} read other files there than "
            f"worker 0 (the chief) — another manifest.json, or none: {SHARED}. The chief writes the "
            f"checkpoints and every worker resumes from them"
        )


def combined_fingerprint(collective: Collective, own: str) -> str:
    """The run's fingerprint from every worker's own (each covering its shard's rows)."""
    texts = gather_bytes(collective, own.encode(), "the checkpoint fingerprint exchange")
    return combine_fingerprints([t.decode() for t in texts])


def state_digest(sampler) -> bytes:
    """A digest of every variable in the sampler's checkpoint (what a resume restores)."""
    h = hashlib.blake2b(digest_size=16)
    checkpoint = state_checkpoint(sampler)  # held: the view keeps only a weak reference
    for item in tf.train.TrackableView(checkpoint).descendants():
        if isinstance(item, tf.Variable):
            h.update(np.ascontiguousarray(item.numpy()).tobytes())
    return h.digest()


def commit_on_chief(collective: Collective, sampler, commit: Callable[[], None], directory: str) -> None:
    """One checkpoint of a run whose rows are sharded, called by every worker at the same
    iteration: the workers' state digests are compared (they must hold one state, since every
    worker will resume from the chief's), the chief runs ``commit()``, and every worker learns
    whether it succeeded — a failure raises on every worker (the chief: its own error)."""
    differ = differing(collective, state_digest(sampler), "a checkpoint")
    if differ:
        raise RuntimeError(
            f"at iteration {sampler.iteration} the state of worker(s) {', '.join(map(str, differ))} differs from the "
            f"chief's: with rows sharded every worker must hold the same chains, and a checkpoint of the "
            f"chief's state could not resume them. Nothing was written to checkpoint_dir={directory!r} (a bug: "
            f"please report it)"
        )
    error = None
    if collective.worker == 0:
        try:
            commit()
        except Exception as failure:  # noqa: BLE001 - raised below, after the others know
            error = failure
    failed = gather_or_raise(collective, np.array([error is not None], np.int64), "the end of a checkpoint")[0, 0]
    if error is not None:
        raise error
    if failed:
        raise RuntimeError(
            f"worker 0 (the chief) could not write the checkpoint at iteration {sampler.iteration} to "
            f"checkpoint_dir={directory!r} (see its output); the last committed checkpoint is intact"
        )


def refuse_replica_layout(directory: str) -> None:
    """A run without chains split over replicas: refuse a directory written by one that had them."""
    text = _read(os.path.join(directory, RECORD))
    if text:
        record = json.loads(text)
        raise ValueError(
            f"checkpoint_dir={directory!r} holds a run whose {record['n_chains']} chains were split over "
            f"{record['replicas']} replicas ({RECORD}): resume it with n_chains={record['n_chains']} and a strategy "
            f"of {record['replicas']} replicas (shard_rows=False under MultiWorkerMirroredStrategy), or start afresh "
            f"(delete the directory or pass another checkpoint_dir)"
        )


class ReplicaCheckpoints:
    """The checkpoint directory of a run whose chains are split over replicas: ``replicas.json``
    and one :class:`~sgmcmc.run.checkpoints.CheckpointDirectory` per replica (module docstring).

    Reading it checks (on every worker alike) that the workers see the same files, that it does
    not hold a run of another kind, and that the call splits the chains as the saved run did."""

    def __init__(self, directory, place: Placement, collective: Collective | None):
        self.directory = os.fspath(directory)
        self.place = place
        self.replicas = place.n_workers * len(place.devices)
        if collective is not None:
            agree_on_directory(collective, self.directory)
        if os.path.exists(os.path.join(self.directory, MANIFEST)):
            raise ValueError(
                f"checkpoint_dir={self.directory!r} holds a run whose chains were not split over replicas (one "
                f"process, or rows sharded across workers): resume it as it was called (without this strategy, "
                f"or with shard_rows=True), or start afresh (delete the directory or pass another checkpoint_dir)"
            )
        text = _read(os.path.join(self.directory, RECORD))
        self.record = json.loads(text) if text else None
        if self.record is not None and (self.record["replicas"], self.record["n_chains"]) != (self.replicas, place.n_chains):
            raise ValueError(
                f"checkpoint_dir={self.directory!r} holds a run whose {self.record['n_chains']} chains were split over "
                f"{self.record['replicas']} replicas; this call splits {place.n_chains} chains over {self.replicas} "
                f"({place.n_workers} worker(s) x {len(place.devices)} device(s)). Each replica resumes its own chains: "
                f"call with n_chains={self.record['n_chains']} and a strategy of {self.record['replicas']} replicas, or "
                f"start afresh (delete the directory or pass another checkpoint_dir)"
            )

    @property
    def seed(self) -> int | None:
        """The seed the saved run used (None before any run)."""
        return None if self.record is None else self.record["seed"]

    def start(self, seed: int) -> None:
        """The chief records the split and the seed in use, once, before any replica runs."""
        if self.record is not None or self.place.worker != 0:
            return
        os.makedirs(self.directory, exist_ok=True)
        record = {"format": 1, "replicas": self.replicas, "n_chains": self.place.n_chains, "seed": int(seed)}
        write_json_atomically(os.path.join(self.directory, RECORD), record)
        self.record = record

    def replica(self, j: int) -> CheckpointDirectory:
        """Local replica j's own directory (named by its global index)."""
        r = self.place.worker * len(self.place.devices) + j
        return CheckpointDirectory(os.path.join(self.directory, f"replica-{r}"))
