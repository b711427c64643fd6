r"""The curvature at the mode and the parametrisation :func:`sgmcmc.sample` samples in.

At the mode :math:`\hat\xi` (unconstrained scale) the negative log-posterior Hessian
:math:`A = Q\Lambda Q^\top` is taken densely, column by column from Hessian-vector products on
the mode search's row subsample (the likelihood's part scaled N/m; all rows when N is small).
The chain then moves :math:`\varphi` with

.. math:: \xi = \hat\xi + M\varphi,\qquad M = Q\Lambda^{-1/2},

so that on the Laplace approximation :math:`\varphi \sim N(0, I)`: every direction has curvature
one, whatever the conditioning of A. SGLD on φ is SGLD on ξ with the constant preconditioner
:math:`A^{-1}` (Welling & Teh 2011 with a fixed metric; Stan's dense metric, Laplace-estimated
instead of warm-up-estimated). The density of φ is that of ξ times the constant :math:`|\det M|`,
so the wrapped model needs no Jacobian term. Directions in which the Hessian is not positive
(a saddle, or subsample noise along a very flat direction) get curvature
:data:`EIGEN_FLOOR`·λ_max: they are sampled as very wide, and the report counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from ..constraints import Constrained
from ..graph_options import package_call_options
from ..stability.check import RowSample
from ..stability.curvature import NegativeHessian

#: The Hessian is taken densely up to this many unconstrained elements (d products on the row
#: subsample, a d × d matrix; beyond, :func:`sgmcmc.sample` uses per-parameter stepsizes).
DENSE_MAX = 1_000
#: Rows of the subsample the Hessian is summed over (scaled to N): the mode search's.
HESSIAN_ROWS = 20_000
#: Eigenvalues below this times λ_max are raised to it.
EIGEN_FLOOR = 1e-10


@dataclass(frozen=True)
class Laplace:
    """The Gaussian approximation at the mode, on the unconstrained scale.

    Attributes
    ----------
    mode : dict
        Name -> the mode's unconstrained value (the parameter's unconstrained shape).
    hessian : numpy.ndarray
        ``[d, d]``, :math:`A = -\\nabla^2\\log p(\\xi|x)` at the mode (symmetrised), elements in
        the order of ``mode``, each parameter flattened C-wise.
    eigenvalues : numpy.ndarray
        A's eigenvalues, ascending, as computed (before the floor).
    whitening : numpy.ndarray
        ``[d, d]``, M with :math:`\\xi = \\hat\\xi + M\\varphi`.
    """

    mode: dict[str, np.ndarray]
    hessian: np.ndarray
    eigenvalues: np.ndarray
    whitening: np.ndarray

    @property
    def dim(self) -> int:
        return self.hessian.shape[0]

    @property
    def floored(self) -> int:
        """How many eigenvalues were raised to the floor (not positive, or nearly 0)."""
        top = float(self.eigenvalues[-1])
        return int(np.sum(self.eigenvalues < EIGEN_FLOOR * top))

    @property
    def condition_number(self) -> float:
        """κ(A) = λ_max / λ_min (after the floor)."""
        top = float(self.eigenvalues[-1])
        return top / max(float(self.eigenvalues[0]), EIGEN_FLOOR * top)

    @property
    def scaled_condition_number(self) -> float:
        """κ of :math:`D^{-1/2}AD^{-1/2}`, D = diag(A): what is left after one stepsize per
        element (the best any diagonal preconditioner, or per-parameter stepsizes, can do)."""
        diag = np.sqrt(np.maximum(np.diag(self.hessian), np.finfo(float).tiny))
        values = np.linalg.eigvalsh(self.hessian / diag[:, None] / diag[None, :])
        return float(values[-1] / max(values[0], EIGEN_FLOOR * values[-1]))

    @property
    def sds(self) -> dict[str, np.ndarray]:
        """The Laplace approximation's marginal sds of every unconstrained element, by name."""
        var = np.sum(self.whitening**2, axis=1)
        return unflatten(np.sqrt(var), self.mode)


def flatten(values: Mapping[str, Any], names: list[str]) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(values[k], np.float64)) for k in names])


def unflatten(x: np.ndarray, like: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``x`` ``[..., d]`` split into ``like``'s parameters (their shapes after the leading axes)."""
    out, at = {}, 0
    lead = x.shape[:-1]
    for k, v in like.items():
        size = int(np.prod(np.shape(v)))
        out[k] = x[..., at:at + size].reshape(lead + np.shape(v))
        at += size
    return out


def dense_hessian(estimator, mode: Mapping[str, np.ndarray], seed: int, rows: int = HESSIAN_ROWS) -> np.ndarray:
    """A at ``mode``, one Hessian-vector product per element on a row subsample of at most
    ``rows`` rows scaled to N (all rows when N is that small), symmetrised.

    Parameters
    ----------
    estimator
        A one-chain :class:`~sgmcmc.step.estimators.plain.MinibatchGradient` of the model on the
        unconstrained scale (the mode search's sampler's ``one_chain_estimator``).
    mode
        Name -> unconstrained value.
    seed
        Seeds the row subsample.
    rows
        At most this many rows.
    """
    names = list(mode)
    point = {k: tf.convert_to_tensor(np.asarray(v)) for k, v in mode.items()}  # the model dtype
    sample = RowSample.draw(estimator, max(rows, 10 * estimator.batch_size), seed)
    hess = NegativeHessian(estimator, point, sample.rows, sample.scale)
    d = sum(int(np.prod(np.shape(v))) for v in mode.values())
    columns = np.empty((d, d))
    basis = np.zeros(d)
    with package_call_options():
        for j in range(d):
            basis[j] = 1.0
            columns[:, j] = flatten(hess(unflatten(basis, mode)), names)
            basis[j] = 0.0
    return 0.5 * (columns + columns.T)


def laplace_at(estimator, mode: Mapping[str, np.ndarray], seed: int) -> Laplace:
    """The :class:`Laplace` approximation at ``mode`` (see :func:`dense_hessian`)."""
    mode = {k: np.asarray(v) for k, v in mode.items()}
    hessian = dense_hessian(estimator, mode, seed)
    values, vectors = np.linalg.eigh(hessian)
    top = max(float(values[-1]), np.finfo(float).tiny)
    floored = np.maximum(values, EIGEN_FLOOR * top)
    return Laplace(mode, hessian, values, vectors / np.sqrt(floored)[None, :])


class Whitened:
    """The model in φ (:math:`\\xi = \\hat\\xi + M\\varphi`, module docstring): ``log_lik`` and
    ``log_prior`` of ``{"phi": [d]}`` for the samplers, and the way back to the user's values.

    Parameters
    ----------
    laplace
        The approximation at the mode.
    log_lik, log_prior
        The user's functions (constrained scale).
    constraints
        The map to the constrained scale, or None.
    dtype
        The model dtype.
    """

    name = "phi"

    def __init__(self, laplace: Laplace, log_lik: Callable, log_prior: Callable | None,
                 constraints: Constrained | None, dtype: tf.DType):
        self.laplace = laplace
        self.constraints = constraints
        self.dtype = dtype
        if constraints is not None:
            log_lik, log_prior = constraints.wrap(log_lik, log_prior)
        self._log_lik, self._log_prior = log_lik, log_prior
        names = list(laplace.mode)
        self._mode = tf.constant(flatten(laplace.mode, names), dtype)
        self._matrix = tf.constant(laplace.whitening, dtype)
        self._slices = []
        at = 0
        for k in names:
            shape = tuple(np.shape(laplace.mode[k]))
            size = int(np.prod(shape))
            self._slices.append((k, at, at + size, shape))
            at += size

    def xi(self, phi: tf.Tensor) -> dict[str, tf.Tensor]:
        """One chain's unconstrained values at ``phi`` ``[d]``."""
        flat = self._mode + tf.linalg.matvec(self._matrix, phi)
        return {k: tf.reshape(flat[a:b], shape) for k, a, b, shape in self._slices}

    def log_lik(self, params, dataset):
        return self._log_lik(self.xi(params[self.name]), dataset)

    @property
    def log_prior(self) -> Callable | None:
        if self._log_prior is None:
            return None
        return lambda params: self._log_prior(self.xi(params[self.name]))

    def to_unconstrained(self, phi: np.ndarray) -> dict[str, np.ndarray]:
        """Arrays ``[..., d]`` of φ as the user's parameters on the unconstrained scale."""
        names = list(self.laplace.mode)
        flat = flatten(self.laplace.mode, names) + np.asarray(phi, np.float64) @ self.laplace.whitening.T
        dtype = self.dtype.as_numpy_dtype
        return {k: v.astype(dtype) for k, v in unflatten(flat, self.laplace.mode).items()}

    def to_user(self, unconstrained: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Unconstrained arrays (any leading axes) on the user's scale."""
        if self.constraints is None:
            return dict(unconstrained)
        return self.constraints.to_constrained(unconstrained)
