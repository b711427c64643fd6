"""What a user chooses with ``estimator=``: a small frozen spec per estimator (SPEC §8).

A spec validates its own options when it is made, says what the chain depends on
(:meth:`EstimatorSpec.settings`) and makes the estimator around the plain one
(:meth:`EstimatorSpec.wrap`). ``estimator="svrg"`` and ``estimator=SVRG(period=50)`` are the
same choice; a new estimator is one module defining its gradient class and its spec, plus one
line in :data:`sgmcmc.step.estimators.ESTIMATORS` — no public signature changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
import tensorflow as tf


@dataclass(frozen=True)
class EstimatorSpec:
    """The base of every estimator spec.

    Class attributes
    ----------------
    name
        The string users pass (``estimator="svrg"``) and ``Samples.settings["estimator"]``.
    keywords
        The public keyword arguments that set this spec's fields (``{"svrg_period": "period"}``):
        the R-style samplers keep them as keywords (SPEC §8).
    xla
        Whether the compiled loop may use XLA with this estimator (measured, docs/DESIGN.md).
    shard_refusal
        Why rows cannot be sharded across workers with it, or None (SPEC §12).
    reads_all_rows
        Whether the compiled step itself reads every row (SVRG's refresh): from entries
        TensorFlow cannot read in place this is a host callback, so no XLA then.
    state_per_worker
        Whether, with rows sharded, its state differs between the workers (SAGA's tables of
        each worker's rows): the chief's one checkpoint cannot hold it (refused).
    stream_refusal
        Why it cannot take a ``tf.data`` pipeline of minibatches (:mod:`sgmcmc.data.stream`:
        no row numbers, no full-data pass), or None; refused by default.
    """

    name: ClassVar[str] = ""
    keywords: ClassVar[dict[str, str]] = {}
    xla: ClassVar[bool] = True
    shard_refusal: ClassVar[str | None] = None
    reads_all_rows: ClassVar[bool] = False
    state_per_worker: ClassVar[bool] = False
    stream_refusal: ClassVar[str | None] = "needs the rows by index or all of them"

    def wrap(self) -> Callable | None:
        """``wrap(plain, like)`` making the stateful estimator around the plain one, or None when
        the sampler uses the plain estimator (or builds its own, as the control variate)."""
        return None

    def settings(self) -> dict[str, Any]:
        """What the chain depends on, for ``Samples.settings`` and the checkpoint fingerprint."""
        return dict(estimator=self.name)

    def check_size(self, n_chains: int, n_rows: int, shapes: dict[str, tuple], dtype: tf.DType) -> None:
        """Refuse a run whose estimator state would not fit (before anything is computed)."""


def parameter_count(shapes: dict[str, tuple]) -> int:
    """d: the number of scalars in one chain's parameters."""
    return sum(int(np.prod(shape)) for shape in shapes.values())
