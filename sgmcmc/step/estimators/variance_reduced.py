r"""Variance-reduced gradient estimators with state of their own (Dubey et al. 2016; SPEC §8).

Both wrap the plain estimator (:class:`~sgmcmc.step.estimators.plain.MinibatchGradient`: its
minibatch, its N/n scaling, its vectorisation over chains) and keep the estimator signature
``estimator(params, minibatch, rng, t)`` / ``on_one_batch(minibatch, rng, t)``, so every dynamics can use them.

**SVRG.** Per chain an anchor :math:`\tilde\theta` and its full-data gradient:

.. math:: g(\theta) = \nabla\log p(\tilde\theta|x) + g_S(\theta) - g_S(\tilde\theta),

:math:`g_S` the plain estimate on minibatch S (the same S in both terms). At every global
iteration t with (t − 1) mod ``period`` = 0 (so t = 1 first) the anchor becomes the point of the
iteration's first evaluation, and its full-data gradient is recomputed in-graph (a
``tf.while_loop`` over row blocks inside a ``tf.cond``), the blocks read from the entries where
they are (``MinibatchGradient.full_data_gradient_in_graph``: no copy of a memmap's rows).

**SAGA.** Per chain a table :math:`\phi_i` of per-row gradients (N × dim) and its sum:

.. math:: g(\theta) = \nabla\log p(\theta) + \sum_{i=1}^N \phi_i
          + \frac{N}{n}\sum_{i\in S}\left(\nabla\log p(x_i|\theta) - \phi_i\right),

then :math:`\phi_i \leftarrow \nabla\log p(x_i|\theta)` for i ∈ S and the sum updated. With
rows sharded across workers (SPEC §12) each worker keeps the table of its own N_w rows and
draws its own n_w; the likelihood terms (the plain estimator's all-reduce) and the table terms
:math:`\sum_{i\le N_w}\phi_i - \frac{N_w}{n_w}\sum_{i\in S_w}\phi_i` (one more all-reduce per
minibatch) are summed over the workers, so every worker's estimate is the stratified SAGA sum. The table
starts as the per-row gradients at the chain's starting point (:meth:`SAGAGradient.reset`, in
:func:`sgmcmc.init_sess`). It lives in ``tf.Variable`` s updated in place (a scatter of n rows
per evaluation: O(n·dim) per step, not O(N·dim)).

Decisions (DESIGN.md):

* State changes once per iteration where the paper is silent about several evaluations.
  SVRG refreshes at most once per iteration (SGHMC's L inner steps: at the first, i.e. the
  iteration's starting state). With ``on_one_batch`` (HAMCMC's two points on one minibatch) the
  first point evaluated is the one that refreshes SVRG's anchor and updates SAGA's table; every
  point on that minibatch sees the state as it was before the update (so the pair's gradient
  difference is the plain minibatch difference). Each separate ``estimate(params)`` call (SGHMC's
  L fresh minibatches) is a SAGA step of its own and updates the table.
* :meth:`for_storage` evaluates without changing any state (stored gradients never change the
  chain): SVRG uses the anchor the next iteration would use (a full-data gradient at the point
  when that iteration would refresh), SAGA the table as it is.
* With ``minibatch_replace=True`` a row drawn twice counts twice in the sum (unbiased) and is
  written to the table once.
* After a divergence the state is that of the failing iteration: ``init_sess`` restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ClassVar

import tensorflow as tf

from ...graph_options import own_function
from ... import checks
from ..contract import Estimate, Minibatch, Params
from .plain import FULL_GRADIENT_BATCH_ROWS, MinibatchGradient
from .spec import EstimatorSpec, parameter_count


def _first_occurrences(indices: tf.Tensor) -> tf.Tensor:
    """``[K, n]`` bool: position j holds the first occurrence of its index in its row."""
    order = tf.argsort(indices, axis=-1, stable=True)
    ordered = tf.gather(indices, order, batch_dims=1)
    first_sorted = tf.concat([tf.ones_like(ordered[:, :1], tf.bool), ordered[:, 1:] != ordered[:, :-1]], axis=1)
    return tf.gather(first_sorted, tf.argsort(order, axis=-1), batch_dims=1)


class _WithState:
    """What SVRG and SAGA share: built from ``plain`` (the plain estimator for K chains) and
    ``like`` (name -> ``[K, *shape]`` values giving the state's shapes and dtype); every
    evaluation goes through ``on_one_batch(minibatch, rng, t, update)``."""

    def on_one_batch(self, minibatch: Minibatch, rng, t, update: bool = True) -> Callable[[Params], Estimate]:
        raise NotImplementedError

    def __call__(self, params: Params, minibatch: Minibatch, rng=None, t=None) -> Estimate:
        return self.on_one_batch(minibatch, rng, t)(params)

    def for_storage(self, params: Params, minibatch: Minibatch, rng=None, t=None) -> Estimate:
        """The estimate iteration ``t`` would make at ``params``, changing no state (stored
        gradients never change the chain)."""
        return self.on_one_batch(minibatch, rng, t, update=False)(params)


class SVRGGradient(_WithState):
    """SVRG around a per-chain anchor refreshed every ``period`` iterations (``svrg_period``;
    module docstring); ``plain`` and ``like`` as :class:`_WithState`."""

    def __init__(self, plain: MinibatchGradient, like: Params, period: int = 100):
        self.plain = plain
        self.period = int(period)
        self.anchor = {k: tf.Variable(tf.zeros_like(v), name=f"{k}_svrg_anchor") for k, v in like.items()}
        self.anchor_grad = {k: tf.Variable(tf.zeros_like(v), name=f"{k}_svrg_anchor_grad") for k, v in like.items()}
        #: The iteration of the last refresh (0: none yet): at most one refresh per iteration.
        self.refreshed_at = tf.Variable(tf.constant(0, tf.int64), name="svrg_refreshed_at")

    def variables(self) -> dict:
        return dict(anchor=self.anchor, anchor_grad=self.anchor_grad, refreshed_at=self.refreshed_at)

    def reset(self, params: Params) -> None:
        """No anchor yet: iteration 1 computes it."""
        self.refreshed_at.assign(0)
        for name in self.anchor:
            self.anchor[name].assign(tf.zeros_like(self.anchor[name]))
            self.anchor_grad[name].assign(tf.zeros_like(self.anchor_grad[name]))

    def _anchor_at(self, params: Params, t: tf.Tensor, update: bool) -> tuple[Params, Params]:
        """The anchor and its full-data gradient for an evaluation at ``params`` in iteration t:
        ``params`` and a fresh full-data gradient when a refresh is due, else the stored ones."""
        t = tf.cast(t, tf.int64)
        due = tf.equal(tf.math.floormod(t - 1, self.period), 0) & tf.not_equal(self.refreshed_at, t)
        anchor, grad = tf.cond(
            due,
            lambda: ({k: tf.identity(v) for k, v in params.items()}, self.plain.full_data_gradient_in_graph(params)),
            lambda: ({k: v.read_value() for k, v in self.anchor.items()}, {k: v.read_value() for k, v in self.anchor_grad.items()}),
        )
        if update:
            for k in anchor:
                self.anchor[k].assign(anchor[k])
                self.anchor_grad[k].assign(grad[k])
            self.refreshed_at.assign(tf.where(due, t, self.refreshed_at))
        return anchor, grad

    def on_one_batch(self, minibatch: Minibatch, rng, t, update: bool = True) -> Callable[[Params], Estimate]:
        """One minibatch per chain for every evaluation of the returned ``params -> Estimate``;
        the first evaluation fixes the anchor (refreshing it if due) for all of them."""
        batch = minibatch.rows
        fixed: dict = {}

        def evaluate(params: Params) -> Estimate:
            if not fixed:
                anchor, grad = self._anchor_at(params, t, update)
                fixed.update(grad=grad, at_anchor=self.plain.value_and_grad(anchor, batch, self.plain.scale).grads)
            at_params = self.plain.value_and_grad(params, batch, self.plain.scale)
            grads = {k: fixed["grad"][k] + g - fixed["at_anchor"][k] for k, g in at_params.grads.items()}
            return Estimate(at_params.log_post, grads)

        return evaluate


class SAGAGradient(_WithState):
    """SAGA with a per-chain table of per-row gradients (module docstring); ``plain`` and
    ``like`` as :class:`_WithState`.

    The table of parameter ``name`` is one variable ``[K·N, *shape]`` (row k·N + i holds
    :math:`\\phi_i` of chain k), so reads and writes are ``tf.gather`` / ``scatter_update`` of the
    minibatch's rows only.
    """

    def __init__(self, plain: MinibatchGradient, like: Params):
        self.plain = plain
        k, n_rows = plain.n_chains, plain.n_rows
        self.table = {
            name: tf.Variable(tf.zeros([k * n_rows, *v.shape[1:]], v.dtype), name=f"{name}_saga_table")
            for name, v in like.items()
        }
        self.table_sum = {name: tf.Variable(tf.zeros_like(v), name=f"{name}_saga_sum") for name, v in like.items()}
        self._fill_rows = own_function(self._fill_rows_impl, reduce_retracing=True)

    @staticmethod
    def table_bytes(n_chains: int, n_rows: int, dim: int, dtype: tf.DType) -> int:
        """Bytes of the table: K·N·dim elements of the model dtype."""
        return int(n_chains) * int(n_rows) * int(dim) * tf.as_dtype(dtype).size

    def variables(self) -> dict:
        return dict(table=self.table, table_sum=self.table_sum)

    def _flat_rows(self, indices: tf.Tensor) -> tf.Tensor:
        """``[K, n]`` row indices -> rows of the ``[K·N, …]`` table."""
        offsets = tf.range(self.plain.n_chains, dtype=tf.int64)[:, None] * self.plain.n_rows
        return indices + offsets

    def _fill_rows_impl(self, params: Params, start: tf.Tensor, block: dict[str, tf.Tensor]) -> None:
        k = self.plain.n_chains
        n = tf.shape(next(iter(block.values())))[0]
        indices = tf.tile(tf.range(start, start + tf.cast(n, tf.int64), dtype=tf.int64)[None], [k, 1])
        batch = {name: tf.tile(v[None], [k] + [1] * v.shape.rank) for name, v in block.items()}
        grads = self.plain.per_row_gradients(params, batch)
        flat = tf.reshape(self._flat_rows(indices), [-1])
        for name, g in grads.items():
            self.table[name].scatter_update(tf.IndexedSlices(tf.reshape(g, [-1, *g.shape[2:]]), flat))
            self.table_sum[name].assign_add(tf.reduce_sum(g, axis=1))

    def reset(self, params: Params) -> None:
        r"""Fill the table with :math:`\nabla\log p(x_i|\theta_k)` at the chains' current
        (starting) states, in contiguous row blocks streamed from the entries (one compiled call
        each), and its sum."""
        for name in self.table_sum:
            self.table_sum[name].assign(tf.zeros_like(self.table_sum[name]))
        params = {k: tf.convert_to_tensor(v) for k, v in params.items()}
        rows = self.plain.rows
        for start, block in rows.blocks(min(FULL_GRADIENT_BATCH_ROWS, rows.block_rows())):
            self._fill_rows(params, tf.constant(start, tf.int64), block)

    def on_one_batch(self, minibatch: Minibatch, rng=None, t=None, update: bool = True) -> Callable[[Params], Estimate]:
        """One minibatch per chain for every evaluation of the returned ``params -> Estimate``;
        all use the table as it was before the minibatch, and the first one writes its per-row
        gradients into the table."""
        batch, indices = minibatch
        flat = self._flat_rows(indices)
        scale = self.plain.scale
        before: dict = {}

        def evaluate(params: Params) -> Estimate:
            first_call = not before
            if first_call:
                rows = {k: tf.gather(v, flat) for k, v in self.table.items()}
                table_terms = {
                    k: v.read_value() - scale * tf.reduce_sum(rows[k], axis=1) for k, v in self.table_sum.items()
                }
                if self.plain.reduce is not None:  # rows sharded: every worker's table and minibatch
                    names = list(table_terms)
                    table_terms = dict(zip(names, self.plain.reduce([table_terms[k] for k in names])))
                before.update(rows=rows, table_terms=table_terms)
            at_params = self.plain.value_and_grad(params, batch, scale)
            grads = {k: g + before["table_terms"][k] for k, g in at_params.grads.items()}
            if update and first_call:
                self._write(params, batch, indices, flat, before["rows"])
            return Estimate(at_params.log_post, grads)

        return evaluate

    def _write(self, params: Params, batch, indices: tf.Tensor, flat: tf.Tensor, old_rows: Params) -> None:
        r""":math:`\phi_i \leftarrow \nabla\log p(x_i|\theta)` for i in the minibatch, and the sum
        by the change (a repeated row, drawn with replacement, changes it once)."""
        new_rows = self.plain.per_row_gradients(params, batch)
        first = _first_occurrences(indices) if self.plain.replace else None
        for name, g in new_rows.items():
            change = g - old_rows[name]
            if first is not None:
                mask = tf.reshape(first, [*first.shape, *([1] * (g.shape.rank - 2))])
                change = tf.where(mask, change, tf.zeros_like(change))
            self.table_sum[name].assign_add(tf.reduce_sum(change, axis=1))
            self.table[name].scatter_update(tf.IndexedSlices(tf.reshape(g, [-1, *g.shape[2:]]), tf.reshape(flat, [-1])))


@dataclass(frozen=True)
class SVRG(EstimatorSpec):
    """``estimator="svrg"`` or ``SVRG(period=...)``: :class:`SVRGGradient`, the anchor refreshed
    every ``period`` iterations (the samplers' ``svrg_period=``)."""

    period: int = 100  # SPEC §8
    name: ClassVar[str] = "svrg"
    stream_refusal: ClassVar[str | None] = "needs full-data passes (its anchors' gradients over all N rows)"
    reads_all_rows: ClassVar[bool] = True
    keywords: ClassVar[dict[str, str]] = {"svrg_period": "period"}

    def __post_init__(self):
        object.__setattr__(self, "period", checks.check_count(self.period, "svrg_period"))

    def wrap(self) -> Callable:
        return partial(SVRGGradient, period=self.period)

    def settings(self) -> dict[str, Any]:
        return dict(estimator="svrg", svrg_period=self.period)


@dataclass(frozen=True)
class SAGA(EstimatorSpec):
    """``estimator="saga"`` or ``SAGA(max_memory=...)``: :class:`SAGAGradient`, whose table
    (K·N·d numbers) must fit in ``max_memory`` bytes. Not under XLA (its table is copied every
    iteration there: 10x slower, docs/DESIGN.md)."""

    max_memory: float = 2 * 2**30  # SPEC §8: 2 GiB
    name: ClassVar[str] = "saga"
    stream_refusal: ClassVar[str | None] = "needs the rows by index (its table of per-row gradients) and a pass over all rows to fill it"
    state_per_worker: ClassVar[bool] = True
    keywords: ClassVar[dict[str, str]] = {"max_memory": "max_memory"}
    xla: ClassVar[bool] = False

    def __post_init__(self):
        object.__setattr__(self, "max_memory", checks.check_positive(self.max_memory, "max_memory"))

    def wrap(self) -> Callable:
        return SAGAGradient

    def check_size(self, n_chains: int, n_rows: int, shapes: dict[str, tuple], dtype: tf.DType) -> None:
        dim = parameter_count(shapes)
        need = SAGAGradient.table_bytes(n_chains, n_rows, dim, dtype)
        if need > self.max_memory:
            raise ValueError(
                f"estimator='saga' needs a table of {n_chains} chain(s) x {n_rows} rows x {dim} parameters x "
                f"{tf.as_dtype(dtype).size} bytes = {need:,} bytes ({need / 2**30:.3g} GiB), more than "
                f"max_memory={self.max_memory:,.0f} bytes. Raise max_memory= if the memory is there, use "
                f"estimator='svrg' (memory of one full-data gradient per chain), or a smaller model / fewer chains"
            )
