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
so the wrapped model needs no Jacobian term.

**Flat directions are measured, not floored.** The Hessian sees only the smooth part of the
posterior: along a direction the likelihood does not identify (covertype's one-hot blocks sum to
one, so an intercept shift is free) a Laplace(0, 1) prior has Hessian 0 almost everywhere, and
the eigenvalue is 0 or float noise although the posterior is proper there and a few units wide.
Whitening by such an eigenvalue makes that direction astronomically wide (the first version did:
κ 10¹⁰, a stepsize of 2·10⁻⁶ and R-hat 3 after 200,000 iterations). So along each eigenvector
whose eigenvalue is below :data:`PROBE_RATIO`·λ_max (at most :data:`MAX_PROBES`, smallest first)
the log posterior is evaluated on the same row subsample at ±s for s on a doubling grid, and the
direction's curvature becomes :math:`(3/s_\ast)^2`, :math:`s_\ast` the distance at which it has
fallen by :data:`PROBE_FALL` = 4.5 nats (the geometric mean of the two sides, interpolated as a
power law between the grid points that bracket it): a Gaussian falls 4.5 nats at 3 sds, so this
is its own curvature; a Laplace-shaped direction (a kink, e^{−a|s|}, sd √2/a) falls 4.5 nats at
4.5/a, giving sd 1.5/a, within 6 % (a ½-nat level, tried first, gave 1/(2a): 2.8× too narrow, and
the chains mixed ~8× slower along it). A direction along which it never falls that far within
the grid is flat: no posterior exists, and :class:`~sgmcmc.ImproperPosteriorError` names its
largest elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

from ..constraints import Constrained
from ..errors import ImproperPosteriorError
from ..graph_options import own_function, package_call_options
from ..stability.check import RowSample, flatten, unflatten
from ..stability.curvature import NegativeHessian
from ..step.posterior import Posterior

#: The Hessian is taken densely up to this many unconstrained elements (d products on the row
#: subsample, a d × d matrix; beyond, :func:`sgmcmc.sample` uses per-parameter stepsizes).
DENSE_MAX = 1_000
#: Rows of the subsample the Hessian is summed over (scaled to N): the mode search's.
HESSIAN_ROWS = 20_000
#: Newton steps from the mode search's end (:func:`newton_polish`): at most this many, until the
#: Newton decrement is below this many posterior sds.
NEWTON_STEPS = 10
NEWTON_TOLERANCE = 0.05
#: Eigenvalues below this times λ_max are raised to it (after the probes: only directions the
#: probes did not reach).
EIGEN_FLOOR = 1e-10
#: Eigen-directions with an eigenvalue below this times λ_max are probed along a line.
PROBE_RATIO = 1e-3
#: At most this many directions are probed.
MAX_PROBES = 50
#: The probe's grid: s = 2^j / √λ_max · 10^-2, j = 0 … PROBE_STEPS − 1 (reach ~10^10 sds of the
#: stiffest direction).
PROBE_STEPS = 48
#: The fall of the log posterior (nats) whose distance the probe measures: 3 sds of a Gaussian.
PROBE_FALL = 4.5
#: Rows per compiled call of the probe (its values are summed in float64 across calls).
PROBE_BLOCK_ROWS = 1_000


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
    effective : numpy.ndarray
        The curvature used along each eigenvector: the eigenvalue, or the probe's where larger.
    """

    mode: dict[str, np.ndarray]
    hessian: np.ndarray
    eigenvalues: np.ndarray
    whitening: np.ndarray
    effective: np.ndarray

    @property
    def dim(self) -> int:
        return self.hessian.shape[0]

    @property
    def probed(self) -> int:
        """How many directions took the line probe's curvature (module docstring)."""
        return int(np.sum(self.effective > self.eigenvalues))

    @property
    def condition_number(self) -> float:
        """κ = λ_max / λ_min of the curvatures used (probed directions: the probe's)."""
        top = float(self.effective.max())
        return top / max(float(self.effective.min()), EIGEN_FLOOR * top)

    @property
    def scaled_condition_number(self) -> float:
        """κ of :math:`D^{-1/2}AD^{-1/2}`, D = diag(A): what is left after one stepsize per
        element (the best any diagonal preconditioner, or per-parameter stepsizes, can do)."""
        vectors = np.linalg.eigh(self.hessian)[1]
        used = (vectors * self.effective[None, :]) @ vectors.T  # the Hessian with the probed curvatures
        diag = np.sqrt(np.maximum(np.diag(used), np.finfo(float).tiny))
        values = np.linalg.eigvalsh(used / diag[:, None] / diag[None, :])
        return float(values[-1] / max(values[0], EIGEN_FLOOR * values[-1]))

    @property
    def sds(self) -> dict[str, np.ndarray]:
        """The Laplace approximation's marginal sds of every unconstrained element, by name."""
        var = np.sum(self.whitening**2, axis=1)
        return unflatten(np.sqrt(var), self.mode)


def tensor_unflattener(like: Mapping[str, np.ndarray]) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """The in-graph :func:`unflatten` of one point: a tensor ``[d]`` -> name -> ``like``'s shapes."""
    slices, at = [], 0
    for k, v in like.items():
        shape = tuple(np.shape(v))
        size = int(np.prod(shape))
        slices.append((k, at, at + size, shape))
        at += size
    return lambda x: {k: tf.reshape(x[a:b], shape) for k, a, b, shape in slices}


def dense_hessian(estimator, mode: Mapping[str, np.ndarray], seed: int, sample_size: int = HESSIAN_ROWS) -> np.ndarray:
    """A at ``mode``, one Hessian-vector product per element on a row subsample of at most
    ``sample_size`` rows scaled to N (all rows when N is that small), symmetrised.

    Parameters
    ----------
    estimator
        A one-chain :class:`~sgmcmc.step.estimators.plain.MinibatchGradient` of the model on the
        unconstrained scale (the mode search's sampler's ``one_chain_estimator``).
    mode
        Name -> unconstrained value.
    seed
        Seeds the row subsample.
    sample_size
        At most this many rows.
    """
    names = list(mode)
    point = {k: tf.convert_to_tensor(np.asarray(v)) for k, v in mode.items()}  # the model dtype
    sample = RowSample.draw(estimator.posterior, max(sample_size, 10 * estimator.batch_size), seed)
    hess = NegativeHessian(estimator.posterior, point, sample.rows, sample.scale)
    d = sum(int(np.prod(np.shape(v))) for v in mode.values())
    columns = np.empty((d, d))
    basis = np.zeros(d)
    with package_call_options():
        for j in range(d):
            basis[j] = 1.0
            columns[:, j] = flatten(hess(unflatten(basis, mode)), names)
            basis[j] = 0.0
    return 0.5 * (columns + columns.T)


def element_names(like: Mapping[str, np.ndarray]) -> list[str]:
    """``name`` or ``name[i, j]`` of every flattened element, in order."""
    out = []
    for k, v in like.items():
        shape = np.shape(v)
        out += [k] if shape == () else [f"{k}[{', '.join(map(str, i))}]" for i in np.ndindex(*shape)]
    return out


def probe_lines(posterior: Posterior, mode: Mapping[str, np.ndarray], directions: np.ndarray, sample: RowSample,
                scale: float) -> np.ndarray:
    r"""Along each column u of ``directions`` (unit length, flattened), the distance
    :math:`s_{1/2}` at which the log posterior has fallen by ½ from the mode (geometric mean of
    the two sides; module docstring); inf where it never does within the grid.

    Parameters
    ----------
    posterior
        The model (:class:`~sgmcmc.step.posterior.Posterior`; its ``log_lik`` and ``log_prior``:
        the unconstrained model; its ``sum_over_workers``: the likelihood's values summed over
        the workers' rows when sharded).
    mode
        Name -> unconstrained value.
    directions
        ``[d, D]``.
    sample
        The rows (scaled by ``sample.scale`` to N).
    scale
        The first grid point's distance; the grid doubles from there.
    """
    names = list(mode)
    centre = flatten(mode, names)
    steps = scale * 2.0 ** np.arange(PROBE_STEPS)
    signs = np.array([1.0, -1.0])
    # points [D, 2, S, d]
    offsets = directions.T[:, None, None, :] * (signs[:, None] * steps[None, :])[None, :, :, None]
    # the mode itself last
    points = np.concatenate([(centre + offsets).reshape(-1, centre.size), centre[None]])
    dtype = tf.as_dtype(np.asarray(next(iter(mode.values()))).dtype)  # the model dtype
    unflat = tensor_unflattener(mode)

    log_lik, log_prior = posterior.log_lik, posterior.log_prior

    # own_function: a new tf.function per call of sample() (its model) without TensorFlow's
    # "triggered retracing" notice from the fifth call in a process on (graph_options)
    @own_function
    def lik_values(xs, block):
        return tf.map_fn(lambda x: log_lik(unflat(x), block), xs, fn_output_signature=dtype)

    xs = tf.constant(points, dtype)
    total = np.zeros(len(points))
    rows = sample.rows
    n = len(next(iter(rows.values())))
    with package_call_options():
        for first in range(0, n, PROBE_BLOCK_ROWS):  # float64 sums of blocks: a ½-nat fall is visible at N = 10^7
            block = {k: tf.constant(v[first:first + PROBE_BLOCK_ROWS]) for k, v in rows.items()}
            total += lik_values(xs, block).numpy().astype(np.float64)
        total *= sample.scale
        # rows sharded across workers: every worker's rows (sgmcmc.auto.sharded)
        total = posterior.sum_over_workers({"lik": total})["lik"]
        if log_prior is not None:
            prior = own_function(lambda xs: tf.map_fn(lambda x: log_prior(unflat(x)), xs, fn_output_signature=dtype))
            total += prior(xs).numpy().astype(np.float64)
    at_mode, total = total[-1], total[:-1]
    fall = (at_mode - total).reshape(directions.shape[1], 2, PROBE_STEPS)
    fall[~np.isfinite(fall)] = np.inf  # overflow far out counts as fallen
    reached = fall >= PROBE_FALL
    j = reached.argmax(axis=2)  # the first grid point at or past the level, [D, 2]
    distance = np.full(j.shape, np.inf)
    for idx in np.ndindex(*j.shape):
        if not reached[idx].any():
            continue
        k = j[idx]
        hi, lo = fall[idx][k], (fall[idx][k - 1] if k > 0 else 0.0)
        if k > 0 and np.isfinite(hi) and lo > 0:  # fall ≈ c·s^p between the two points
            p = np.log(hi / lo) / np.log(2.0)
            distance[idx] = steps[k - 1] * (PROBE_FALL / lo) ** (1.0 / p) if p > 0 else steps[k]
        else:
            distance[idx] = steps[k]
    return np.sqrt(distance[:, 0] * distance[:, 1])


def newton_polish(estimator, mode: Mapping[str, np.ndarray], seed: int) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    r"""Newton steps with the dense Hessian from the mode search's end until the Newton decrement
    :math:`\sqrt{g^\top A^{-1}g}` (the distance from the mode in posterior sds on the Gaussian
    approximation) is below :data:`NEWTON_TOLERANCE`, at most :data:`NEWTON_STEPS`; g the
    full-data gradient (one streamed pass a step), A on the row subsample with its eigenvalues
    raised to 10⁻⁶·λ_max for the solve, the step halved until the full-data log posterior rises.

    The mode search stops once it is within √d sds (its end check is a lower bound): on breast
    cancer with a N(0, 10²) prior it ended 4.1 sds away with |β| 2.8 against the mode's 21.7, and a
    Laplace approximation taken there whitens by the wrong curvature. Returns the mode, A there
    and the full-data passes made.
    """
    names = list(mode)
    point = {k: np.asarray(v) for k, v in mode.items()}
    dtype = next(iter(point.values())).dtype
    passes = 0

    def value_and_gradient(x):
        nonlocal passes
        passes += 1
        with package_call_options():
            value, grad = estimator.full_data_log_post_and_gradient({k: tf.constant(v) for k, v in x.items()})
        return value, flatten({k: g.numpy() for k, g in grad.items()}, names)

    value, grad = value_and_gradient(point)
    hessian = dense_hessian(estimator, point, seed)
    for _ in range(NEWTON_STEPS):
        values, vectors = np.linalg.eigh(hessian)
        floor = 1e-6 * max(float(values[-1]), np.finfo(float).tiny)
        step = vectors @ ((vectors.T @ grad) / np.maximum(values, floor))
        if not np.sqrt(max(float(grad @ step), 0.0)) > NEWTON_TOLERANCE:
            break
        centre, t = flatten(point, names), 1.0
        for _ in range(20):
            trial = {k: v.astype(dtype) for k, v in unflatten(centre + t * step, point).items()}
            new_value, new_grad = value_and_gradient(trial)
            if np.isfinite(new_value) and new_value > value:
                break
            t *= 0.5
        else:
            break  # no ascent along the Newton direction: at the mode to float precision
        point, value, grad = trial, new_value, new_grad
        hessian = dense_hessian(estimator, point, seed)
    return point, hessian, passes


def laplace_at(estimator, mode: Mapping[str, np.ndarray], seed: int, hessian: np.ndarray | None = None) -> Laplace:
    """The :class:`Laplace` approximation at ``mode`` (see :func:`dense_hessian`; ``hessian`` if
    already taken there), flat directions probed (module docstring)."""
    mode = {k: np.asarray(v) for k, v in mode.items()}
    hessian = dense_hessian(estimator, mode, seed) if hessian is None else hessian
    values, vectors = np.linalg.eigh(hessian)
    top = max(float(values[-1]), np.finfo(float).tiny)
    effective = values.copy()
    probe = np.flatnonzero(values < PROBE_RATIO * top)[:MAX_PROBES]
    if probe.size:
        sample = RowSample.draw(estimator.posterior, max(HESSIAN_ROWS, 10 * estimator.batch_size), seed)
        half = probe_lines(estimator.posterior, mode, vectors[:, probe], sample, 1e-2 / np.sqrt(top))
        flat = ~np.isfinite(half)
        if flat.any():
            u = vectors[:, probe[np.argmax(flat)]]
            names = element_names(mode)
            order = np.argsort(-np.abs(u))[:4]
            raise ImproperPosteriorError(
                f"the log posterior does not fall along a direction from the mode (moved "
                f"{PROBE_STEPS - 1} doublings, to {1e-2 / np.sqrt(top) * 2.0 ** (PROBE_STEPS - 1):.3g}, it never "
                f"fell by {PROBE_FALL:g} nats): it is flat or rising there, so no posterior exists. The direction moves "
                f"{', '.join(names[i] for i in order)} (largest shares first). Give a proper log_prior on these "
                f"parameters (e.g. tfp.distributions.Normal(0., 10.).log_prob), or fix the model so the data "
                f"identify them", [names[i] for i in order],
            )
        effective[probe] = np.maximum(values[probe], (3.0 / half) ** 2)
    floored = np.maximum(effective, EIGEN_FLOOR * top)
    return Laplace(mode, hessian, values, vectors / np.sqrt(floored)[None, :], effective)


class Whitened:
    """The model in φ (:math:`\\xi = \\hat\\xi + M\\varphi`, module docstring): ``log_lik`` and
    ``log_prior`` of ``{"phi": [d]}`` for the samplers, and the way back to the user's values.

    Parameters
    ----------
    mode
        Name -> the centre :math:`\\hat\\xi` (unconstrained; the control variate's anchor is φ = 0).
    matrix
        ``[d, d]``, M (the Laplace approximation's, or one estimated from draws).
    log_lik, log_prior
        The user's functions (constrained scale).
    constraints
        The map to the constrained scale, or None.
    dtype
        The model dtype.
    """

    name = "phi"

    def __init__(self, mode: Mapping[str, np.ndarray], matrix: np.ndarray, log_lik: Callable,
                 log_prior: Callable | None, constraints: Constrained | None, dtype: tf.DType):
        self.mode = {k: np.asarray(v) for k, v in mode.items()}
        self.matrix = np.asarray(matrix, np.float64)
        self.constraints = constraints
        self.dtype = dtype
        self._user = (log_lik, log_prior)
        if constraints is not None:
            log_lik, log_prior = constraints.wrap(log_lik, log_prior)
        self._log_lik, self._log_prior = log_lik, log_prior
        names = list(self.mode)
        self._centre = flatten(self.mode, names)
        self._mode = tf.constant(self._centre, dtype)
        self._matrix = tf.constant(self.matrix, dtype)
        self._unflat = tensor_unflattener(self.mode)

    def with_matrix(self, matrix: np.ndarray) -> "Whitened":
        """The same model and centre with another M."""
        return Whitened(self.mode, matrix, *self._user, self.constraints, self.dtype)

    def to_phi(self, xi_flat: np.ndarray) -> np.ndarray:
        """φ of flattened unconstrained values ``[..., d]``: :math:`M^{-1}(\\xi - \\hat\\xi)`."""
        return np.linalg.solve(self.matrix, (np.asarray(xi_flat, np.float64) - self._centre).T).T

    def xi(self, phi: tf.Tensor) -> dict[str, tf.Tensor]:
        """One chain's unconstrained values at ``phi`` ``[d]``."""
        return self._unflat(self._mode + tf.linalg.matvec(self._matrix, phi))

    def log_lik(self, params, dataset):
        return self._log_lik(self.xi(params[self.name]), dataset)

    @property
    def log_prior(self) -> Callable | None:
        if self._log_prior is None:
            return None
        return lambda params: self._log_prior(self.xi(params[self.name]))

    def to_flat(self, phi: np.ndarray) -> np.ndarray:
        """Flattened unconstrained values ``[..., d]`` of φ ``[..., d]`` (float64)."""
        return self._centre + np.asarray(phi, np.float64) @ self.matrix.T

    def to_unconstrained(self, phi: np.ndarray) -> dict[str, np.ndarray]:
        """Arrays ``[..., d]`` of φ as the user's parameters on the unconstrained scale."""
        dtype = self.dtype.as_numpy_dtype
        return {k: v.astype(dtype) for k, v in unflatten(self.to_flat(phi), self.mode).items()}

    def to_user(self, unconstrained: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Unconstrained arrays (any leading axes) on the user's scale."""
        if self.constraints is None:
            return dict(unconstrained)
        return self.constraints.to_constrained(unconstrained)
