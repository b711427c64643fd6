r"""The plain minibatch estimate of the log posterior and its gradient (SPEC §3):

.. math:: g(\theta) = \nabla\log p(\theta) + \frac{N}{n}\sum_{i\in S}\nabla\log p(x_i|\theta),

S a fresh uniform n-subset per chain and per call, on a :class:`~sgmcmc.step.posterior.Posterior`
(the model: its full-data passes and compiled programs live there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import tensorflow as tf

from ...data.rows import Rows
from ...data.stream import BatchStream
from ..contract import Estimate, Minibatch, Params, map_over_chains
from ..posterior import (  # noqa: F401 -- FULL_GRADIENT_BATCH_ROWS, value_and_grad: also imported from here
    FULL_GRADIENT_BATCH_ROWS, LogLik, LogPrior, Posterior, per_row_gradients, value_and_grad,
)
from .spec import EstimatorSpec

@dataclass(frozen=True)
class Plain(EstimatorSpec):
    """``estimator="plain"``: the minibatch estimate above (no state, no options)."""

    name: ClassVar[str] = "plain"
    stream_refusal: ClassVar[str | None] = None

    def settings(self) -> dict[str, Any]:
        return {}  # a plain run's settings and checkpoint fingerprint name no estimator


class MinibatchGradient:
    r"""The plain estimator for ``n_chains`` chains, each with its own minibatch.

    Parameters
    ----------
    log_lik, log_prior, dataset, rows
        The model: a :class:`~sgmcmc.step.posterior.Posterior` is made of them (or use
        :meth:`on` with one). Minibatches do not come from ``dataset``: the sampler hands each
        iteration's block to the estimator as an argument
        (:class:`~sgmcmc.step.contract.Minibatch`); full-data passes stream the entries.
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
        self._init(Posterior(log_lik, log_prior, dataset, rows, reduce), batch_size, n_chains, replace)

    @classmethod
    def on(cls, posterior: Posterior, batch_size: int, n_chains: int = 1, replace: bool = False) -> "MinibatchGradient":
        """The estimator of ``posterior`` (its programs and tensors shared) with this minibatch
        scheme."""
        estimator = cls.__new__(cls)
        estimator._init(posterior, batch_size, n_chains, replace)
        return estimator

    def _init(self, posterior: Posterior, batch_size: int, n_chains: int, replace: bool) -> None:
        #: The model (:class:`~sgmcmc.step.posterior.Posterior`): what the full-data passes, the
        #: curvature and the tuner read; the attributes below read it.
        self.posterior = posterior
        self.replace = bool(replace)
        self.batch_size = batch_size
        self.n_chains = n_chains
        self.n_rows = posterior.n_rows
        self.scale = self.n_rows / batch_size

    log_lik = property(lambda self: self.posterior.log_lik)
    log_prior = property(lambda self: self.posterior.log_prior)
    reduce = property(lambda self: self.posterior.reduce)
    rows = property(lambda self: self.posterior.rows)

    def program(self, name: str, make: Callable[[LogLik, LogPrior | None], Any]) -> Any:
        """:meth:`Posterior.program <sgmcmc.step.posterior.Posterior.program>`."""
        return self.posterior.program(name, make)

    def full_data_gradient(self, params: Params, progress=None) -> Params:
        """One chain: :meth:`Posterior.full_data_gradient <sgmcmc.step.posterior.Posterior.full_data_gradient>`."""
        return self.posterior.full_data_gradient(params, progress)

    def full_data_log_post_and_gradient(self, params: Params, progress=None) -> tuple[float, Params]:
        """One chain: :meth:`Posterior.full_data_log_post_and_gradient
        <sgmcmc.step.posterior.Posterior.full_data_log_post_and_gradient>`."""
        return self.posterior.full_data_log_post_and_gradient(params, progress)

    def sum_over_workers(self, totals):
        """:meth:`Posterior.sum_over_workers <sgmcmc.step.posterior.Posterior.sum_over_workers>`."""
        return self.posterior.sum_over_workers(totals)

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
                for k, v in self.posterior.in_place_tensors().items()
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
