"""A whole-chain run whose chains are split across replicas (SPEC §12, "chains across replicas").

Each local replica device gets its own sampler stepping its share of the chains
(:class:`~sgmcmc.distribute.placement.Placement` ``chains``); the replicas of one process run
concurrently (replica 0 in the calling thread, so Ctrl-C is handled there; the others in
threads — TensorFlow releases the GIL while a compiled call runs), each on its device. Their
samples are joined on the chain axis, then, across the workers of a
``MultiWorkerMirroredStrategy``, gathered so that every worker returns all K chains.

A failure in one replica (divergence, an op error, Ctrl-C) is raised again after every replica
has stopped, carrying all chains' samples up to the shortest run (the chains stay aligned). A
worker that stops answering while the samples are gathered makes the others raise
:class:`~sgmcmc.SamplingError` with their own chains' samples, naming the worker.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np
import tensorflow as tf

from ..errors import DivergenceError, Interrupted, SamplingError
from ..analysis.samples import Samples
from ..distribute.collective import Collective, failed_worker
from ..distribute.placement import Placement

_FAILURES = (DivergenceError, SamplingError, Interrupted)


Part = dict  # "draws"/"gradients"/"unconstrained": name -> (k, n, …) or None; "log_posterior": (k, n) or None


def _part(samples: Samples) -> Part:
    """A Samples' arrays, chain-major ``(k, n_kept, …)`` whatever its chain count."""
    lp = samples.log_posterior
    return {
        "draws": samples.by_chain("draws"),
        "gradients": None if samples.gradients is None else samples.by_chain("gradients"),
        "unconstrained": None if samples._unconstrained is None else samples.by_chain("unconstrained"),
        "log_posterior": None if lp is None else (lp if samples.n_chains > 1 else lp[None]),
    }


def _map(part: Part, fn) -> Part:
    return {
        key: None if value is None else (fn(value) if key == "log_posterior" else {k: fn(v) for k, v in value.items()})
        for key, value in part.items()
    }


def _cat(parts: list[Part]) -> Part:
    """Parts joined on the chain axis."""
    first = parts[0]
    return {
        key: None if value is None else (
            np.concatenate([p[key] for p in parts]) if key == "log_posterior"
            else {k: np.concatenate([p[key][k] for p in parts]) for k in value}
        )
        for key, value in first.items()
    }


def _samples(part: Part, like: Samples) -> Samples:
    """A Samples of the part's chains, with ``like``'s method, seed and settings."""
    first = part["draws"][next(iter(part["draws"]))]
    n_chains, n_kept = first.shape[:2]
    if n_chains == 1:
        part = _map(part, lambda a: a[0])
    return Samples(
        part["draws"], n_chains=n_chains, gradients=part["gradients"], log_posterior=part["log_posterior"],
        method=like.method, seed=like.seed, settings=like.settings, unconstrained=part["unconstrained"],
        burn_in_found=like.burn_in_found, cycle=None if like.cycle is None else like.cycle[:n_kept],
    )


def _gather(part: Part, collective: Collective) -> Part:
    """Every worker's part joined on the chain axis in worker order (same shapes everywhere)."""

    def gather(array):
        stacked = collective.all_gather(np.ascontiguousarray(array))
        return stacked.reshape(-1, *stacked.shape[2:])

    return _map(part, gather)


def build_on_replicas(place: Placement, build: Callable[[int], object]) -> list:
    """One sampler per local replica: ``build(j)`` under device j."""
    samplers = []
    for j, device in enumerate(place.devices):
        with tf.device(device):
            samplers.append(build(j))
    return samplers


def run_on_replicas(place: Placement, samplers: list, run: Callable[[int, object, bool], Samples], verbose: bool) -> Samples:
    """Run local replica j's sampler (``run(j, sampler, verbose)``, the whole-chain run) under
    device j, all concurrently; return all K chains' samples."""
    outcomes: list = [None] * len(samplers)

    def work(j: int) -> None:
        with tf.device(place.devices[j]):
            try:
                outcomes[j] = run(j, samplers[j], verbose and j == 0 and place.worker == 0)
            except _FAILURES as error:
                outcomes[j] = error
            except Exception as error:  # noqa: BLE001 - re-raised below, after every replica stopped
                outcomes[j] = error

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(1, len(samplers))]
    for thread in threads:
        thread.start()
    try:
        work(0)
    finally:
        for thread in threads:
            thread.join()
    local = [o if isinstance(o, Samples) else getattr(o, "samples", None) for o in outcomes]
    failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if failure is not None and any(s is None for s in local):
        raise failure  # an error before any sample existed (set-up): nothing to keep
    n_kept = min(s.n_kept for s in local)
    part = _cat([_map(_part(s), lambda a: a[:, :n_kept]) for s in local])
    like = local[0]
    if place.n_workers > 1:
        collective = Collective(place.n_workers, place.worker)
        try:
            status = collective.all_gather(np.array([n_kept, failure is not None], np.int64))
            n_common = int(status[:, 0].min())
            part = _gather(_map(part, lambda a: a[:, :n_common]), collective)
        except tf.errors.OpError as error:
            who = failed_worker(error, place.worker)
            raise SamplingError(
                f"worker {who if who is not None else '?'} stopped answering when the chains' samples were "
                f"gathered; this worker's chains ({place.chains[0][0]}–{place.chains[-1][-1]}) are in the "
                f"exception's `samples` attribute",
                iteration=n_kept, samples=_samples(part, like),
            ) from error
        failed = [w for w in range(place.n_workers) if status[w, 1]]
        if failure is None and failed:
            raise SamplingError(
                f"worker(s) {', '.join(map(str, failed))} failed (see their output); every chain's samples up to "
                f"the shortest run are in the exception's `samples` attribute",
                iteration=n_common, samples=_samples(part, like),
            )
    joined = _samples(part, like)
    if failure is not None:
        failure.samples = joined
        raise failure
    return joined
