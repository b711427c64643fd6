r"""The plain minibatch estimate of the log posterior and its gradient (SPEC §3):

.. math:: g(\theta) = \nabla\log p(\theta) + \frac{N}{n}\sum_{i\in S}\nabla\log p(x_i|\theta),

S a fresh uniform n-subset per chain and per call. Also the batched full-data gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ClassVar

import numpy as np
import tensorflow as tf

from ...graph_options import own_function
from ...programs import model_program
from ...data.rows import Rows, as_tensor
from ...data.stream import BatchStream
from ..contract import Estimate, Minibatch, Params, map_over_chains
from .spec import EstimatorSpec

LogLik = Callable[[Params, dict[str, tf.Tensor]], tf.Tensor]
LogPrior = Callable[[Params], tf.Tensor]

@dataclass(frozen=True)
class Plain(EstimatorSpec):
    """``estimator="plain"``: the minibatch estimate above (no state, no options)."""

    name: ClassVar[str] = "plain"
    stream_refusal: ClassVar[str | None] = None

    def settings(self) -> dict[str, Any]:
        return {}  # a plain run's settings and checkpoint fingerprint name no estimator


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


class MinibatchGradient:
    r"""The plain estimator for ``n_chains`` chains, each with its own minibatch.

    Parameters
    ----------
    log_lik, log_prior
        The user's functions of ONE chain's parameters; ``log_lik`` returns the SUM over the
        rows it is given. ``log_prior=None`` is a flat prior.
    dataset
        Name -> entry (numpy array, memmap, h5py/zarr array: :mod:`sgmcmc.data.rows`), observations on
        the first axis, all of length ``n_rows``, read in the model dtype (``checks.check_dataset``).
        Minibatches do not come from here: the sampler hands each iteration's block to the
        estimator as an argument (:class:`~sgmcmc.step.contract.Minibatch`); full-data passes
        stream the entries. Empty for a ``tf.data`` pipeline (``rows`` a
        :class:`~sgmcmc.data.stream.BatchStream`: N is its ``n_rows``, and there is no full-data pass).
    batch_size
        Rows per minibatch (``n``).
    n_chains
        K, the leading axis of every parameter tensor this estimator sees.
    replace
        Draw the minibatch rows i.i.d. with replacement (``minibatch_replace=True``) instead of
        a uniform n-subset; the N/n scaling keeps the estimate unbiased either way.
    reduce
        Rows sharded across workers (SPEC §12): ``dataset`` is this worker's N_w rows and
        ``batch_size`` its n_w, and ``reduce(tensors) -> sums over the workers`` (one
        collective, :class:`sgmcmc.distribute.collective.Collective`) adds up the workers'
        likelihood terms, so every estimate is the stratified
        :math:`\nabla\log p(\theta) + \sum_w \frac{N_w}{n_w}\sum_{i\in S_w}\nabla\log p(x_i|\theta)`
        and every full-data pass the sum over all workers' rows.
    """

    def __init__(
        self,
        log_lik: LogLik,
        log_prior: LogPrior | None,
        dataset: dict,
        batch_size: int,
        n_chains: int = 1,
        replace: bool = False,
        reduce: Callable[[list[tf.Tensor]], list[tf.Tensor]] | None = None,
        rows: Rows | BatchStream | None = None,
    ):
        self.replace = bool(replace)
        self.log_lik = log_lik
        self.log_prior = log_prior
        self.dataset = dataset
        self.n_rows = int(rows.n_rows) if rows is not None else int(next(iter(dataset.values())).shape[0])
        self.batch_size = batch_size
        self.n_chains = n_chains
        self.scale = self.n_rows / batch_size
        self.reduce = reduce
        self._programs: dict[str, Any] = {}  # this model's programs, looked up once (program())
        self._in_place = None
        self._rows = rows

    @property
    def rows(self) -> Rows:
        """The entries as :class:`~sgmcmc.data.rows.Rows`: the sampler's own (built once, in the
        model dtype), or, for an estimator built without a sampler, built once here from the
        entries, whose floats are already in the model dtype."""
        if self._rows is None:
            floats = [np.dtype(v.dtype) for v in self.dataset.values() if np.dtype(v.dtype).kind == "f"]
            self._rows = Rows(self.dataset, floats[0] if floats else np.float32)
        return self._rows

    def log_post(self, params: Params, batch: dict[str, tf.Tensor], scale: float) -> tf.Tensor:
        r"""One chain: :math:`\log p(\theta) + \text{scale}\cdot\sum_{i\in\text{batch}}\log p(x_i|\theta)`."""
        value = scale * self.log_lik(params, batch)
        if self.log_prior is not None:
            value = value + self.log_prior(params)
        return value

    def value_and_grad(self, params: Params, batch: dict[str, tf.Tensor], scale: float) -> Estimate:
        """Log posterior and gradient for K chains, chain k on ``batch`` entry k (with rows
        sharded: the likelihood terms summed over the workers, then the prior added)."""
        if self.reduce is None:
            value, grads = map_over_chains(
                lambda args: value_and_grad(lambda p: self.log_post(p, args[1], scale), args[0]),
                (params, batch),
                self.n_chains,
            )
            return Estimate(value, grads)
        value, grads = map_over_chains(
            lambda args: value_and_grad(lambda p: scale * self.log_lik(p, args[1]), args[0]),
            (params, batch),
            self.n_chains,
        )
        names = list(grads)
        value, *summed = self.reduce([value, *(grads[name] for name in names)])
        grads = dict(zip(names, summed))
        if self.log_prior is not None:
            prior, prior_grads = map_over_chains(lambda p: value_and_grad(self.log_prior, p), params, self.n_chains)
            value = value + prior
            grads = {name: grads[name] + prior_grads[name] for name in names}
        return Estimate(value, grads)

    def __call__(self, params: Params, minibatch: Minibatch, rng=None, t=None) -> Estimate:
        return self.value_and_grad(params, minibatch.rows, self.scale)

    def on_one_batch(self, minibatch: Minibatch, rng=None, t=None) -> Callable[[Params], Estimate]:
        """An evaluator ``params -> Estimate`` on one minibatch per chain, for dynamics that need
        estimates at two points on the same minibatch (HAMCMC's pairs)."""
        return lambda params: self.value_and_grad(params, minibatch.rows, self.scale)

    def per_row_gradients(self, params: Params, batch: dict[str, tf.Tensor]) -> Params:
        r"""Per chain and row, :math:`\nabla\log p(x_i|\theta)` (no prior, no scaling): entries
        ``[K, n, *shape]`` for ``batch`` entries ``[K, n, ...]`` (SAGA's table, OSGLD's gradient
        covariance). The user's ``log_lik`` is called on one-row datasets, vectorised over rows."""

        def one_chain(args):
            chain_params, chain_batch = args
            return per_row_gradients(self.log_lik, chain_params, chain_batch)

        return map_over_chains(one_chain, (params, batch), self.n_chains)

    def program(self, name: str, make: Callable[[LogLik, LogPrior | None], Any]) -> Any:
        """The compiled program ``name`` of this estimator's model: ``make(log_lik, log_prior)``
        on the model's first use, then shared by every estimator of the same model
        (:func:`sgmcmc.programs.model_program`: the full-data gradients, the curvature's
        Hessian-vector products, the noise's directional sums); looked up once per estimator."""
        if name not in self._programs:
            self._programs[name] = model_program(name, self.log_lik, self.log_prior, partial(make, self.log_lik, self.log_prior))
        return self._programs[name]

    def full_data_gradient(self, params: Params, progress=None) -> Params:
        r"""One chain: :math:`\nabla\log p(\theta|x)` over all N rows, streamed: contiguous
        blocks of at most :data:`FULL_GRADIENT_BATCH_ROWS` rows read from the entries where they
        are (memory bounded whatever N, data on disk included), each one compiled call, summed
        in float64. ``progress(rows)``, if given, is called after every block. For a one-chain
        estimator."""
        params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
        total = self._stream_sum(self.program("block_gradient", _gradient_program), params, progress)
        if self.log_prior is not None:
            for name, g in value_and_grad(self.log_prior, params)[1].items():
                total[name] += g.numpy()
        return {name: tf.constant(total[name], params[name].dtype) for name in total}

    def full_data_log_post_and_gradient(self, params: Params, progress=None) -> tuple[float, Params]:
        r"""One chain: :math:`\log p(\theta|x)` (up to its normalising constant) and its gradient
        over all N rows, streamed as :meth:`full_data_gradient` (one pass)."""
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

    def _in_place_tensors(self) -> dict[str, tf.Tensor]:
        """Every entry as a tensor sharing its memory (only when :attr:`Rows.shared_in_place`)."""
        if self._in_place is None:
            self._in_place = {k: as_tensor(v) for k, v in self.dataset.items()}
        return self._in_place

    def _row_block(self, start: tf.Tensor, size: int) -> dict[str, tf.Tensor]:
        """Rows ``start : start + size`` of every entry, inside a compiled step.

        Entries TensorFlow can read in place (aligned numpy arrays in the model dtype) are sliced
        as tensors. Any other entry (a memmap, h5py, zarr, an unaligned or cast array) is read by
        a host callback (``tf.numpy_function``) that slices it where it lives, so a full-data
        pass holds one block, never a copy of the dataset (SPEC §11). XLA cannot compile such a
        callback: the sampler then runs in graph mode (``EstimatorSpec.reads_all_rows``). Both
        give the same rows, so the same sums bit for bit."""
        rows = self.rows
        if rows.shared_in_place:
            return {
                k: tf.slice(v, tf.concat([[start], tf.zeros([v.shape.rank - 1], tf.int64)], 0),
                         tf.constant([size, *v.shape[1:]], tf.int64))
                for k, v in self._in_place_tensors().items()
            }
        names = list(rows.entries)

        def read(first):
            block = rows.slice(int(first), int(first) + size)
            return [block[k] for k in names]

        values = tf.numpy_function(read, [start], [tf.as_dtype(rows.dtypes[k]) for k in names], name="read_rows")
        return {k: tf.ensure_shape(v, [size, *rows.row_shapes[k]]) for k, v in zip(names, values)}

    def full_data_gradient_in_graph(self, params: Params) -> Params:
        r"""K chains, in-graph: :math:`\nabla\log p(\theta_k|x)` for every chain, the likelihood
        summed over row blocks of :data:`FULL_GRADIENT_BATCH_ROWS` in a ``tf.while_loop`` (memory
        bounded at any N, data on disk included: :meth:`_row_block`; every block has a static
        shape: the full blocks in the loop, the remainder once after it), summed over the workers
        when the rows are sharded. For use inside a compiled step (SVRG's anchor refresh)."""
        size = min(FULL_GRADIENT_BATCH_ROWS, self.n_rows)
        n_full = self.n_rows // size

        def batch_grad(start, rows: int) -> Params:
            batch = self._row_block(start, rows)
            return map_over_chains(lambda p: value_and_grad(lambda q: self.log_lik(q, batch), p)[1], params, self.n_chains)

        def body(i, total):
            g = batch_grad(i * size, size)
            return i + 1, {k: total[k] + g[k] for k in total}

        zeros = {k: tf.zeros_like(p) for k, p in params.items()}
        _, total = tf.while_loop(lambda i, _: i < n_full, body, (tf.constant(0, tf.int64), zeros))
        if self.n_rows > n_full * size:
            rest = batch_grad(tf.constant(n_full * size, tf.int64), self.n_rows - n_full * size)
            total = {k: total[k] + rest[k] for k in total}
        if self.reduce is not None:  # rows sharded: every worker's rows
            names = list(total)
            total = dict(zip(names, self.reduce([total[k] for k in names])))
        if self.log_prior is not None:
            prior = map_over_chains(lambda p: value_and_grad(self.log_prior, p)[1], params, self.n_chains)
            total = {k: total[k] + prior[k] for k in total}
        return total

    def estimate_and_rows(self, params: Params, minibatch: Minibatch) -> tuple[Estimate, Params]:
        """The estimate on a minibatch per chain and that minibatch's per-row log-likelihood
        gradients ``[K, n, *shape]`` (OSGLD's gradient covariance)."""
        batch = minibatch.rows
        return self.value_and_grad(params, batch, self.scale), self.per_row_gradients(params, batch)
