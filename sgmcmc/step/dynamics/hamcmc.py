r"""Hessian-approximated MCMC, HAMCMC (Şimşekli et al. 2016, seed 001; SPEC §8).

The quasi-Newton algebra works on one flat vector per chain (all parameters concatenated in the
dict's order), ``[K, D]``. With memory M ≥ 2, iteration t moves the sample M iterations back:

.. math::
    \theta_t = \theta_{t-M} + \tfrac{\epsilon}{2} H_t\, g_{\Omega_t}(\theta_{t-M})
               + \sqrt{\epsilon}\, S_t z_t, \qquad z_t \sim N(0, I),

(Eq. 10 and Algorithm 1 in SPEC §3's convention: their ε is our ε/2, ∇U = −g), where
:math:`H_t = S_t S_t^\top` is the L-BFGS inverse-Hessian approximation built from the M − 1 pairs
:math:`s_\tau = \theta_\tau - \theta_{\tau-M}`,
:math:`y_\tau = g_{\Omega_\tau}(\theta_{\tau-M}) - g_{\Omega_\tau}(\theta_\tau) + \lambda s_\tau`,
τ = t − M + 1, …, t − 1. These involve :math:`\theta_{t-2M+1:t-1}` but not
:math:`\theta_{t-M}`, the point being moved, so H_t does not depend on it and the correction term
Γ (Eq. 9, read Γᵢ = Σⱼ ∂Hᵢⱼ/∂θⱼ) is 0. Both gradients of a pair are taken on the *same*
minibatch Ω_τ — the one the drift of iteration τ used — through the estimator's
``on_one_batch`` (2 gradient evaluations per iteration, as in the paper).

* ``H_t g``: the L-BFGS two-loop recursion over all M − 1 pairs, oldest to newest (Eq. 6's
  indexing drops one pair; seeds' errata), initial matrix γI with γ = sᵀy/yᵀy of the newest pair.
* ``S_t z``: the product-form square root of Eq. 11 with the corrected
  :math:`q = \sqrt{s^\top y / s^\top B s}\, B s + y` (printed with −y), so that
  :math:`S_t S_t^\top` equals the two-loop's H_t exactly (tests/reference_preconditioned.py
  checks it); :math:`B s` comes from the direct BFGS recursion, O(M²D).
* Damping λ (``damping``): y ← y + λs, i.e. L-BFGS approximates (∇²U + λI)⁻¹ (§3.2).
* Safeguard (not in the paper): a pair with sᵀy ≤ 10⁻⁸‖s‖‖y‖ (possible on a non-convex
  minibatch loss when λ is too small) is skipped, so H stays positive definite; γ then comes
  from the newest pair kept, or is 1 if none is.
* Warm-up: Algorithm 1 needs θ₀, …, θ_2M. The first 2M iterations are plain SGLD steps
  (H = I) of the same interleaved form θ_t = θ_{t−M} + ε/2 g + N(0, ε), θ_{t−M} = θ₀ for t ≤ M,
  so the pairs are defined the same way throughout. Their stepsize is ``warmup_stepsize``
  (default: ``stepsize``): HAMCMC's own ε is on the scale of the *standardised* problem
  (ε/2·HA ≈ ε/2·I on a Gaussian with precision A), while an SGLD step must be below
  ~2/λ_max(A), so on an ill-conditioned posterior the warm-up needs a much smaller stepsize
  (not in the paper, whose Algorithm 1 takes θ₀..θ_2M as given).
* A per-parameter stepsize dict gives the preconditioner E^½ H E^½ (E the diagonal of
  per-coordinate stepsizes): drift ½E^½HE^½g, noise E^½Sz — a fixed symmetric positive definite
  preconditioner, so Γ stays 0; for one stepsize it is εH.
* Outside XLA (graph mode: the SAGA estimator, SVRG over entries TensorFlow cannot read in place,
  ``SGMCMC_XLA=0``) the L-BFGS products H g and S z still run as one XLA-compiled function
  (:func:`_lbfgs_products`, a pure function of the pairs): in graph mode their O(M) small ops
  per loop cost ~7 ms per iteration at D = 26, M = 27 (the executor's per-op overhead, not the
  arithmetic), compiled ~0.8 ms. The same algebra; the chains differ from the all-graph ones
  in the last bits (1e-16 relative in float64 after 12 iterations, tests/chain_fingerprints.py).
  Under XLA the products are part of the iteration's program, as before (the same bits).
* The estimate the kernel returns (stored as the gradient at the previous sample) is the one at
  θ_{t−1} made by the previous iteration on its minibatch (kept in aux), at the first iteration
  the one at θ₀.

Aux state: the last M samples, the M − 1 pairs, the last estimate and an iteration count.

**Memory** (``memory=None``, the default: :func:`default_memory`, M = min(D + 1, 50), D the number
of parameters; issue 22.3). On a Gaussian, D linearly independent pairs determine the Hessian, so
with M − 1 ≥ D pairs H_t can equal A⁻¹ and ε is on the standardised scale in *every* direction;
with fewer, the directions the pairs do not span get γI, γ ~ the inverse curvature along the newest
pair, and a correlated posterior is then sampled at wrong scales (the old default M = 5 left worst
mean errors of 2.4 sd on a correlated d = 26 regression where M = 27 gave 0.12; issue 22: > 2 sds
on the 26-parameter posterior). Cost of M, per chain: memory (2M − 1)·D numbers; time O(M·D) for
H g and O(M²·D) for S z per iteration (at D = 26, M = 27: 3.4 s for compilation and 10,000
iterations on 2 cores); and mixing: iteration t moves the sample of t − M, so the chain is M
interleaved chains and the warm-up (2M iterations) and burn-in grow with M (each of the M
interleaved chains needs its own). The cap 50 keeps the O(M²·D) term and the M-fold burn-in
bounded where D is large (there L-BFGS with 49 pairs is a partial preconditioner, as in the paper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from typing import Any, ClassVar, Mapping

from ... import checks
from ...graph_options import package_call_options
from ..contract import Estimate, Estimator, Params, stepsize_at
from .base import Arrays, Dynamics, KernelContext, Operator, PublicFunctions

_CURVATURE_TOL = 1e-8

#: The largest automatic memory (``memory=None``): module docstring.
MEMORY_CAP = 50


def default_memory(dim: int) -> int:
    """The automatic memory for ``dim`` parameters: min(dim + 1, :data:`MEMORY_CAP`), at least 2
    (module docstring: memory)."""
    return max(2, min(int(dim) + 1, MEMORY_CAP))


def flatten(params: Params) -> tf.Tensor:
    """``{name: [K, *shape]}`` -> ``[K, D]``, names in the dict's order."""
    return tf.concat([tf.reshape(p, [tf.shape(p)[0], -1]) for p in params.values()], axis=1)


def unflatten(flat: tf.Tensor, like: Params) -> Params:
    """The inverse of :func:`flatten`, shapes taken from ``like``."""
    sizes = [int(p.shape[1:].num_elements()) for p in like.values()]
    parts = tf.split(flat, sizes, axis=1)
    return {k: tf.reshape(x, tf.shape(p)) for (k, p), x in zip(like.items(), parts)}


def _dot(a, b):
    return tf.reduce_sum(a * b, axis=-1, keepdims=True)


def lbfgs_pairs(s: tf.Tensor, y: tf.Tensor):
    """Per pair (``s``, ``y`` ``[K, P, D]``, oldest first): ``rho`` = 1/sᵀy (0 for a skipped pair),
    ``valid`` and the initial scale γ ``[K, 1]`` of the newest valid pair (1 if none)."""
    sy = tf.reduce_sum(s * y, axis=-1)  # [K, P]
    norms = tf.norm(s, axis=-1) * tf.norm(y, axis=-1)
    valid = sy > _CURVATURE_TOL * norms
    safe_sy = tf.where(valid, sy, tf.ones_like(sy))
    rho = tf.where(valid, 1.0 / safe_sy, tf.zeros_like(sy))
    yy = tf.reduce_sum(y * y, axis=-1)
    gammas = tf.where(valid, safe_sy / tf.where(valid, yy, tf.ones_like(yy)), tf.ones_like(sy))
    n_pairs = s.shape[1]
    # newest valid pair: the largest index with valid = True
    idx = tf.range(n_pairs)[None, :]
    newest = tf.reduce_max(tf.where(valid, idx, -tf.ones_like(idx)), axis=1)  # [K]
    gamma = tf.where(
        newest >= 0, tf.gather(gammas, tf.maximum(newest, 0), axis=1, batch_dims=1), tf.ones_like(gammas[:, 0])
    )
    return rho, valid, gamma[:, None]


def _pair(x: tf.Tensor, i: tf.Tensor) -> tf.Tensor:
    """Pair ``i`` (a scalar tensor) of ``x`` ``[K, P, ...]``: ``[K, ...]``."""
    return tf.gather(x, i, axis=1)


def _put(x: tf.Tensor, i: tf.Tensor, value: tf.Tensor) -> tf.Tensor:
    """``x`` ``[K, P, ...]`` with pair ``i`` replaced by ``value`` ``[K, ...]`` (exact: a select)."""
    at = tf.reshape(tf.equal(tf.range(tf.shape(x)[1]), tf.cast(i, tf.int32)), [1, -1] + [1] * (x.shape.rank - 2))
    return tf.where(at, tf.expand_dims(value, 1), x)


def _in_xla() -> bool:
    """Whether the graph being built is compiled by XLA (a ``jit_compile=True`` function or
    inside one); eagerly, False."""
    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _over_pairs(n_pairs: int, body, state: tuple, reverse: bool = False) -> tuple:
    """``state = body(i, *state)`` for i = 0 … n_pairs − 1 (or back), as a ``tf.while_loop``: the
    graph does not grow with the memory (Python loops unrolled O(M²) ops for the square root,
    and XLA's compile time with them: 100 s at M = 27 against 11 s at M = 13)."""
    i0 = tf.constant(n_pairs - 1 if reverse else 0, tf.int32)
    step = -1 if reverse else 1

    def cond(i, *_):
        return i >= 0 if reverse else i < n_pairs

    def advance(i, *rest):
        return (i + step, *body(i, *rest))

    return tf.while_loop(cond, advance, (i0, *state))[1:]


def two_loop(g: tf.Tensor, s: tf.Tensor, y: tf.Tensor, rho: tf.Tensor, gamma: tf.Tensor) -> tf.Tensor:
    """H g by the L-BFGS two-loop recursion (Nocedal & Wright 2006, Alg. 7.4), ``[K, D]``."""
    n_pairs = s.shape[1]

    def back(i, q, alphas):
        a = _pair(rho, i)[:, None] * _dot(_pair(s, i), q)
        return q - a * _pair(y, i), _put(alphas, i, a[:, 0])

    q, alphas = _over_pairs(n_pairs, back, (g, tf.zeros_like(rho)), reverse=True)

    def forward(i, r):
        beta = _pair(rho, i)[:, None] * _dot(_pair(y, i), r)
        return (r + _pair(s, i) * (_pair(alphas, i)[:, None] - beta),)

    return _over_pairs(n_pairs, forward, (gamma * q,))[0]


def sqrt_apply(z: tf.Tensor, s: tf.Tensor, y: tf.Tensor, rho: tf.Tensor, valid: tf.Tensor, gamma: tf.Tensor) -> tf.Tensor:
    """S z with S Sᵀ = H (Eq. 11, corrected q; skipped pairs are identity factors), ``[K, D]``."""
    n_pairs = s.shape[1]
    pairs = tf.range(n_pairs)

    def build(i, b_vecs, b_s):
        # B^{i} s_i = s_i/γ − Σ_{j<i} b_j (b_jᵀs_i)/(s_jᵀb_j) + y_j ρ_j (y_jᵀs_i): b_j = 0 for j >= i
        # (not yet written) and for skipped pairs (whose ρ_j is 0 too).
        x = _pair(s, i)
        before = tf.cast(pairs < tf.cast(i, pairs.dtype), x.dtype)[None, :]
        bx = tf.einsum("kpd,kd->kp", b_vecs, x) / b_s
        yx = tf.einsum("kpd,kd->kp", y, x) * rho * before
        b = x / gamma - tf.einsum("kp,kpd->kd", bx, b_vecs) + tf.einsum("kp,kpd->kd", yx, y)
        sbs = _dot(x, b)
        ok = _pair(valid, i)[:, None]
        return _put(b_vecs, i, tf.where(ok, b, tf.zeros_like(b))), _put(b_s, i, tf.where(ok, sbs, tf.ones_like(sbs))[:, 0])

    b_vecs, b_s = _over_pairs(n_pairs, build, (tf.zeros_like(s), tf.ones_like(rho)))

    def factor(i, w):
        r, invalid = _pair(rho, i)[:, None], tf.cast(~_pair(valid, i)[:, None], z.dtype)
        q = tf.sqrt(tf.maximum(1.0 / (r * _pair(b_s, i)[:, None] + invalid), 0.0)) * _pair(b_vecs, i) + _pair(y, i)
        return (w - r * _pair(s, i) * _dot(q, w),)

    return _over_pairs(n_pairs, factor, (tf.sqrt(gamma) * z,))[0]


def _lbfgs_products(g: tf.Tensor, z: tf.Tensor, s: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(H g, S z) for the pairs ``s``, ``y`` ``[K, M − 1, D]``: :func:`two_loop` and :func:`sqrt_apply`.
    Outside XLA the iteration calls :data:`_lbfgs_products_xla` (module docstring), one function
    for the process, so samplers of the same shapes (the tuner's candidates) share its compilation."""
    rho, valid, gamma = lbfgs_pairs(s, y)
    return two_loop(g, s, y, rho, gamma), sqrt_apply(z, s, y, rho, valid, gamma)


_lbfgs_products_xla = tf.function(_lbfgs_products, jit_compile=True)

#: :func:`two_loop` as one graph-mode call, for operators applied from Python (the tuner's
#: power iterations on εHA): eagerly each of its ~10·M small ops is dispatched on its own
#: (~0.1–0.3 s a product at M = 6–27), as one graph ~2–3 ms; graph mode runs the eager kernels
#: (float64: the same bits as eagerly, checked at d = 5 and 26).
_two_loop_graph = tf.function(two_loop, autograph=False)


@dataclass(frozen=True)
class HAMCMC(Dynamics):
    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="HAMCMC",
        argument_types={"memory": "int | None", "damping": "float", "warmup_stepsize": "PerParameter | None"},
        parameter_docs={
            "memory": """    memory : int or None
        M >= 2: the last M samples are kept, giving the M − 1 pairs of the L-BFGS matrix (None,
        the default: min(d + 1, 50) for d parameters; how to choose: :func:`hamcmc_setup`).
""",
            "damping": """    damping : float
        λ >= 0, added to each pair's curvature (y ← y + λs): the L-BFGS matrix then approximates
        (∇²U + λI)⁻¹.
""",
            "warmup_stepsize": """    warmup_stepsize : float or dict, optional
        The stepsize of the first 2M iterations, SGLD steps (None, the default: ``stepsize``).
""",
        },
        setup_doc=r"""Set up Hessian-approximated MCMC (Şimşekli et al. 2016, Eq. 10, Algorithm 1; SPEC §8),
    on all parameters flattened into one vector per chain. With M = ``memory`` >= 2:
    :math:`\theta_t = \theta_{t-M} + \frac{\epsilon}{2} H_t g_{\Omega_t}(\theta_{t-M}) + \sqrt\epsilon S_t z`,
    :math:`H_t = S_t S_t^\top` the L-BFGS inverse Hessian (two-loop recursion) from all M − 1
    pairs :math:`s_\tau = \theta_\tau - \theta_{\tau-M}`,
    :math:`y_\tau = g_{\Omega_\tau}(\theta_{\tau-M}) - g_{\Omega_\tau}(\theta_\tau) + \lambda s_\tau`
    (τ = t−M+1..t−1, both gradients on the same minibatch: 2 gradient evaluations per
    iteration), so H_t never involves θ_{t−M} and Γ = 0 (Eq. 9); initial scale γ = sᵀy/yᵀy of
    the newest pair; λ = ``damping`` (§3.2: L-BFGS then approximates (∇²U + λI)⁻¹); S_t z by
    the square-root recursion of Eq. 11 with the seeds' erratum (q = √(sᵀy/sᵀBs)·Bs + y).
    The first 2M iterations are SGLD steps θ_t = θ_{t−M} + ε/2 g + N(0, ε) (θ_{t−M} = θ₀ for
    t ≤ M) providing Algorithm 1's θ₀..θ_2M, at ``warmup_stepsize`` (default ``stepsize``; not in
    the paper): HAMCMC's ε is on the standardised scale (ε/2·HA ≈ ε/2·I for a Gaussian of
    precision A, ε ≈ 0.1–1), whereas SGLD needs ε < 2/λ_max(A). Deviations: Eq. 6's indexing (which drops one
    pair) is not followed; a pair with sᵀy ≤ 1e-8‖s‖‖y‖ is skipped to keep H positive definite
    (not in the paper); a stepsize dict gives the preconditioner E^½HE^½ (E the per-coordinate
    stepsizes); the estimate stored with a kept sample is the one the next iteration's
    predecessor made at it on its own minibatch. Other arguments as :func:`sgld_setup`.

    Choosing (issue 22.3; :mod:`sgmcmc.step.dynamics.hamcmc`): ``memory=None`` (default) is
    min(d + 1, 50) for d parameters: d pairs can hold the whole inverse Hessian of a correlated
    posterior (memory 5 left mean errors of 2.4 sd on a correlated d = 26 regression, d + 1 gave
    0.12); its cost per chain is (2M − 1)·d stored numbers, O(M²·d) work per iteration and an
    M-fold burn-in (the chain is M interleaved chains). Give a smaller ``memory`` for large d or
    short runs. ``damping`` (λ ≥ 0): 0 on a log-concave posterior; on a non-convex one, or when
    pairs are skipped (sᵀy ≤ 0 on noisy minibatches), a λ of about the smallest curvature that
    matters keeps H bounded by 1/λ. ``estimator``: HAMCMC's ε is on the standardised scale in
    every direction, so the minibatch noise inflates every direction's variance, by
    (1 + ε(N/n − 1)/4)/(1 − ε/4) or more (ε = 0.15, N/n = 20: predicted sd ×1.33, measured
    ×1.45–1.66 on a d = 5 regression; ×1.03–1.10 with ``estimator="svrg"`` or N/n = 2): use ``"svrg"`` (or ``"cv"``) unless N/n is small.
    ``stepsize`` 0.1–0.5 (:func:`sgmcmc.tune_stepsize` tunes it on this scale) and a
    ``warmup_stepsize`` below the SGLD limit ~0.7/λ_max (:func:`sgmcmc.check_stepsize`).
    """,
    )

    stepsize: dict
    memory: int | None = None  # None: default_memory(D), resolved from the parameters' shapes
    damping: float = 0.0
    warmup_stepsize: dict | None = None
    hyperparameters: ClassVar[tuple[str, ...]] = ("stepsize", "memory", "damping", "warmup_stepsize")
    stepsize_stability: ClassVar[str | None] = "sgld"  # with the stepsize times the L-BFGS matrix
    preconditioned: ClassVar[bool] = True
    #: The L-BFGS inverse Hessian of log p / T is T times that of log p by itself; the warm-up's
    #: SGLD steps are scaled as SGLD's.
    temperature_powers: ClassVar[dict[str, float]] = {"warmup_stepsize": 1.0}
    curvature_scale: ClassVar[str] = "stepsize × L-BFGS matrix"
    #: One L-BFGS matrix gives a noisy μ (module docstring of :mod:`sgmcmc.tuning.stepsize_search`).
    preconditioner_snapshots: ClassVar[int] = 5
    defaults: ClassVar[dict[str, Any]] = {"memory": None, "damping": 0.0, "warmup_stepsize": None}
    standardised_stepsize: ClassVar[bool] = True
    plain_cap_hyperparameter: ClassVar[str | None] = "warmup_stepsize"

    @property
    def gradient_evaluations(self) -> int:
        """Two points on each minibatch (the pair's gradients)."""
        return 2

    def preconditioner_renewal(self, kernel_state: Mapping[str, Any]) -> int:
        """M, the memory in use: after M iterations every pair is renewed."""
        return int(kernel_state["thetas"].shape[1])

    def scaled_curvature_operators(
        self, hess: Operator, like: Arrays, kernel_state: Mapping[str, Any], eps: float
    ) -> list[tuple[Operator, Arrays | None]]:
        """Per chain, x ↦ εH(Ax) with H the L-BFGS matrix of its pairs (HA is similar to the
        symmetric A^½HA^½: real, positive eigenvalues); the minibatch noise is not modelled."""
        names = list(like)
        sizes = [like[k].size for k in names]
        pairs = kernel_state["s"], kernel_state["y"]

        def chain_operator(c: int) -> Operator:
            s, y = (x[c : c + 1] for x in pairs)  # [1, M − 1, D]
            rho, _, gamma = lbfgs_pairs(s, y)

            def op(x: Arrays) -> Arrays:
                ax = hess(x)
                flat = np.concatenate([np.reshape(ax[k], -1) for k in names])[None, :]
                with package_call_options():
                    h = eps * _two_loop_graph(tf.constant(flat, s.dtype), s, y, rho, gamma).numpy()[0]
                parts = np.split(h, np.cumsum(sizes)[:-1])
                return {k: part.reshape(np.shape(like[k])) for k, part in zip(names, parts)}

            return op

        return [(chain_operator(c), None) for c in range(int(pairs[0].shape[0]))]

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "HAMCMC":
        warm = arguments["warmup_stepsize"]
        return cls(
            checks.per_parameter(arguments["stepsize"], context.names, "stepsize", schedules=True),
            None if arguments["memory"] is None else checks.check_count(arguments["memory"], "memory"),
            checks.check_nonnegative(arguments["damping"], "damping"),
            None if warm is None else checks.per_parameter(warm, context.names, "warmup_stepsize"),
        )

    def __post_init__(self):
        if self.memory is not None and self.memory < 2:
            raise ValueError(f"memory must be >= 2 for hamcmc (Şimşekli et al. 2016, §3.2), got memory={self.memory}")

    def init_aux(self, params: Params, rng) -> dict:
        x = flatten(params)
        k, d = tf.shape(x)[0], x.shape[1]
        m = default_memory(d) if self.memory is None else self.memory
        zeros_pairs = tf.zeros([k, m - 1, d], x.dtype)
        return {
            "thetas": tf.tile(x[:, None, :], [1, m, 1]),
            "s": zeros_pairs,
            "y": zeros_pairs,
            "last_log_post": tf.zeros([k], x.dtype),
            "last_grad": tf.zeros_like(x),
            "count": tf.zeros([k], tf.int64),
        }

    def _sqrt_eps(self, stepsize: dict, params: Params, t, dtype) -> tf.Tensor:
        parts = [
            tf.fill([int(p.shape[1:].num_elements())], tf.sqrt(tf.cast(stepsize_at(stepsize[k], t, dtype), dtype)))
            for k, p in params.items()
        ]
        return tf.concat(parts, axis=0)[None, :]

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        on_batch = estimate.on_one_batch()  # one minibatch for both evaluations
        thetas, s, y = aux["thetas"], aux["s"], aux["y"]
        dtype = thetas.dtype
        base = thetas[:, 0]
        est_base = on_batch(unflatten(base, params))
        g = flatten(est_base.grads)
        z = flatten(rng.normal(params))
        root_eps = self._sqrt_eps(self.stepsize, params, t, dtype)
        root_warm = self._sqrt_eps(self.warmup_stepsize or self.stepsize, params, t, dtype)
        h_g, s_z = (_lbfgs_products if _in_xla() else _lbfgs_products_xla)(root_eps * g, z, s, y)
        precond_g = root_eps * h_g
        precond_z = root_eps * s_z
        warm = (aux["count"] < 2 * thetas.shape[1])[:, None]  # 2M: M = the memory in use
        drift = tf.where(warm, root_warm * root_warm * g, precond_g)
        noise = tf.where(warm, root_warm * z, precond_z)
        new = base + 0.5 * drift + noise
        new_params = unflatten(new, params)
        est_new = on_batch(new_params)
        s_new = new - base
        y_new = g - flatten(est_new.grads) + self.damping * s_new
        first = aux["count"] == 0
        returned = Estimate(
            tf.where(first, est_base.log_post, aux["last_log_post"]),
            unflatten(tf.where(first[:, None], g, aux["last_grad"]), params),
        )
        new_aux = {
            "thetas": tf.concat([thetas[:, 1:], new[:, None]], axis=1),
            "s": tf.concat([s[:, 1:], s_new[:, None]], axis=1),
            "y": tf.concat([y[:, 1:], y_new[:, None]], axis=1),
            "last_log_post": est_new.log_post,
            "last_grad": flatten(est_new.grads),
            "count": aux["count"] + 1,
        }
        return new_params, new_aux, returned
