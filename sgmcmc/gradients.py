r"""Gradient estimators of the log posterior: plain minibatch and control variate.

Both are callables ``estimator(params) -> (log_post_estimate, grads)`` that draw a fresh
minibatch on every call, so any dynamics can use either (SPEC §3):

* plain: :math:`g(\theta) = \nabla\log p(\theta) + \frac{N}{n}\sum_{i\in S}\nabla\log p(x_i|\theta)`
* control variate (Baker et al. 2018):
  :math:`\tilde g(\theta) = \nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta)`,
  the same minibatch S in both terms.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from .minibatch import gather_rows, sample_indices

Params = dict[str, tf.Tensor]
LogLik = Callable[[Params, dict[str, tf.Tensor]], tf.Tensor]
LogPrior = Callable[[Params], tf.Tensor]

#: Rows per batch when summing the full-data gradient: bounds memory at any N.
FULL_GRADIENT_BATCH_ROWS = 10_000


def value_and_grad(fn: Callable[[Params], tf.Tensor], params: Params) -> tuple[tf.Tensor, Params]:
    """``fn(params)`` and its gradient with respect to every parameter, as dense tensors.

    A parameter used through ``tf.gather`` has an IndexedSlices gradient; densifying it gives
    the same chain as the dense formulation (noise on every element each step). A parameter
    that ``fn`` does not use gets a zero gradient.
    """
    params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
    with tf.GradientTape() as tape:
        tape.watch(params)
        value = fn(params)
    grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return value, {name: tf.convert_to_tensor(g) for name, g in grads.items()}


class MinibatchGradient:
    """The plain minibatch estimate of the log posterior and its gradient.

    Parameters
    ----------
    log_lik, log_prior
        The user's functions; ``log_lik`` returns the SUM over the rows it is given.
        ``log_prior=None`` is a flat prior.
    dataset
        Name -> tensor, observations on the first axis, all of length ``n_rows``.
    batch_size
        Rows per minibatch (``n``).
    generator
        The sampler's random generator (draws the minibatch indices).
    """

    def __init__(
        self,
        log_lik: LogLik,
        log_prior: LogPrior | None,
        dataset: dict[str, tf.Tensor],
        batch_size: int,
        generator: tf.random.Generator,
    ):
        self.log_lik = log_lik
        self.log_prior = log_prior
        self.dataset = dataset
        self.n_rows = int(next(iter(dataset.values())).shape[0])
        self.batch_size = batch_size
        self.generator = generator
        self.scale = self.n_rows / batch_size
        self._batch_lik_grad = tf.function(self._lik_grad, reduce_retracing=True)

    def sample_minibatch(self) -> dict[str, tf.Tensor]:
        return gather_rows(self.dataset, sample_indices(self.generator, self.n_rows, self.batch_size))

    def log_post(self, params: Params, batch: dict[str, tf.Tensor], scale: float) -> tf.Tensor:
        r""":math:`\log p(\theta) + \text{scale}\cdot\sum_{i\in\text{batch}}\log p(x_i|\theta)`."""
        value = scale * self.log_lik(params, batch)
        if self.log_prior is not None:
            value = value + self.log_prior(params)
        return value

    def value_and_grad(self, params: Params, batch: dict[str, tf.Tensor], scale: float) -> tuple[tf.Tensor, Params]:
        return value_and_grad(lambda p: self.log_post(p, batch, scale), params)

    def __call__(self, params: Params) -> tuple[tf.Tensor, Params]:
        return self.value_and_grad(params, self.sample_minibatch(), self.scale)

    def full_data_gradient(self, params: Params) -> Params:
        r""":math:`\nabla\log p(\theta|x)` over all N rows, summed in batches of
        :data:`FULL_GRADIENT_BATCH_ROWS` rows so memory stays bounded (one compiled call per
        batch)."""
        params = {name: tf.convert_to_tensor(p) for name, p in params.items()}
        total = {name: tf.zeros_like(p) for name, p in params.items()}
        for start in range(0, self.n_rows, FULL_GRADIENT_BATCH_ROWS):
            batch = {k: v[start : start + FULL_GRADIENT_BATCH_ROWS] for k, v in self.dataset.items()}
            total = {name: total[name] + g for name, g in self._batch_lik_grad(params, batch).items()}
        if self.log_prior is not None:
            prior_grad = value_and_grad(self.log_prior, params)[1]
            total = {name: total[name] + prior_grad[name] for name in total}
        return total

    def _lik_grad(self, params: Params, batch: dict[str, tf.Tensor]) -> Params:
        return value_and_grad(lambda p: self.log_lik(p, batch), params)[1]


class ControlVariateGradient:
    r"""The control-variate estimate around a fixed point :math:`\hat\theta`.

    ``anchor`` and ``anchor_grad`` are variables holding :math:`\hat\theta` and
    :math:`\nabla\log p(\hat\theta|x)`; they are filled by
    :func:`sgmcmc.control_variates.set_anchor` before sampling.
    """

    def __init__(self, plain: MinibatchGradient, anchor: dict[str, tf.Variable], anchor_grad: dict[str, tf.Variable]):
        self.plain = plain
        self.anchor = anchor
        self.anchor_grad = anchor_grad

    def __call__(self, params: Params) -> tuple[tf.Tensor, Params]:
        batch = self.plain.sample_minibatch()
        value, grads = self.plain.value_and_grad(params, batch, self.plain.scale)
        _, grads_at_anchor = self.plain.value_and_grad(dict(self.anchor), batch, self.plain.scale)
        return value, {
            name: self.anchor_grad[name] + grads[name] - grads_at_anchor[name] for name in grads
        }
