r"""Samplers for the probability simplex: the exact CIR transition (SCIR) and SGRLD (SPEC §9).

A simplex parameter :math:`\omega` (Dirichlet prior :math:`\alpha`, categorical data) is
written through independent gamma variables, :math:`\omega = \theta / \sum_j \theta_j` with
:math:`\theta_j \mid z \sim \mathrm{Gamma}(a_j, 1)`, :math:`a_j = \alpha_j + \sum_i z_{ij}`
(Baker 2018, §5.3). Each :math:`\theta_j` follows the Cox–Ingersoll–Ross diffusion

.. math:: d\theta_t = (a - \theta_t)\,dt + \sqrt{2\theta_t}\,dW_t \qquad (5.3.1)

whose stationary law is Gamma(a, 1). SCIR moves :math:`\theta` by the *exact* transition of
(5.3.1) over time h with :math:`a` replaced by the unbiased minibatch estimate
:math:`\hat a = \alpha + (N/n)\sum_{i\in S} z_i` (5.3.3); SGRLD (Patterson & Teh 2013,
expanded mean) moves it by the Euler–Maruyama step of the same diffusion, mirrored at 0.

Several simplices may be stacked (e.g. LDA topics, shape (K, V)): every normalisation is
along the **last** axis; the update rules themselves are elementwise and work on any shape.

The functions are pure functions of tensors (float32 or float64, usable inside
``tf.function``); :class:`SCIR` and :class:`SGRLD` wrap them as kernels
(``init_aux`` / ``one_step``) for the sampler loop.

float32 and tiny values
-----------------------
A Gamma(s, 1) draw with a small shape s is tiny with high probability: for s = 0.01,
P(G < 1.2e-38) ≈ 0.42. TensorFlow's float32 gamma sampler clamps such draws to float32's
smallest normal number 1.1754944e-38, so a naive float32 SCIR step puts a spurious atom there.
:func:`cir_exact_log_step` therefore draws :math:`\log G` directly,

.. math:: \log \mathrm{Gamma}(s) \overset{d}{=} \log \mathrm{Gamma}(s + 1) + \tfrac{1}{s}\log U,
          \qquad U \sim \mathcal U(0, 1] \text{ independent},

which is exact (Stuart's theorem: :math:`G_{s+1} U^{1/s} \sim \mathrm{Gamma}(s)`) and never
underflows: the log-values are right far below float32's range (down to about
:math:`\log U/s \ge -16.7/s` in float32, a truncation of probability :math:`2^{-24}`
from the uniform's resolution). The kernels carry :math:`\log\theta`, so the *state* is
exact in float32. Limits, documented: anything returned on the linear scale
(:func:`cir_exact_step`'s :math:`\theta'`, and :math:`\omega`) is ``exp`` of the log-values,
so in float32 values below the smallest normal number (1.2e-38) may round to 0 (TensorFlow
flushes subnormals to zero on CPU); values above it have the right distribution. Use float64
(smallest normal 2.2e-308) when such values matter, or keep :math:`\log\theta` / use
:func:`log_to_simplex`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Union

import tensorflow as tf

from ... import checks
from ..contract import stepsize_at
from .base import Dynamics, KernelContext, PublicFunctions

__all__ = [
    "cir_exact_log_step",
    "cir_exact_step",
    "sgrld_step",
    "to_simplex",
    "log_to_simplex",
    "simplex_start",
    "log_simplex_start",
    "resolve_stepsize",
    "SCIR",
    "SGRLD",
]

Params = dict[str, tf.Tensor]
#: A stepsize: a number, a schedule ``h(t)`` of the 1-based iteration t, or a dict of those by
#: parameter name.
Stepsize = Union[float, Callable[[tf.Tensor], Any], Mapping[str, Union[float, Callable[[tf.Tensor], Any]]]]


def _as(x: Any, dtype: tf.DType) -> tf.Tensor:
    """``x`` as a ``dtype`` tensor; Python and numpy numbers are converted directly to ``dtype``
    (``tf.cast`` of a Python float would round it to float32 first)."""
    if isinstance(x, (tf.Tensor, tf.Variable)):
        return tf.cast(x, dtype)
    return tf.convert_to_tensor(x, dtype=dtype)


def _broadcast(theta: tf.Tensor, a_hat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    shape = tf.broadcast_dynamic_shape(tf.shape(theta), tf.shape(a_hat))
    return tf.broadcast_to(theta, shape), tf.broadcast_to(a_hat, shape), shape


def cir_exact_log_step(log_theta: tf.Tensor, a_hat: tf.Tensor, h: Any, seed: tf.Tensor) -> tf.Tensor:
    r"""The exact CIR transition (5.3.2)/(5.3.3) over time h, on the log scale.

    .. math::
        \theta' = (1 - e^{-h})\, G, \quad G \sim \mathrm{Gamma}(\hat a + P, 1), \quad
        P \sim \mathrm{Poisson}\!\left(\frac{\theta e^{-h}}{1 - e^{-h}}\right)
        = \mathrm{Poisson}\!\left(\frac{\theta}{e^{h} - 1}\right)

    This is the thesis' form :math:`\theta' = \frac{1 - e^{-h}}{2} W`,
    :math:`W \sim \chi^2(2\hat a, \lambda)`, :math:`\lambda = 2\theta e^{-h}/(1 - e^{-h})`
    (eq. 5.3.2, Algorithm 3; SPEC §9): a non-central :math:`\chi^2(k, \lambda)` is the
    Poisson mixture :math:`\chi^2(k + 2P)`, :math:`P \sim \mathrm{Poisson}(\lambda/2)`, and
    :math:`\chi^2(\nu) = 2\,\mathrm{Gamma}(\nu/2, 1)`, so
    :math:`\frac{1-e^{-h}}{2} W = (1 - e^{-h})\,\mathrm{Gamma}(\hat a + P, 1)` with
    :math:`P \sim \mathrm{Poisson}(\theta e^{-h}/(1 - e^{-h}))`. It has mean
    :math:`\theta e^{-h} + \hat a(1 - e^{-h})` and variance
    :math:`2\theta(e^{-h} - e^{-2h}) + \hat a (1 - e^{-h})^2`.

    :math:`\log G` is drawn as :math:`\log\mathrm{Gamma}(\hat a + P + 1) + \log(U)/(\hat a + P)`
    so it is exact for tiny shapes in float32 (see the module notes).

    Parameters
    ----------
    log_theta : tf.Tensor
        :math:`\log\theta` (any shape, float32 or float64; ``-inf`` means θ = 0).
    a_hat : tf.Tensor
        :math:`\hat a > 0`, broadcastable against ``log_theta``.
    h : float or scalar tf.Tensor
        The time step, h > 0.
    seed : tf.Tensor
        Shape [2] integer seed for the stateless draws (split three ways: Poisson, gamma,
        uniform). The same seed gives the same result.

    Returns
    -------
    tf.Tensor
        :math:`\log\theta'`, shaped like the broadcast of ``log_theta`` and ``a_hat``.
    """
    log_theta = tf.convert_to_tensor(log_theta)
    dtype = log_theta.dtype
    a_hat = _as(a_hat, dtype)
    h = _as(h, dtype)
    log_theta, a_hat, shape = _broadcast(log_theta, a_hat)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)
    # rate θ e^{-h} / (1 - e^{-h}) = θ / expm1(h), formed in log space (no overflow, no 0/0)
    rate = tf.exp(log_theta - tf.math.log(tf.math.expm1(h)))
    poisson = tf.random.stateless_poisson(shape, seeds[0], lam=rate, dtype=dtype)
    shape_param = a_hat + poisson
    g1 = tf.random.stateless_gamma(shape, seeds[1], alpha=shape_param + 1.0, dtype=dtype)
    u = tf.random.stateless_uniform(shape, seeds[2], dtype=dtype)
    log_g = tf.math.log(g1) + tf.math.log1p(-u) / shape_param  # 1 - U in (0, 1]
    return tf.math.log(-tf.math.expm1(-h)) + log_g


def cir_exact_step(theta: tf.Tensor, a_hat: tf.Tensor, h: Any, seed: tf.Tensor) -> tf.Tensor:
    r"""The exact CIR transition over time h (thesis eq. 5.3.3), on the linear scale.

    .. math::
        \theta' = (1 - e^{-h})\,\mathrm{Gamma}(\hat a + P, 1), \quad
        P \sim \mathrm{Poisson}\!\left(\frac{\theta e^{-h}}{1 - e^{-h}}\right)

    the same distribution as :math:`\frac{1-e^{-h}}{2}\chi^2(2\hat a, 2\theta e^{-h}/(1-e^{-h}))`
    (see :func:`cir_exact_log_step`, which this is ``exp`` of, with the same seed). In float32
    values below 1.2e-38 may round to 0; above it the distribution is right.

    Parameters
    ----------
    theta : tf.Tensor
        :math:`\theta \ge 0`, any shape, float32 or float64.
    a_hat : tf.Tensor
        :math:`\hat a > 0`, broadcastable against ``theta``.
    h : float or scalar tf.Tensor
        The time step, h > 0.
    seed : tf.Tensor
        Shape [2] integer seed.
    """
    theta = tf.convert_to_tensor(theta)
    return tf.exp(cir_exact_log_step(tf.math.log(theta), a_hat, h, seed))


def sgrld_step(theta: tf.Tensor, a_hat: tf.Tensor, h: Any, noise: tf.Tensor) -> tf.Tensor:
    r"""One SGRLD step, expanded-mean parametrisation (Patterson & Teh 2013; thesis §5.2.2).

    The Euler–Maruyama step of the CIR diffusion (5.3.1), mirrored at 0:

    .. math:: \theta' = \left|\theta + h(\hat a - \theta) + \sqrt{2h\theta}\,\xi\right|,
              \qquad \xi \sim N(0, 1)

    Parameters
    ----------
    theta : tf.Tensor
        :math:`\theta \ge 0`.
    a_hat : tf.Tensor
        :math:`\hat a`, broadcastable against ``theta``.
    h : float or scalar tf.Tensor
        The stepsize.
    noise : tf.Tensor
        :math:`\xi`, standard normal, shaped like ``theta``.
    """
    theta = tf.convert_to_tensor(theta)
    dtype = theta.dtype
    h = _as(h, dtype)
    a_hat = _as(a_hat, dtype)
    return tf.abs(theta + h * (a_hat - theta) + tf.sqrt(2.0 * h * theta) * _as(noise, dtype))


def to_simplex(theta: tf.Tensor) -> tf.Tensor:
    r""":math:`\omega = \theta / \sum_j \theta_j`, the sum along the last axis (Algorithm 3)."""
    return theta / tf.reduce_sum(theta, axis=-1, keepdims=True)


def log_to_simplex(log_theta: tf.Tensor) -> tf.Tensor:
    r""":math:`\omega = \exp(\log\theta - \log\sum_j\theta_j)` along the last axis (a softmax):
    :func:`to_simplex` from :math:`\log\theta`, without underflow in the sum."""
    return tf.exp(tf.nn.log_softmax(log_theta, axis=-1))


def simplex_start(omega0: tf.Tensor, a_hat: tf.Tensor) -> tf.Tensor:
    r"""The starting rule :math:`\theta_0 = \omega_0 \sum_j \hat a_j` (SPEC §9), the sum along
    the last axis (:math:`\hat a` of a first minibatch), so ``to_simplex(theta0) == omega0``."""
    a_hat = _as(a_hat, omega0.dtype)
    return omega0 * tf.reduce_sum(a_hat, axis=-1, keepdims=True)


def log_simplex_start(omega0: tf.Tensor, a_hat: tf.Tensor) -> tf.Tensor:
    r""":math:`\log\theta_0 = \log\omega_0 + \log\sum_j\hat a_j` (see :func:`simplex_start`)."""
    a_hat = _as(a_hat, omega0.dtype)
    return tf.math.log(omega0) + tf.math.log(tf.reduce_sum(a_hat, axis=-1, keepdims=True))


def resolve_stepsize(stepsize: Stepsize, name: str, t: Any, dtype: tf.DType) -> tf.Tensor:
    """The stepsize of parameter ``name`` at the 1-based iteration ``t``, as a ``dtype`` scalar.

    ``stepsize`` is a number, a schedule ``h(t)`` (e.g. the thesis' LDA schedule
    ``lambda t: h * (1 + t / tau) ** -kappa``, written with TF ops so it works in-graph), or a
    dict ``{name: number or schedule}``.
    """
    return _as(stepsize_at(stepsize[name] if isinstance(stepsize, Mapping) else stepsize, t, dtype), dtype)


class _SimplexDynamics(Dynamics):
    """What SCIR and SGRLD share: the arguments (``alpha`` is the counts model's Dirichlet
    prior, recorded with the dynamics' settings) and the traits of the count models."""

    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "alpha")
    xla: ClassVar[bool] = False  # not measured
    shard_refusal: ClassVar[str | None] = "the simplex samplers' count estimator is not yet sharded"

    @classmethod
    def from_arguments(cls, arguments, context: KernelContext):
        return cls(checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True))


def _a_hat_of(est: Any) -> Params:
    """â from the estimator's result: ``est.a_hat`` if it has one, else ``est`` (a dict)."""
    return getattr(est, "a_hat", est)


def _started_mask(flag: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """The per-chain flag (shape [K]) reshaped to broadcast against ``like`` ([K, *shape])."""
    return tf.reshape(flag, tf.concat([tf.shape(flag), tf.ones([tf.rank(like) - 1], tf.int32)], 0))


def _chain_flag(params: Params, value: bool) -> tf.Tensor:
    first = params[sorted(params)[0]]
    return tf.fill(tf.shape(first)[:1], tf.constant(value))


@dataclass(frozen=True)
class SCIR(_SimplexDynamics):
    r"""Stochastic Cox–Ingersoll–Ross kernel (thesis Algorithm 3).

    Each parameter is a stack of simplices ω (shape [K, *shape], K chains, last axis summing
    to 1). The kernel carries :math:`\log\theta` (aux ``"log_theta"``) and each step moves it by
    :func:`cir_exact_log_step` with :math:`\hat a` from the estimator, then returns
    :math:`\omega = \mathrm{softmax}(\log\theta)` along the last axis.

    Contract with the estimator: ``est = estimate(params)`` is called once per step with the
    current ω (a dict like ``params``); ``est.a_hat`` (or ``est`` itself, if a dict) must be a
    dict ``{name: a_hat}`` with, for every parameter, a tensor of the parameter's dtype and shape
    [K, *shape] holding :math:`\hat a = \alpha + (N/n)\,\mathrm{counts}(S)` — strictly
    positive (α > 0), one fresh minibatch per step and chain. ``est`` is returned unchanged.

    Start: :math:`\theta_0 = \omega_0\sum_j\hat a_j`. If ``init_aux`` is given ``a_hat`` (â of a
    first minibatch, as in SPEC §9) the scale is set there; otherwise it is set inside the first
    ``one_step`` from that step's â (aux ``"started"``, a per-chain bool of shape [K]).

    Parameters
    ----------
    stepsize : float, callable or dict
        h, or a schedule ``h(t)``, or a dict of those by parameter name (see
        :func:`resolve_stepsize`).
    """

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SCIR",
        argument_types={"alpha": "PerParameter"},
        setup_doc=r"""Set up SCIR, the stochastic Cox–Ingersoll–Ross sampler (thesis §5.3, Algorithm 3).

    Each θⱼ moves by the exact CIR transition over time h (eq. 5.3.2 with â, eq. 5.3.3):
    θ' = (1 − e^(−h))/2 · W, W ~ χ²(2â, 2θe^(−h)/(1 − e^(−h))), drawn as
    θ' = (1 − e^(−h)) · Gamma(â + P, 1), P ~ Poisson(θe^(−h)/(1 − e^(−h))) — no discretisation error;
    the only error is the minibatch's (Corollary 5.4.2: E[θ̂_M] is the exact process's mean, the
    variance grows by (1 − e^(−2Mh))(1 − e^(−h))/(1 + e^(−h)) Var[â]). The gamma draw is made in log
    space, so tiny components are right down to small α; in float32 values of ω below 1.2e-38 may
    round to 0 (use ``dtype=tf.float64`` when they matter).
    """,
    )

    stepsize: Stepsize

    def init_aux(self, params: Params, rng: Any = None, a_hat: Params | None = None) -> dict:
        if a_hat is None:
            log_theta = {k: tf.math.log(v) for k, v in params.items()}
        else:
            log_theta = {k: log_simplex_start(v, a_hat[k]) for k, v in params.items()}
        return {"log_theta": log_theta, "started": _chain_flag(params, a_hat is not None)}

    def one_step(self, params: Params, aux: dict, estimate: Callable, rng: Any, t: Any):
        est = estimate(params)
        a_hat = _a_hat_of(est)
        names = sorted(params)
        seeds = tf.random.experimental.stateless_split(tf.cast(rng.seed(), tf.int64), num=len(names))
        new_params, new_log_theta = {}, {}
        for i, k in enumerate(names):
            omega = params[k]
            log_theta = tf.where(
                _started_mask(aux["started"], omega), aux["log_theta"][k], log_simplex_start(omega, a_hat[k])
            )
            h = resolve_stepsize(self.stepsize, k, t, omega.dtype)
            new_log_theta[k] = cir_exact_log_step(log_theta, a_hat[k], h, seeds[i])
            new_params[k] = log_to_simplex(new_log_theta[k])
        return new_params, {"log_theta": new_log_theta, "started": tf.ones_like(aux["started"])}, est


@dataclass(frozen=True)
class SGRLD(_SimplexDynamics):
    r"""SGRLD kernel, expanded-mean parametrisation (Patterson & Teh 2013), the thesis' baseline.

    Same parameters, estimator contract and start as :class:`SCIR`; carries θ (aux
    ``"theta"``) and moves it by :func:`sgrld_step` with ``rng.normal`` noise, then returns
    :math:`\omega = \theta/\sum_j\theta_j`.
    """

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="SGRLD",
        argument_types={"alpha": "PerParameter"},
        setup_doc=r"""Set up SGRLD with the expanded-mean parametrisation (Patterson & Teh 2013; thesis
    §5.2.2), the baseline SCIR is compared with: the Euler–Maruyama step of the same CIR diffusion
    (5.3.1), mirrored at 0,

    θ' = |θ + h(â − θ) + √(2hθ) ξ|, ξ ~ N(0, 1),

    which has a discretisation error: for sparse posteriors (components near 0) it is badly biased
    unless h is small (thesis §5.2.3, Fig. 5.2.1).
    """,
    )

    stepsize: Stepsize

    def init_aux(self, params: Params, rng: Any = None, a_hat: Params | None = None) -> dict:
        if a_hat is None:
            theta = {k: tf.identity(v) for k, v in params.items()}
        else:
            theta = {k: simplex_start(v, a_hat[k]) for k, v in params.items()}
        return {"theta": theta, "started": _chain_flag(params, a_hat is not None)}

    def one_step(self, params: Params, aux: dict, estimate: Callable, rng: Any, t: Any):
        est = estimate(params)
        a_hat = _a_hat_of(est)
        noise = rng.normal(params)
        new_params, new_theta = {}, {}
        for k in sorted(params):
            omega = params[k]
            theta = tf.where(_started_mask(aux["started"], omega), aux["theta"][k], simplex_start(omega, a_hat[k]))
            h = resolve_stepsize(self.stepsize, k, t, omega.dtype)
            new_theta[k] = sgrld_step(theta, a_hat[k], h, noise[k])
            new_params[k] = to_simplex(new_theta[k])
        return new_params, {"theta": new_theta, "started": tf.ones_like(aux["started"])}, est
