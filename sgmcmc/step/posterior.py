r"""The model a chain samples (issue 45.1): the user's ``log_lik`` and ``log_prior``, the rows
read where they are, N, and with rows sharded the sum over workers.

A :class:`Posterior` is what every estimator of a model shares and everything that evaluates
the model outside the minibatch estimate reads: the full-data passes (the control variate's
anchor, the exact scores of the tuner, the improper-posterior test), the curvature's
Hessian-vector products (:class:`~sgmcmc.stability.curvature.NegativeHessian`) and its
compiled programs (:meth:`Posterior.program`, traced once per model). A minibatch estimator
(:class:`~sgmcmc.step.estimators.plain.MinibatchGradient`) is a Posterior with a minibatch
scheme: its size, its chains, with or without replacement.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from ..graph_options import own_function
from ..programs import model_program
from ..data.rows import Rows, as_tensor
from ..data.stream import BatchStream
from .contract import Params

LogLik = Callable[[Params, dict[str, tf.Tensor]], tf.Tensor]
LogPrior = Callable[[Params], tf.Tensor]

#: Rows per batch when summing the full-data gradient: bounds memory at any N.
FULL_GRADIENT_BATCH_ROWS = 10_000


_VALUE = "__log_lik__"  # the value's key beside the gradients in a streamed sum


def value_and_grad(
    fn: Callable[[Params], tf.Tensor], params: Params, unused: set[str] | None = None
) -> tuple[tf.Tensor, Params]:
    """``fn(params)`` and its gradient with respect to every parameter, as dense tensors.

    A parameter used through ``tf.gather`` has an IndexedSlices gradient; densifying it gives
    the same chain as the dense formulation (noise on every element each step). A parameter
    that ``fn`` does not use gets a zero gradient (the set-up checks refuse such a model unless
    ``check_model=False``); ``unused``, if given, receives their names while tracing (the
    curvature's products skip the likelihood along them: :mod:`sgmcmc.stability.curvature`).
    """
    params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
    with tf.GradientTape() as tape:
        tape.watch(params)
        value = fn(params)
    if unused is None:
        grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    else:
        grads = tape.gradient(value, params)
        unused.update(name for name, g in grads.items() if g is None)
        grads = {name: tf.zeros_like(params[name]) if g is None else g for name, g in grads.items()}
    return value, {name: tf.convert_to_tensor(g) for name, g in grads.items()}


def per_row_gradients(log_lik: LogLik, params: Params, batch: dict[str, tf.Tensor]) -> Params:
    r"""One chain: :math:`\nabla_\theta\log p(x_i|\theta)` for every row i of ``batch``, entries
    ``[n, *shape]``; their sum over rows is the gradient of ``log_lik(params, batch)``."""

    def one_row(row: dict[str, tf.Tensor]) -> Params:
        return value_and_grad(lambda p: log_lik(p, {k: v[None] for k, v in row.items()}), params)[1]

    return tf.vectorized_map(one_row, batch, fallback_to_while_loop=True, warn=False)


def _gradient_program(log_lik: LogLik, log_prior: LogPrior | None):
    """The compiled gradient of ``log_lik`` on a block of rows."""
    return own_function(lambda params, batch: value_and_grad(lambda p: log_lik(p, batch), params)[1], reduce_retracing=True)


def _value_gradient_program(log_lik: LogLik, log_prior: LogPrior | None):
    """The compiled value and gradient of ``log_lik`` on a block of rows (the value under ``_VALUE``)."""
    def value_grad(params, batch):
        value, grads = value_and_grad(lambda p: log_lik(p, batch), params)
        return {**grads, _VALUE: value}

    return own_function(value_grad, reduce_retracing=True)


class Posterior:
    r"""The model: :math:`\log p(\theta) + \sum_{i=1}^N \log p(x_i|\theta)` for ONE chain's
    parameters.

    Parameters
    ----------
    log_lik, log_prior
        The user's functions of one chain's parameters; ``log_lik`` returns the SUM over the
        rows it is given. ``log_prior=None`` is a flat prior.
    dataset
        Name -> entry (numpy array, memmap, h5py/zarr array: :mod:`sgmcmc.data.rows`),
        observations on the first axis, all of length N, read in the model dtype. Empty for a
        ``tf.data`` pipeline (``rows`` a :class:`~sgmcmc.data.stream.BatchStream`: N is its
        ``n_rows``, and there is no full-data pass).
    rows
        The entries as :class:`~sgmcmc.data.rows.Rows` (the sampler's own, in the model dtype),
        or the pipeline; default: built once from ``dataset`` on first use.
    reduce
        Rows sharded across workers (SPEC §12): ``dataset`` is this worker's N_w rows, and
        ``reduce(tensors) -> sums over the workers`` (one collective) adds up the workers'
        likelihood terms, so every full-data pass is the sum over all workers' rows.
    """

    def __init__(
        self,
        log_lik: LogLik,
        log_prior: LogPrior | None,
        dataset: dict,
        rows: Rows | BatchStream | None = None,
        reduce: Callable[[list[tf.Tensor]], list[tf.Tensor]] | None = None,
    ):
        self.log_lik = log_lik
        self.log_prior = log_prior
        self.dataset = dataset
        self.n_rows = int(rows.n_rows) if rows is not None else int(next(iter(dataset.values())).shape[0])
        self.reduce = reduce
        self._programs: dict[str, Any] = {}  # this model's programs, looked up once (program())
        self._in_place = None
        self._rows = rows

    @property
    def rows(self) -> Rows | BatchStream:
        """The entries as :class:`~sgmcmc.data.rows.Rows`: the sampler's own (built once, in the
        model dtype), or, for a posterior built without a sampler, built once here from the
        entries, whose floats are already in the model dtype."""
        if self._rows is None:
            floats = [np.dtype(v.dtype) for v in self.dataset.values() if np.dtype(v.dtype).kind == "f"]
            self._rows = Rows(self.dataset, floats[0] if floats else np.float32)
        return self._rows

    def program(self, name: str, make: Callable[[LogLik, LogPrior | None], Any]) -> Any:
        """The compiled program ``name`` of this model: ``make(log_lik, log_prior)`` on the
        model's first use, then shared by every posterior of the same model
        (:func:`sgmcmc.programs.model_program`: the full-data gradients, the curvature's
        Hessian-vector products, the noise's directional sums); looked up once per posterior."""
        if name not in self._programs:
            self._programs[name] = model_program(name, self.log_lik, self.log_prior, partial(make, self.log_lik, self.log_prior))
        return self._programs[name]

    def full_data_gradient(self, params: Params, progress=None) -> Params:
        r""":math:`\nabla\log p(\theta|x)` over all N rows, streamed: contiguous blocks of at most
        :data:`FULL_GRADIENT_BATCH_ROWS` rows read from the entries where they are (memory
        bounded whatever N, data on disk included), each one compiled call, summed in float64.
        ``progress(rows)``, if given, is called after every block."""
        params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
        total = self._stream_sum(self.program("block_gradient", _gradient_program), params, progress)
        if self.log_prior is not None:
            for name, g in value_and_grad(self.log_prior, params)[1].items():
                total[name] += g.numpy()
        return {name: tf.constant(total[name], params[name].dtype) for name in total}

    def full_data_log_post_and_gradient(self, params: Params, progress=None) -> tuple[float, Params]:
        r""":math:`\log p(\theta|x)` (up to its normalising constant) and its gradient over all N
        rows, streamed as :meth:`full_data_gradient` (one pass)."""
        params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
        total = self._stream_sum(self.program("block_value_gradient", _value_gradient_program), params, progress)
        value = float(total.pop(_VALUE))
        if self.log_prior is not None:
            prior, grads = value_and_grad(self.log_prior, params)
            value += float(prior.numpy())
            for name, g in grads.items():
                total[name] += g.numpy()
        return value, {name: tf.constant(total[name], params[name].dtype) for name in total}

    def _stream_sum(self, block_fn, params: Params, progress) -> dict[str, np.ndarray]:
        """Σ over contiguous row blocks of ``block_fn(params, block)`` (a dict of tensors), in
        float64, summed over the workers when the rows are sharded."""
        total = None
        rows = self.rows
        for start, block in rows.blocks(min(FULL_GRADIENT_BATCH_ROWS, rows.block_rows())):
            part = {name: g.numpy().astype(np.float64) for name, g in block_fn(params, block).items()}
            total = part if total is None else {name: total[name] + part[name] for name in total}
            if progress is not None:
                progress(len(next(iter(block.values()))))
        return self.sum_over_workers(total)

    def sum_over_workers(self, totals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Eager: ``totals`` (this worker's sums over its rows) summed over the workers when the
        rows are sharded (one collective), else as they are."""
        if self.reduce is None:
            return totals
        names = list(totals)
        return dict(zip(names, (t.numpy() for t in self.reduce([tf.constant(totals[n]) for n in names]))))

    def in_place_tensors(self) -> dict[str, tf.Tensor]:
        """Every entry as a tensor sharing its memory (only when :attr:`Rows.shared_in_place`)."""
        if self._in_place is None:
            self._in_place = {k: as_tensor(v) for k, v in self.dataset.items()}
        return self._in_place
