"""``sample(..., checkpoint_dir=...)``: a run that survives being killed (SPEC §10 for ``sample``).

The directory holds, committed at the start of every round (after the mode search, the curvature
and the choice, and again after each round's assessment):

* ``plan-<k>.npz``: what the set-up found — the mode, the whitening matrix (the metric in use, after
  any re-estimation), the stepsize, the minibatch, the report's κ — so a resumed run skips the
  mode search and the curvature;
* ``draws-<k>.npz``: every draw kept so far (the sampler's arrays, their global iterations and
  log-posterior estimates);
* ``state-<k>/``: the sampler's whole state (:meth:`~sgmcmc.run.sampler.Sampler.save`);
* ``manifest.json``: the call's fingerprint (:func:`~sgmcmc.run.checkpoints.fingerprint`: the
  settings, the data, the functions, the start), the rounds' counters and which ``<k>`` is
  current — written last, under a temporary name renamed into place (the commit point), so a
  kill at any moment leaves the last committed round intact.

Resuming restores the sampler's state and the draws and re-enters the rounds where the commit
was made; since the chain does not depend on how it is cut into calls, and the rounds' decisions
depend only on the draws and the counters, the result is bit-identical to an uninterrupted run
with the same seed (``max_time`` aside: a clock is not reproducible).
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any

import numpy as np

from ..run.checkpoints import CheckpointDirectory, write_json_atomically

MANIFEST = "manifest.json"


class SampleCheckpoint:
    """One ``sample`` run's checkpoint directory.

    Parameters
    ----------
    directory
        The directory (made if missing).
    fingerprint
        The call's :func:`~sgmcmc.run.checkpoints.fingerprint`; a directory written by a call with
        another one is refused, naming what changed.
    """

    def __init__(self, directory: str, fingerprint: str):
        self.directory = os.fspath(directory)
        store = CheckpointDirectory(self.directory)
        store.check(fingerprint)
        self.fingerprint = fingerprint
        self.manifest: dict | None = store.manifest

    @property
    def resumable(self) -> bool:
        return self.manifest is not None

    def plan(self) -> dict[str, np.ndarray]:
        with np.load(os.path.join(self.directory, f"plan-{self.manifest['commit']}.npz")) as f:
            return {k: f[k] for k in f.files}

    def draws(self) -> tuple[list[dict[str, np.ndarray]], list[np.ndarray], list[np.ndarray]]:
        """The kept draws as one piece (or none): (draws, log posteriors, iterations)."""
        path = os.path.join(self.directory, f"draws-{self.manifest['commit']}.npz")
        with np.load(path) as f:
            if "at" not in f.files:
                return [], [], []
            draws = {k.split("/", 1)[1]: f[k] for k in f.files if k.startswith("draws/")}
            return [draws], [f["log_posterior"]], [f["at"]]

    @property
    def state(self) -> str:
        return os.path.join(self.directory, f"state-{self.manifest['commit']}")

    def commit(self, plan: dict[str, Any], rounds: dict[str, Any], sampler, draws: dict[str, np.ndarray] | None,
               log_posterior: np.ndarray | None, at: np.ndarray | None) -> None:
        """Write a new commit and make it current; the previous one is removed after."""
        k = 0 if self.manifest is None else int(self.manifest["commit"]) + 1
        np.savez(os.path.join(self.directory, f"plan-{k}.tmp.npz"), **plan)
        os.replace(os.path.join(self.directory, f"plan-{k}.tmp.npz"), os.path.join(self.directory, f"plan-{k}.npz"))
        arrays = {} if draws is None else {f"draws/{n}": v for n, v in draws.items()}
        if at is not None:
            arrays.update(log_posterior=log_posterior, at=at)
        np.savez(os.path.join(self.directory, f"draws-{k}.tmp.npz"), **arrays)
        os.replace(os.path.join(self.directory, f"draws-{k}.tmp.npz"), os.path.join(self.directory, f"draws-{k}.npz"))
        sampler.save(os.path.join(self.directory, f"state-{k}"))
        manifest = {"fingerprint": self.fingerprint, "commit": k, "rounds": rounds}
        write_json_atomically(os.path.join(self.directory, MANIFEST), manifest)  # the commit point
        self.manifest = manifest
        for old in glob.glob(os.path.join(self.directory, "*-*")):
            if os.path.basename(old).split("-", 1)[1].split(".")[0] != str(k):
                shutil.rmtree(old) if os.path.isdir(old) else os.remove(old)
