r"""Constrained parameters through TFP bijectors (SPEC §10).

With ``constraints={name: bijector}`` the chain moves the unconstrained value :math:`\xi` and the
user's parameter is :math:`\theta = b(\xi)` (``b.forward``). The density the chain targets is the
posterior of :math:`\xi`,

.. math:: \log\pi(\xi) = \log p(b(\xi)) + \log|\det J_b(\xi)| + \sum_i \log p(x_i | b(\xi)),

so the user's ``log_prior`` is a density on the constrained scale, and a flat prior
(``log_prior=None``) is flat on the constrained scale: the log-det-Jacobian is still added.
``log_lik`` and ``log_prior`` see constrained values. The Jacobian term's ``event_ndims`` is the
rank of the unconstrained value, ``len(b.inverse_event_shape(shape))``, so bijectors whose
unconstrained shape differs from the parameter's (``SoftmaxCentered``: ``[k]`` from ``[k + 1]``;
``CorrelationCholesky``, ``FillScaleTriL``: a vector from a matrix) count every element once.
(With numpy >= 2.4, TFP 0.25's ``SoftmaxCentered()`` cannot be constructed — its ``Pad`` calls
``np.reshape(..., newshape=)`` — ``IteratedSigmoidCentered()`` maps to the simplex as well.)

:class:`Constrained` is all the samplers need: the starts mapped to the unconstrained scale
(:meth:`Constrained.to_unconstrained`, refusing values outside a bijector's support), the
user's functions wrapped (:meth:`Constrained.wrap`) and stored values mapped back
(:meth:`Constrained.to_constrained`, over any leading axes).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

Arrays = dict[str, np.ndarray]

#: Relative tolerance of the round trip forward(inverse(x)) ≈ x that decides whether a starting
#: value is in a bijector's support, per dtype (the absolute tolerance is the same number).
ROUND_TRIP_TOL = {tf.float32: 1e-4, tf.float64: 1e-8}


def _describe(bijector) -> str:
    return f"{type(bijector).__name__} bijector {bijector.name!r}"


def check_constraints(constraints: Any, names: list[str]) -> dict[str, tfp.bijectors.Bijector]:
    """``constraints`` as a dict name -> bijector with names among ``names`` (None: empty)."""
    if constraints is None:
        return {}
    if not isinstance(constraints, Mapping):
        raise TypeError(
            f"constraints must be a dict of parameter name -> tfp.bijectors.Bijector, got {type(constraints).__name__}"
        )
    unknown = [n for n in constraints if n not in names]
    if unknown:
        raise ValueError(f"constraints names {unknown} are not parameters; params has {names}")
    out = {}
    for name, b in constraints.items():
        if not isinstance(b, tfp.bijectors.Bijector):
            raise TypeError(
                f"constraints[{name!r}] must be a tfp.bijectors.Bijector (e.g. tfp.bijectors.Softplus() for a "
                f"positive parameter), got {type(b).__name__}"
            )
        out[name] = b
    return out


class Constrained:
    """The map between the user's (constrained) parameters and the chain's unconstrained state.

    Parameters
    ----------
    bijectors
        Name -> ``tfp.bijectors.Bijector``; parameters not named are unconstrained.
    shapes
        Name -> the constrained shape of every parameter (one chain).
    dtype
        The model's dtype.
    """

    def __init__(self, bijectors: Mapping[str, tfp.bijectors.Bijector], shapes: Mapping[str, tuple], dtype: tf.DType):
        self.bijectors = dict(bijectors)
        self.shapes = {n: tuple(s) for n, s in shapes.items()}
        self.dtype = dtype
        self.unconstrained_shapes = {}
        for name, shape in self.shapes.items():
            if name not in self.bijectors:
                self.unconstrained_shapes[name] = shape
                continue
            b = self.bijectors[name]
            try:
                unc = b.inverse_event_shape(tf.TensorShape(shape))
            except Exception as error:  # a shape the bijector cannot take
                raise ValueError(
                    f"params[{name!r}] has shape {shape}, which the {_describe(b)} cannot map "
                    f"({type(error).__name__}: {error})"
                ) from error
            if not unc.is_fully_defined():
                raise ValueError(f"the {_describe(b)} gives no static unconstrained shape for params[{name!r}] of shape {shape}")
            self.unconstrained_shapes[name] = tuple(unc.as_list())

    def event_ndims(self, name: str) -> int:
        """``event_ndims`` of the log-det-Jacobian: the rank of the unconstrained value."""
        return len(self.unconstrained_shapes[name])

    # -- starts -------------------------------------------------------------------------------
    def to_unconstrained(self, start: Arrays) -> Arrays:
        """One starting dict on the unconstrained scale; refuses a value outside a bijector's
        support (inverse not finite, or forward(inverse(x)) not x within :data:`ROUND_TRIP_TOL`)."""
        out = dict(start)
        tol = ROUND_TRIP_TOL.get(self.dtype, 1e-4)
        for name, b in self.bijectors.items():
            x = start[name]
            why = None
            try:
                u = b.inverse(tf.constant(x, self.dtype)).numpy()
                # A fresh tensor: TFP caches forward(inverse(y)) as y for the same tensor object.
                back = b.forward(tf.constant(u, self.dtype)).numpy()
            except Exception as error:  # e.g. an assertion of validate_args, a shape error
                why = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            else:
                if not np.all(np.isfinite(u)):
                    why = "its inverse is not finite there"
                elif back.shape != x.shape or not np.allclose(back, x, rtol=tol, atol=tol):
                    worst = np.max(np.abs(back - x)) if back.shape == x.shape else "shape"
                    why = f"forward(inverse(x)) != x (largest difference {worst})"
            if why is not None:
                raise ValueError(
                    f"the starting value of params[{name!r}] is outside the support of its constraint, the "
                    f"{_describe(b)} ({why}). Give a start on the constrained scale, inside the support "
                    f"(e.g. > 0 for Softplus/Exp, on the simplex for IteratedSigmoidCentered/SoftmaxCentered)"
                )
            if u.shape != self.unconstrained_shapes[name]:
                raise ValueError(
                    f"the {_describe(b)} maps params[{name!r}] of shape {x.shape} to shape {u.shape}, "
                    f"expected {self.unconstrained_shapes[name]}"
                )
            out[name] = u.astype(self.dtype.as_numpy_dtype)
        return out

    # -- the model on the unconstrained scale -------------------------------------------------
    def forward(self, params: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Constrained values of one chain's (or any batch of) unconstrained tensors."""
        return {n: self.bijectors[n].forward(v) if n in self.bijectors else v for n, v in params.items()}

    def log_det_jacobian(self, params: Mapping[str, tf.Tensor]) -> tf.Tensor:
        r""":math:`\sum_b \log|\det J_b(\xi)|` for one chain's unconstrained values."""
        total = tf.constant(0.0, self.dtype)
        for name, b in self.bijectors.items():
            ldj = b.forward_log_det_jacobian(params[name], event_ndims=self.event_ndims(name))
            total = total + tf.reduce_sum(tf.cast(ldj, self.dtype))
        return total

    def wrap(self, log_lik: Callable, log_prior: Callable | None) -> tuple[Callable, Callable]:
        """``log_lik`` and ``log_prior`` of the unconstrained values: the user's functions at
        the constrained values, the prior plus the log-det-Jacobian (also for a flat prior)."""

        def unconstrained_log_lik(params, dataset):
            return log_lik(self.forward(params), dataset)

        def unconstrained_log_prior(params):
            ldj = self.log_det_jacobian(params)
            return ldj if log_prior is None else log_prior(self.forward(params)) + ldj

        return unconstrained_log_lik, unconstrained_log_prior

    # -- stored values back -------------------------------------------------------------------
    def to_constrained(self, arrays: Mapping[str, np.ndarray]) -> Arrays:
        """Constrained values of unconstrained arrays with any leading axes (chains, draws)."""
        out = {}
        for name, a in arrays.items():
            a = np.asarray(a)
            if name not in self.bijectors:
                out[name] = a
                continue
            lead = a.shape[: a.ndim - len(self.unconstrained_shapes[name])]
            if a.size == 0:
                out[name] = np.empty(lead + self.shapes[name], a.dtype)
                continue
            b = self.bijectors[name]
            flat = a.reshape((-1,) + self.unconstrained_shapes[name])
            values = b.forward(tf.constant(flat, self.dtype)).numpy()
            out[name] = values.reshape(lead + self.shapes[name]).astype(a.dtype)
        return out
