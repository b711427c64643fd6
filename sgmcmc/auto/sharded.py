r""":func:`sgmcmc.sample` with its rows sharded across workers (``strategy=`` a
``MultiWorkerMirroredStrategy``, ``shard_rows`` True or unset; SPEC §12, issue 43 item 5).

Every worker passes its own rows N_w and holds all K chains; the samplers ``sample`` builds sum
every gradient over the workers (:mod:`sgmcmc.distribute.placement`). What ``sample`` computes on
the data outside them must come out the same on every worker, bit for bit, or the workers' chains
differ (another matrix, stepsize or minibatch) and the collectives inside the sampling loop pair
up wrong calls. Each quantity is the global one, combined as follows:

* the Newton steps and the Hessian A at the mode (:mod:`sgmcmc.auto.laplace`): the mode search's
  one-chain estimator already adds the workers' terms — every full-data value and gradient, every
  Hessian-vector product (each worker's rows, at most 20,000, scaled N_w/m_w: the stratified sum,
  exact when the shards are that small), and the probe of flat directions — so A and the mode are
  the one-process answer, identical on every worker (one all-reduce each);
* the stepsize on the whitened model: μ, the top curvature, from :func:`~sgmcmc.check_stepsize`
  over all workers' rows (all-reduced products); the minibatch noise q along it is a sum over the
  strata (the stratified minibatch's variance is Σ_w f_w N_w²/n_w Var_w): worker w measures its
  stratum's term with the check on its own rows, its likelihood scaled by N/N_w (so that its
  curvature, and the control variate's displacements δ ~ N(0, A⁻¹), are the global ones) and its
  share n_w of the minibatch, which gives (N/N_w)² times the term; the terms are gathered and
  added, and the safe stepsize is the dynamics' safe factor of (μ, q), as in one process;
* above :data:`~sgmcmc.auto.laplace.DENSE_MAX` elements (one stepsize per parameter, whose
  check's parts cannot be recombined): each worker's check on its own rows scaled to N with
  min(n, N_w) rows drawn with replacement (no finite-population factor: the noise of n rows of a
  population like its stratum, or more when the shard has fewer than n rows), and the
  smallest stepsize over the workers — conservative;
* the rounds' clock: a piece's length and "out of time" are agreed (the smallest piece, any
  worker out of time), so every worker makes the same compiled calls.

Before sampling, the mode, the metric, the stepsize and the minibatch are compared across the
workers by digest (:meth:`ShardedRows.check_agreed`): a difference (a log-likelihood that is not
deterministic, a defect) raises on every worker instead of hanging in the sampling loop (a patched
copy with per-worker stepsizes hung until the launcher's timeout).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..distribute.collective import Collective, gather_or_raise
from ..distribute.placement import differing_values, row_collective, stratified_batch_sizes, topology
from ..stability.curvature import StepsizeCheck, safe_factor, stability_model


def sharded_rows(strategy, shard_rows, checkpoint_dir, same: dict) -> Collective | None:
    """The collective over the workers when ``sample``'s rows are sharded (two or more workers),
    else None; what ``sample`` cannot run under ``strategy`` is refused first, before any
    exchange. ``same``: the arguments every worker must pass alike (compared by digest)."""
    _, n_workers, devices, sharded = topology(strategy, shard_rows)
    replicas = n_workers * len(devices)
    if replicas > 1 and not sharded:
        raise ValueError(
            f"sample with this strategy would split the chains over {replicas} replicas ({n_workers} worker(s) x "
            f"{len(devices)} device(s)); sample steps its chains by the step-by-step API, which steps one "
            f"process's chains on one device. Use strategy=tf.distribute.MultiWorkerMirroredStrategy() with "
            f"shard_rows=True (or unset): each worker passes its own rows and holds all chains"
        )
    if sharded and checkpoint_dir is not None:
        raise ValueError(
            "sample with rows sharded across workers does not take checkpoint_dir yet (a resumed run would "
            "have to agree on one directory and commit on one worker): leave checkpoint_dir=None, or run in "
            "one process with all rows"
        )
    return row_collective(strategy, shard_rows, "sample", same)


class ShardedRows:
    """The workers' shards of one ``sample`` run (module docstring).

    Parameters
    ----------
    collective
        Sums and gathers over the workers.
    counts
        N_w of every worker, in worker order.
    strategy, shard_rows
        As the user passed them (for the all-reduced stepsize check).
    """

    def __init__(self, collective: Collective, counts: list[int], strategy, shard_rows):
        self.collective, self.counts = collective, [int(c) for c in counts]
        self.strategy, self.shard_rows = strategy, shard_rows
        self._exact: dict[object, StepsizeCheck] = {}  # the last whitened model's exact check

    @classmethod
    def exchange(cls, collective: Collective, n_local: int, seed: int, strategy, shard_rows) -> tuple["ShardedRows", int]:
        """Gather every worker's row count and seed: the shards and worker 0's seed (one drawn
        seed for all with ``seed=None``; a given seed is the same everywhere: ``same``)."""
        status = gather_or_raise(collective, np.array([n_local, seed], np.int64), "sample's row-count exchange")
        return cls(collective, list(status[:, 0]), strategy, shard_rows), int(status[0, 1])

    @property
    def n_rows(self) -> int:
        """N = Σ N_w."""
        return sum(self.counts)

    @property
    def scale(self) -> float:
        """N/N_w: this worker's likelihood scaled to all rows."""
        return self.n_rows / self.counts[self.collective.worker]

    def gathered(self, values) -> np.ndarray:
        """Every worker's ``values`` (one float64 vector each), ``[n_workers, …]``."""
        return gather_or_raise(self.collective, np.atleast_1d(np.asarray(values, np.float64)), "a step of sample")

    def any(self, flag: bool) -> bool:
        return bool(self.gathered([float(flag)]).max() > 0)

    def min(self, value: float) -> float:
        return float(self.gathered([value]).min())

    def check_agreed(self, values: dict) -> None:
        """Before sampling: the set-up's results (name -> value) must be the same on every worker,
        else the chains would differ and the loop's collectives pair up unequal calls (a hang,
        not an error): a RuntimeError naming what differs (a log-likelihood that is not
        deterministic, or a defect here)."""
        differ, others = differing_values(self.collective, values, "the end of sample's set-up")
        if differ:
            raise RuntimeError(
                f"sample with rows sharded: worker(s) {', '.join(map(str, others))} computed another "
                f"{', '.join(differ)} than worker {self.collective.worker}, so their chains would differ; is "
                f"log_lik deterministic (the same value for the same rows and parameters)?"
            )

    def scaled(self, log_lik: Callable) -> Callable:
        """``log_lik`` of this worker's rows scaled to N."""
        scale = self.scale
        return lambda params, dataset: scale * log_lik(params, dataset)

    def whitened_stepsize(self, check: Callable[..., StepsizeCheck], model, batch_size: int | None, method: str,
                          distortion: float) -> float:
        """The safe stepsize of the whitened ``model`` (module docstring; its all-reduced exact
        check is made once). ``check(log_lik, minibatch_size, **strategy)`` is ``sample``'s
        stepsize check at stepsize 1; ``batch_size`` the minibatch's (None: exact gradients)."""
        log_lik = model.log_lik
        if model not in self._exact:
            self._exact = {model: check(log_lik, None, strategy=self.strategy, shard_rows=self.shard_rows)}
        exact = self._exact[model]
        if batch_size is None:
            return float(exact.safe_stepsize)
        own = stratified_batch_sizes(batch_size, self.counts)[self.collective.worker]
        local = check(self.scaled(log_lik), own)
        noise = float(self.gathered([local.noise / self.scale**2]).sum())
        dynamics = stability_model(method)
        hyper = next(iter(dynamics.distortion_hyperparameters(["x"], dynamics.defaults).values()))
        return float(safe_factor(dynamics, exact.scaled_curvature, noise, distortion, **hyper))

    def per_parameter_stepsize(self, check: Callable[..., StepsizeCheck], log_lik: Callable, batch: int,
                               names: list[str]) -> float | dict[str, float]:
        """The stepsize(s) of the per-parameter path (module docstring): ``check(log_lik,
        minibatch_size, minibatch_replace)`` on this worker's rows, the smallest over the workers
        (one per parameter when any worker's check gave one per parameter)."""
        local = check(self.scaled(log_lik), min(batch, self.counts[self.collective.worker]), True)
        step = local.safe_stepsize if local.safe_stepsize_per_parameter is None else local.safe_stepsize_per_parameter
        per = isinstance(step, dict)
        values = [float(step[k]) if per else float(step) for k in names]
        everyone = self.gathered([float(per), *values])
        smallest = everyone[:, 1:].min(axis=0)
        if everyone[:, 0].max() > 0:
            return {k: float(v) for k, v in zip(names, smallest)}
        return float(smallest.min())
