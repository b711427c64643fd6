"""Checkpoints of whole-chain runs (SPEC §10): resume after a crash, losing at most
``checkpoint_every`` iterations.

A checkpoint directory holds

* ``shard_00000.npz``, ``shard_00001.npz``, …: the kept samples, appended, never rewritten —
  each shard holds the draws kept since the previous checkpoint and the estimates (log
  posterior, gradients) that became known since then (a kept sample's estimate is made by the
  next iteration, so it can land one shard later than its draw);
* ``state_00000.*``, …: the sampler's state (:meth:`sgmcmc.Sampler.save`) at each checkpoint;
* ``manifest.json``: the commit point — the fingerprint, the seed in use, the iteration, the
  shards and the state that belong to it, and whether the run finished.

Every file is written under a temporary name and renamed into place (atomic on POSIX), the
manifest last; files the manifest does not list (a write that a kill interrupted) are ignored
and overwritten later. Resuming restores the state the manifest names and continues; since the
chain does not depend on how it is cut into chunks, the result equals the uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
FORMAT = 1


def _describe(value: Any) -> Any:
    """A JSON-able description of a setting; callables (schedules, bijectors) by their repr."""
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def fingerprint(method: str, settings: dict, shapes: dict, n_rows: int, n_chains: int, options: dict) -> str:
    """What "the same arguments" means for a resume: the method, its settings, the parameters'
    names and shapes, N, the number of chains and the run options (including the seed, when one
    was given). Callables and data are not hashed."""
    description = {
        "method": method,
        "settings": _describe(settings),
        "shapes": {k: list(v) for k, v in shapes.items()},
        "n_rows": int(n_rows),
        "n_chains": int(n_chains),
        "options": _describe(options),
    }
    text = json.dumps(description, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16] + ":" + text


def _replace_atomically(path: str, write) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    write(tmp)
    os.replace(tmp, path)


class CheckpointDirectory:
    """Reads and writes one run's checkpoint directory."""

    def __init__(self, directory: str):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.manifest: dict | None = None
        path = os.path.join(self.directory, MANIFEST)
        if os.path.exists(path):
            with open(path) as f:
                self.manifest = json.load(f)

    def check(self, expected: str) -> None:
        """Refuse a directory written by a different call."""
        if self.manifest is None:
            return
        got = self.manifest["fingerprint"]
        if got != expected:
            raise ValueError(
                f"checkpoint_dir={self.directory!r} holds a run with other arguments:\n  saved: "
                f"{got.split(':', 1)[1]}\n  now:   {expected.split(':', 1)[1]}\nUse another directory, "
                f"or delete this one to start again"
            )

    # -- reading ---------------------------------------------------------------------------
    def load_arrays(self) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray] | None, int, int]:
        """Concatenate the listed shards: draws ``(K, m, …)``, log posteriors ``(K, m_e)``,
        gradients ``(K, m_e, …)`` or None, and the counts ``m`` and ``m_e``."""
        draws, log_posts, grads = {}, [], {}
        for name in self.manifest["shards"]:
            with np.load(os.path.join(self.directory, name)) as shard:
                for key in shard.files:
                    kind, _, param = key.partition("/")
                    if kind == "draws":
                        draws.setdefault(param, []).append(shard[key])
                    elif kind == "grads":
                        grads.setdefault(param, []).append(shard[key])
                    elif kind == "log_posterior":
                        log_posts.append(shard[key])
        cat = lambda parts: np.concatenate(parts, axis=1)  # noqa: E731
        draws = {k: cat(v) for k, v in draws.items()}
        log_post = cat(log_posts) if log_posts else None
        grads = {k: cat(v) for k, v in grads.items()} or None
        return draws, log_post, grads, self.manifest["n_draws"], self.manifest["n_estimates"]

    @property
    def state_prefix(self) -> str:
        return os.path.join(self.directory, self.manifest["state"])

    # -- writing -----------------------------------------------------------------------------
    def commit(
        self,
        sampler,
        fingerprint_text: str,
        shard: dict[str, np.ndarray],
        n_draws: int,
        n_estimates: int,
        finished: bool,
    ) -> None:
        """Append ``shard``, save the sampler's state, then rewrite the manifest (the commit)."""
        previous = self.manifest or {"shards": [], "checkpoints": 0}
        index = previous["checkpoints"]
        shards = list(previous["shards"])
        if shard:
            name = f"shard_{index:05d}.npz"
            _replace_atomically(os.path.join(self.directory, name), lambda p: _savez(p, shard))
            shards.append(name)
        state = f"state_{index:05d}"
        sampler._checkpoint().write(os.path.join(self.directory, state))
        manifest = {
            "format": FORMAT,
            "fingerprint": fingerprint_text,
            "seed": sampler.seed,
            "iteration": sampler.iteration,
            "n_draws": n_draws,
            "n_estimates": n_estimates,
            "shards": shards,
            "state": state,
            "checkpoints": index + 1,
            "finished": finished,
        }

        def write(path):
            with open(path, "w") as f:
                json.dump(manifest, f, indent=1)
                f.flush()
                os.fsync(f.fileno())

        _replace_atomically(os.path.join(self.directory, MANIFEST), write)
        self._remove_stale_states(keep=state)
        self.manifest = manifest

    def _remove_stale_states(self, keep: str) -> None:
        for name in os.listdir(self.directory):
            if name.startswith("state_") and not name.startswith(keep + "."):
                try:
                    os.remove(os.path.join(self.directory, name))
                except OSError:
                    pass


def _savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
