"""The likelihoods a Keras network's output can parameterise (SPEC §13): per-row log-densities
for ``log_lik`` and the per-draw quantities ``predict`` averages.

Every form maps ``(y, outputs)`` for a batch of n rows to n per-row log-likelihoods; the
network's ``log_lik`` is their sum. Shapes are checked twice: against the model's output shape
when :func:`~sgmcmc.keras.from_model` can see it, and on the tensors at trace time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np
import tensorflow as tf

#: The name of the learned log noise sd of ``likelihood="normal", noise_scale="learn"``.
NOISE_LOG_SCALE = "noise_log_scale"

#: Prior sd of ``noise_log_scale`` unless ``prior_scale`` names it: log sd ~ N(0, 1), i.e. the
#: noise sd within a factor e² ≈ 7.4 of 1 with probability 0.95 (targets on a unit scale).
NOISE_LOG_SCALE_PRIOR_SD = 1.0

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def positive_number(value: Any, what: str, accepted: str) -> float:
    """``value`` as a positive, finite float, or an error naming ``what`` and what is ``accepted``."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be {accepted}; got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be {accepted}; got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} must be positive and finite ({accepted}); got {value!r}")
    return number


def rows_shape(shape: Any) -> tuple | None:
    """The per-row part of a model output shape ``(batch, *per_row)``, or None if unknown."""
    if shape is None:
        return None
    shape = tuple(shape)
    return shape[1:] if len(shape) >= 1 else None


class Likelihood:
    """One likelihood form. Subclasses define the per-row log-density and the predictive."""

    name: str = ""

    def extra_params(self) -> dict[str, float]:
        """Parameters the likelihood adds to the network's (name -> start)."""
        return {}

    def check_outputs(self, per_row: tuple) -> None:
        """Raise ValueError when a model whose output rows have shape ``per_row`` cannot
        parameterise this likelihood."""

    def log_prob(self, y: tf.Tensor, outputs: tf.Tensor, params: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """Per-row log-likelihoods, shape ``(n,)``."""
        raise NotImplementedError

    def predictive_terms(self, outputs: tf.Tensor, params: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, ...]:
        """The per-draw quantities whose average over draws gives the predictive."""
        raise TypeError(
            "predict needs the predictive distribution, which sgmcmc knows for likelihood='categorical', "
            "'bernoulli' and 'normal'; with your own likelihood function, average what you need over the draws "
            "with bnn.forward(draw, x) (the network's outputs at one draw)"
        )

    def predictive(self, means: tuple) -> Any:
        """The predictive summary from the averaged terms (numpy)."""
        raise NotImplementedError


def _per_row_outputs(outputs: tf.Tensor) -> tf.Tensor:
    """A single-column output ``(n, 1)`` as ``(n,)``."""
    if outputs.shape.rank == 2 and outputs.shape[-1] == 1:
        return outputs[:, 0]
    return outputs


def _vector_labels(y: tf.Tensor, what: str) -> tf.Tensor:
    """Labels of shape ``(n,)`` or ``(n, 1)`` as ``(n,)``."""
    if y.shape.rank == 2 and y.shape[-1] == 1:
        return y[:, 0]
    if y.shape.rank != 1:
        raise ValueError(f"{what}: y must hold one label per row, shape (n,) or (n, 1); got shape {y.shape}")
    return y


class Categorical(Likelihood):
    r"""``outputs`` are logits z (n, K): :math:`\log p(y_i) = z_{i y_i} - \log\sum_k e^{z_{ik}}`;
    y integer labels in 0…K−1 ((n,) or (n, 1)) or one-hot rows (n, K) (soft labels: the
    cross-entropy :math:`\sum_k y_{ik}\log\mathrm{softmax}(z_i)_k`)."""

    name = "categorical"

    def check_outputs(self, per_row: tuple) -> None:
        if len(per_row) != 1 or (per_row[0] is not None and per_row[0] < 2):
            raise ValueError(
                f"likelihood='categorical' needs one logit per class, outputs of shape (batch, K) with K >= 2; "
                f"the model's outputs have shape (batch, {', '.join(map(str, per_row))})"
                + ("; for two classes with a single logit use likelihood='bernoulli'" if per_row == (1,) else "")
            )

    def log_prob(self, y, outputs, params):
        log_probs = tf.nn.log_softmax(outputs)
        if y.dtype.is_integer:
            labels = _vector_labels(y, "likelihood='categorical'")
            return tf.gather(log_probs, labels, axis=1, batch_dims=1)
        if y.shape.rank == 2 and y.shape[-1] == outputs.shape[-1]:
            return tf.reduce_sum(tf.cast(y, outputs.dtype) * log_probs, axis=-1)
        raise ValueError(
            f"likelihood='categorical': y must be integer labels, shape (n,), or one-hot rows, shape (n, "
            f"{outputs.shape[-1]}); got {y.dtype.name} of shape {y.shape} (float labels: pass y.astype(int))"
        )

    def predictive_terms(self, outputs, params):
        return (tf.nn.softmax(outputs),)

    def predictive(self, means):
        return means[0]


class Bernoulli(Likelihood):
    r"""``outputs`` are one logit z per row: :math:`\log p(y_i) = y_i z_i - \log(1 + e^{z_i})`,
    y in {0, 1} of shape (n,) or (n, 1)."""

    name = "bernoulli"

    def check_outputs(self, per_row: tuple) -> None:
        if per_row not in ((), (1,)):
            raise ValueError(
                f"likelihood='bernoulli' needs one logit per row, outputs of shape (batch, 1); the model's outputs "
                f"have shape (batch, {', '.join(map(str, per_row))})"
                + ("; for K classes with K logits use likelihood='categorical'" if len(per_row) == 1 else "")
            )

    def log_prob(self, y, outputs, params):
        logits = _per_row_outputs(outputs)
        labels = tf.cast(_vector_labels(y, "likelihood='bernoulli'"), logits.dtype)
        return -tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def predictive_terms(self, outputs, params):
        p = tf.sigmoid(_per_row_outputs(outputs))
        return (tf.stack([1.0 - p, p], axis=-1),)

    def predictive(self, means):
        return means[0]


class Normal(Likelihood):
    r"""``outputs`` are the means μ: :math:`\log p(y_i) = \sum_j \log N(y_{ij} | μ_{ij}, σ^2)`,
    σ fixed (``noise_scale``, a number) or :math:`e^{s}` with s the parameter
    ``noise_log_scale`` (``noise_scale="learn"``)."""

    name = "normal"

    def __init__(self, noise_scale: float | str | None):
        if isinstance(noise_scale, str):
            if noise_scale != "learn":
                raise ValueError(f"noise_scale must be a positive number or 'learn'; got {noise_scale!r}")
            self.learn = True
            self.scale = None
        else:
            if noise_scale is None:
                raise ValueError(
                    "likelihood='normal' needs noise_scale=: the noise sd as a positive number, or 'learn' to "
                    f"sample its log as the parameter {NOISE_LOG_SCALE!r}"
                )
            self.learn = False
            self.scale = positive_number(noise_scale, "noise_scale", "a positive number or 'learn'")

    def extra_params(self):
        return {NOISE_LOG_SCALE: 0.0} if self.learn else {}

    def _log_scale(self, params, dtype):
        if self.learn:
            return tf.cast(params[NOISE_LOG_SCALE], dtype)
        return tf.constant(math.log(self.scale), dtype)

    def log_prob(self, y, outputs, params):
        y = tf.cast(y, outputs.dtype)
        mean = _per_row_outputs(outputs) if y.shape.rank == 1 else outputs
        if y.shape.rank != mean.shape.rank or not y.shape[1:].is_compatible_with(mean.shape[1:]):
            raise ValueError(
                f"likelihood='normal': y's rows, shape {y.shape[1:]}, do not match the model's outputs, "
                f"shape {outputs.shape[1:]} (the mean of y); give y of shape (n, *output shape), or (n,) for one output"
            )
        log_scale = self._log_scale(params, mean.dtype)
        z = (y - mean) * tf.exp(-log_scale)
        per_element = -0.5 * z * z - log_scale - tf.constant(LOG_SQRT_2PI, mean.dtype)
        if per_element.shape.rank > 1:
            per_element = tf.reduce_sum(per_element, axis=list(range(1, per_element.shape.rank)))
        return per_element

    def predictive_terms(self, outputs, params):
        mean = _per_row_outputs(outputs)
        variance = tf.exp(2.0 * self._log_scale(params, mean.dtype))
        return mean, variance + mean * mean

    def predictive(self, means):
        mean, second = means
        return mean, np.sqrt(np.maximum(second - mean * mean, 0.0))


class UserLikelihood(Likelihood):
    """A function ``(y, outputs) -> per-row log-likelihoods``; refused at trace time when it
    returns a scalar (a mean- or sum-reduced value) or not one value per row."""

    name = "callable"

    def __init__(self, fn: Callable):
        self.fn = fn

    def log_prob(self, y, outputs, params):
        value = tf.convert_to_tensor(self.fn(y, outputs))
        n = outputs.shape[0]
        name = getattr(self.fn, "__name__", repr(self.fn))
        if value.shape.rank == 0:
            raise ValueError(
                f"the likelihood function {name} returned a scalar; it must return one log-likelihood per row "
                f"(shape (n,)), which sgmcmc sums: a mean over the rows would weight the data by 1/n. Remove the "
                "reduction (e.g. tf.reduce_mean) from it"
            )
        if n is not None and value.shape[0] is not None and value.shape[0] != n:
            raise ValueError(
                f"the likelihood function {name} returned shape {value.shape} for {n} rows; it must return one "
                "log-likelihood per row, shape (n,) (or (n, ...), summed over the other axes)"
            )
        if not value.dtype.is_floating:
            raise TypeError(f"the likelihood function {name} returned {value.dtype.name}; it must return floats")
        if value.shape.rank > 1:
            value = tf.reduce_sum(value, axis=list(range(1, value.shape.rank)))
        return value


def make_likelihood(likelihood: str | Callable, noise_scale: float | str | None) -> Likelihood:
    """The :class:`Likelihood` named by ``likelihood`` (refusing unknown names, Keras losses and
    ``noise_scale`` where it means nothing)."""
    if isinstance(likelihood, str):
        forms = {"categorical": Categorical, "bernoulli": Bernoulli, "normal": Normal}
        if likelihood not in forms:
            raise ValueError(
                f"unknown likelihood {likelihood!r}: use 'categorical' (logits), 'bernoulli' (one logit), 'normal' "
                "(the mean; with noise_scale=) or a function (y, outputs) -> per-row log-likelihoods"
            )
        if likelihood != "normal" and noise_scale is not None:
            raise ValueError(f"noise_scale is only for likelihood='normal', not {likelihood!r}")
        return Normal(noise_scale) if likelihood == "normal" else forms[likelihood]()
    if not callable(likelihood):
        raise TypeError(f"likelihood must be a name or a function (y, outputs) -> per-row log-likelihoods; got {likelihood!r}")
    _refuse_keras_loss(likelihood)
    if noise_scale is not None:
        raise ValueError("noise_scale is only for likelihood='normal'; a likelihood function holds its own scale")
    return UserLikelihood(likelihood)


def _refuse_keras_loss(fn: Callable) -> None:
    """A Keras loss is a NEGATIVE log-likelihood, and a ``keras.losses.Loss`` object also averages
    over the rows: both would sample the wrong posterior."""
    fix = (
        "a Keras loss is a negative log-likelihood{mean}; pass the per-row log-likelihood instead, e.g. "
        "likelihood=lambda y, out: -keras.losses.sparse_categorical_crossentropy(y, out, from_logits=True), or "
        "one of the names 'categorical', 'bernoulli', 'normal'"
    )
    if isinstance(fn, keras.losses.Loss):
        raise ValueError(f"likelihood={type(fn).__name__}(...) is refused: " + fix.format(mean=" averaged over the rows"))
    if (getattr(fn, "__module__", "") or "").startswith("keras") and getattr(fn, "__name__", "") != "<lambda>":
        raise ValueError(f"likelihood=keras.losses.{fn.__name__} is refused: " + fix.format(mean=""))
