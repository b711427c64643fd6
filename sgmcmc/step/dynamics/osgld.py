r"""Optimal preconditioned SGLD for near-Gaussian posteriors, OSGLD (El hanchi 2018 §2.3, the
"OSGFS" of its Algorithm 1; El hanchi 2019; SPEC §8).

All parameters are flattened into one vector per chain, ``[K, d]`` (as in HAMCMC). With g the
plain minibatch estimate of SPEC §3 (prior + N/n · minibatch sum; Eq. 3) each iteration is

.. math::
    \Delta\theta = D g + N\big(0,\ [2D - f\,\tfrac{N^2}{n} D C D - D H D]_+\big)   \quad\text{(Eq. 8)}

    D = \tfrac{k}{2} H^{-1},\qquad H = N C + G   \quad\text{(Eqs. 9, 10)}

    k = \min\{c,\ 4\max\{\tfrac{n}{N+n}, \tfrac{r}{r + N/n}\}\},\qquad
    r = \frac{\lambda_{\min}(H^{-1})}{\lambda_{\max}(H^{-1} N C H^{-1})}   \quad\text{(Eqs. 15, 16)}

no stepsize. ``[·]_+`` is the projection onto the positive semi-definite cone (eigenvalues
clipped at 0): C is estimated, so the bracket need not be PSD even where Eq. 13 says it is.

Choices and deviations (each also in the public docstring):

* **C**, the per-row gradient covariance :math:`\mathrm{Var}_i[\nabla\log p(x_i|\theta)]`: each
  iteration takes the sample covariance (denominator n − 1) of the minibatch's n per-row
  log-likelihood gradients, centred on their own mean, and averages it with weight
  :math:`w_t = \max(1/t, 1/W)`, :math:`W = \max(100, \lceil 50p/(n-1)\rceil)` (:func:`c_memory`;
  p = d dense, 1 diagonal): the paper's cumulative average (Algorithm 1, line 7) for the first W
  iterations, then an exponential moving average of time constant W, which rests on about
  2W(n − 1) ≥ 100p rows' degrees of freedom. Reason: C(θ) far from the mode (a dispersed start)
  can be many times C near it (for a linear regression the residual variance grows by
  (θ − θ̂)ᵀΣₓ(θ − θ̂)), and a cumulative average carries the burn-in's C for long (measured on the
  numpy reference, rotated test model from 20 sd: Eq. 17 first held after ~2,400 iterations with
  a 1/t average over 1,000 iterations, ~1,440 with W = 100; the stationary moments were the same). Within-minibatch centring (rather than averaging first and
  second moments across iterations) keeps the drift of the mean gradient along the chain out of C.
* **f** = 1 − n/N, the finite-population factor: SPEC §3 draws the n rows *without*
  replacement, so the minibatch sum's covariance is n(1 − n/N)·S² (S² the row covariance with
  denominator N − 1, which the n − 1 sample covariance estimates without bias). The paper's Eq. 4
  assumes independent draws (f = 1); with f the correction is exact, and n = N gives no
  correction (exact gradients).
* **G** = −∇² log p(θ) (paper line 139: the prior's *negative* Hessian, positive definite for a
  Gaussian prior: N(0, τ²I) gives G = I/τ²), by automatic differentiation at the current θ every
  iteration, of the log prior the sampler uses (with constraints: including the log-det-Jacobian).
  ``log_prior=None`` gives G = 0.
* **H** is symmetrised and its eigenvalues are floored at λ_max(H)·d·ε_dtype (and the dtype's
  tiniest normal number), so H⁻¹ exists when C is rank deficient or a non-log-concave prior
  makes N C + G indefinite.
* **Dense or diagonal.** For d ≤ :data:`DENSE_MAX_DIM` = 100 the matrices are dense: per
  iteration an eigendecomposition of H, one of the noise covariance (in H's eigenbasis) and the
  eigenvalues of H⁻¹NCH⁻¹ (about 1.5 ms at d = 100 and 6.5 ms at d = 200 on a 2-core CPU, against
  ~60 µs for an SGLD iteration). Above it the *diagonal form*: C is replaced by its diagonal
  (the per-coordinate variance of the per-row gradients, averaged as above) and G by its diagonal,
  so H, D and the noise covariance are diagonal and every formula holds per coordinate; the
  diagonal of G is a one-probe Hutchinson estimate v ⊙ (∇²(−log p) v), v Rademacher — exact for
  a prior whose Hessian is diagonal (independent coordinates, the usual case), unbiased otherwise.
  The diagonal form is exact when the posterior's axes are the coordinate axes; on correlated
  posteriors it is a diagonal preconditioner, still with the right stationary distribution to
  first order in k but without the optimal mixing.
* **Warm-up**: the first iterations only estimate C (θ does not move) until it rests on at least
  4·d rows' degrees of freedom (t·(n − 1) ≥ 4d; 4 for the diagonal form), so that H is not
  singular; with n − 1 ≥ 4d there is none. n ≥ 2 is required.
* **Burn-in criterion** (Eq. 17 reworked so that its error rates do not depend on d), only when
  the kernel is made with ``detect_burn_in``. Eq. 17 (with the seeds' erratum: C in its last
  term) asks every component of the window mean :math:`\bar Y = \frac1w\sum_i Y_i` of the last
  w = ⌈1/k⌉ estimates to satisfy :math:`|\bar Y_j| \le b\,\sqrt{\mathrm{diag}[\tfrac1w(NC + G) + f\tfrac{N^2}{wn}C]_j}`,
  b = 1. Two things make it fail at large d (issue 22: d = 26 never held within 10^4 iterations,
  even from the mode): the d components must all pass at once, so at stationarity it holds with
  probability ≈ p^d (p per component); and its variance omits the chain's own autocorrelation
  (the (1/w)H term assumes independent θ_i over the window, but the window is half a
  correlation time long), so p is well below 0.68. The test used here:

  1. *The window mean's own sampling covariance.* On a Gaussian posterior with precision H (the
     model the kernel assumes), in whitened coordinates :math:`u = H^{1/2}(\theta - \theta^*)`,
     :math:`y = H^{-1/2}Y = -u + e`, the estimate's noise e with covariance
     :math:`V_w = f\tfrac{N^2}{n}H^{-1/2}CH^{-1/2}`; the update is
     :math:`u' = \rho u + \tfrac k2 e + \eta` with ρ = 1 − k/2, and by Eq. 8
     Var(k e/2 + η) = k − k²/4 = 1 − ρ², so Var u = I, Cov(u_i, u_j) = ρ^{|i−j|}I and
     Cov(u_j, e_i) = ρ^{j−i−1}(k/2)V_w for j > i (e_i is independent of u_j, j ≤ i). Summing,

     .. math:: \mathrm{Var}\,\bar y = aI + bV_w,\quad
               a = \frac{w + 2\sum_{m=1}^{w-1}(w-m)\rho^m}{w^2},\quad
               b = \frac{w - k\sum_{m=1}^{w-1}(w-m)\rho^{m-1}}{w^2}

     (:func:`window_variance_coefficients`; Eq. 17's variance is a = b = 1/w). At k = 0.1,
     w = 10: a = 0.85, b = 0.061 against 0.1 and 0.1.
  2. *Whitened and decorrelated*: z = the components of ȳ in the eigenbasis of V_w (dense form:
     H's eigenbasis, then V_w's; diagonal form: per coordinate), each divided by its sd
     :math:`\sqrt{a + b\nu_j}`, so at stationarity z ~ N(0, I).
  3. *Bounds whose error rates do not depend on d* (:func:`burn_in_bounds`): every component
     :math:`|z_j| \le \Phi^{-1}((1 + q^{1/d})/2)` (Šidák; 1.28 at d = 1, 2.63 at d = 26, 3.06 at
     d = 100) **and** :math:`\sum_j z_j^2 \le \chi^2_d(q)`, q = :data:`BURN_IN_LEVEL` = 0.8 each
     (both together at stationarity: at least 0.6, at every d). The first catches an offset along
     one direction (it must be below about the bound in window-mean sds), the second an offset
     spread over many (the maximum alone lets ‖offset‖ grow like √d).

  and at least w iterations have moved θ (Algorithm 1's i ≥ n). ``aux["ready_at"]`` records the
  first such iteration per chain (0 until then; it never goes back). The last
  ``⌈1/min(c, 4n/(N+n))⌉`` estimates (the largest window k allows) are kept in a ring buffer.
  Calibration (Gaussian linear regressions y ~ N(Xβ, 1), X i.i.d. normal, N = 5,000, n = 500,
  k = 0.1, w = 10, one chain, seeds 0–4; tests/test_osgld.py): from the mode it holds at
  iteration 10 (the first allowed) at d = 2, 10, 26, 100 (the printed Eq. 17: 84 at d = 10, not
  within 2,000 at d = 26, 100); from 20 marginal sds off in every coordinate at 56–61, 97–110,
  156–182, 390–416 iterations, the largest |mean error| of the first 100 kept samples 0.3–1.1,
  0.8–1.2, 0.9–1.9, 1.9–2.3 sds (from the mode: 0.2–0.9, 0.7–1.1, 0.9–1.6, 1.5–1.7) and of 1,000
  kept samples indistinguishable from runs started at the mode. At d = 100 it holds slightly
  early (the first kept state ~16 whitened units from the mode, ~9 for a draw): C's running
  average still remembers the far start's larger C, which shrinks the whitened statistic.
* The returned estimate is g at the state the iteration started from (as every kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import tensorflow as tf

from numbers import Real
from typing import Any, ClassVar, Mapping

from ..contract import Estimate, Estimator, Params, map_over_chains
from .base import Dynamics, KernelContext, PublicFunctions
from .hamcmc import flatten, unflatten

#: Largest dimension (all parameters together) for dense matrices; the diagonal form above.
DENSE_MAX_DIM = 100


def c_memory(p: int, n: int) -> int:
    """W, the time constant (iterations) of the running estimate of C (module docstring)."""
    return max(100, math.ceil(50 * p / (n - 1)))

#: q, the probability that each of the burn-in test's two bounds holds at stationarity (at every
#: d); both together hold with probability at least 2q − 1 = 0.6 (Eq. 17's b = 1 at d = 1 is 0.68).
BURN_IN_LEVEL = 0.8


def choose_k(c: float, n: int, n_rows: int, r: tf.Tensor) -> tf.Tensor:
    """k of Eq. 16 from r of Eq. 15 (``[K]``)."""
    ratio = n_rows / n
    bound = tf.maximum(tf.cast(n / (n_rows + n), r.dtype), r / (r + ratio))
    return tf.minimum(tf.cast(c, r.dtype), 4.0 * bound)


def max_window(c: float, n: int, n_rows: int) -> int:
    """The largest burn-in window ⌈1/k⌉ Eq. 16 allows: k ≥ min(c, 4n/(N + n))."""
    return int(math.ceil(1.0 / min(c, 4.0 * n / (n_rows + n)) * (1 + 1e-9)))


def _unflatten_one(x: tf.Tensor, like: Params) -> Params:
    """``[d]`` -> one chain's dict, shapes from ``like`` (``[K, *shape]``)."""
    sizes = [int(p.shape[1:].num_elements()) for p in like.values()]
    return {k: tf.reshape(part, p.shape[1:]) for (k, p), part in zip(like.items(), tf.split(x, sizes))}


def _floor(lam: tf.Tensor, d: int) -> tf.Tensor:
    """Eigenvalues (last axis) floored relative to the largest: keeps H invertible."""
    dtype = lam.dtype
    eps = _eps(dtype) * d
    top = tf.reduce_max(lam, axis=-1, keepdims=True)
    return tf.maximum(lam, tf.maximum(top * eps, tf.constant(_tiny(dtype), dtype)))


def _eps(dtype: tf.DType) -> float:
    return 2.220446049250313e-16 if dtype == tf.float64 else 1.1920929e-07


def _tiny(dtype: tf.DType) -> float:
    return 2.2250738585072014e-308 if dtype == tf.float64 else 1.1754944e-38


# -- the public functions' documentation (sgmcmc/api/samplers.py is generated from it) ------------
_C = r"""    c : float
        In (0, 1]: the cap on k (Eq. 16; 0.1 "works very well", El hanchi 2018). Larger c, faster
        mixing, larger discretisation error away from Gaussianity.
"""
_ESTIMATOR = r"""    estimator : str, keyword-only
        ``"plain"`` only (accepted for a uniform signature; any other value is refused): the
        noise correction assumes plain minibatch noise.
"""


@dataclass(frozen=True)
class OSGLD(Dynamics):
    """The OSGLD kernel (module docstring). ``c`` in (0, 1]; ``dense``: None chooses by
    :data:`DENSE_MAX_DIM`; ``detect_burn_in`` keeps the Eq. 17 criterion's state in aux."""

    public: ClassVar[PublicFunctions] = PublicFunctions(
        label="OSGLD",
        argument_types={"c": "float"},
        leading=('c',),
        run_doc=r"""Run OSGLD (optimal preconditioned SGLD, El hanchi 2018 §2.3) for ``n_iters`` iterations:
    the update and its deviations from the paper as in :func:`osgld_setup`, then the whole chain
    in compiled chunks. No stepsize; a minibatch needs at least 2 rows; only the plain minibatch
    estimator.
    """,
        run_options={"auto_burn_in": ("bool", "False"), "max_burn_in": ("int | None", "None")},
        run_option_docs=r"""    auto_burn_in : bool, keyword-only
        Find the burn-in with El hanchi's criterion (2018 Eq. 17) reworked so that its error rates
        do not depend on d (derivation in :mod:`sgmcmc.step.dynamics.osgld`): chain k is ready at the
        first iteration t at which, with ȳ the mean of the estimates g of the last w = ⌈1/k⌉
        iterations whitened by H^-½ and at least w iterations having moved θ, the components z of
        ȳ in the eigenbasis of its stationary covariance aI + b f(N²/n) H^-½CH^-½ (a, b from the
        chain's autocorrelation ρ = 1 − k/2 over the window), each scaled to unit variance, satisfy
        max |z_j| ≤ Φ⁻¹((1 + 0.8^{1/d})/2) and Σ z_j² ≤ χ²_d(0.8): at stationarity it holds with
        probability ≥ 0.6 at every d (the printed Eq. 17, every |mean Y_j| within one
        √diag[(N C + G)/w + f N²/(w n) C], held with probability falling exponentially in d: never
        within 10^4 iterations at d = 26, even from the mode). The criterion is
        evaluated in the compiled loop, which stops once it has held (at any iteration, once is
        enough) for every chain; that iteration is ``samples.burn_in_found``, and then
        ``n_iters`` iterations run and are kept (with ``thin``): draws are the states after
        iterations burn_in_found + thin, + 2·thin, …. The chain itself is the one
        :func:`osgld_setup` with the same seed gives step by step. Not with ``burn_in`` nor
        (yet) with ``checkpoint_dir``. ``samples.burn_in_found`` is also on the samples an
        exception carries.
    max_burn_in : int or None, keyword-only
        With ``auto_burn_in``: the most iterations the search may run (None, the default:
        10·``n_iters``); beyond it :class:`sgmcmc.errors.BurnInNotFound` names the chains and
        the fix.
""",
        parameter_docs={"c": _C},
        other_parameter_docs=_ESTIMATOR,
        setup_doc=r"""Set up optimal preconditioned SGLD, OSGLD (El hanchi 2018 §2.3, Algorithm 1 "OSGFS";
    El hanchi 2019; SPEC §8) for near-Gaussian posteriors. No stepsize. All parameters are
    flattened into one vector θ ∈ R^d per chain; with g the plain minibatch estimate of the
    log-posterior gradient (SPEC §3; Eq. 3) each iteration is

    Δθ = D g + N(0, [2D − f (N²/n) D C D − D H D]₊)          (Eq. 8)
    D = (k/2) H⁻¹,  H = N C + G                               (Eqs. 9, 10)
    k = min{c, 4 max{n/(N + n), r/(r + N/n)}},  r = λ_min(H⁻¹)/λ_max(H⁻¹ N C H⁻¹)   (Eqs. 15, 16)

    C: the per-row log-likelihood gradient covariance, estimated from each minibatch (sample
    covariance of its n per-row gradients, n − 1 denominator) and averaged with weight
    max(1/t, 1/W), W = max(100, ⌈50p/(n − 1)⌉) (p = d, or 1 in the diagonal form): Algorithm 1's
    cumulative average for W iterations, then an exponential moving average, so that C(θ) of a
    distant start is forgotten. G = −∇² log p(θ) (the prior's
    negative Hessian; I/τ² for a N(0, τ²I) prior; 0 for ``log_prior=None``) by automatic
    differentiation at the current θ. [·]₊ projects onto the positive semi-definite cone
    (eigenvalues clipped at 0), since C is estimated. H's eigenvalues are floored at
    d·ε_dtype·λ_max(H).

    Deviations from the paper: f = 1 − n/N, the finite-population factor of minibatches drawn
    without replacement (SPEC §3; the paper's Eq. 4 has f = 1, as here with
    ``minibatch_replace=True``); the running average of C
    described above (the paper: a cumulative average); the first iterations only estimate C (θ
    does not move) until t·(n − 1) ≥ 4d (4 in the diagonal form) so that H is invertible;
    ``c`` may be 1 (the paper: c < 1). A minibatch needs at least 2 rows (C is a covariance over
    the minibatch), and only the plain minibatch estimator is supported (the noise correction
    assumes plain minibatch noise).

    Dense d × d matrices for d ≤ 100 (three eigendecompositions per iteration, ~1.5 ms at d = 100);
    above that the diagonal form: C and G are replaced by their diagonals (G's by a one-probe
    Hutchinson estimate, exact for a prior with independent coordinates), so every formula holds
    per coordinate — optimal when the posterior's axes are the coordinate axes, a diagonal
    preconditioner otherwise.
    """,
    )

    c: float = 0.1
    dense: bool | None = None
    detect_burn_in: bool = False
    #: n and N, needed by ``init_aux`` for the burn-in window's buffer (set by the set-up).
    batch_size: int = 0
    n_rows: int = 0
    hyperparameters: ClassVar[tuple[str, ...]] = ("c",)
    #: No stepsize: D = k/2 H⁻¹ is computed from the (tempered) gradients themselves.
    temperature_powers: ClassVar[dict[str, float]] = {}
    defaults: ClassVar[dict[str, Any]] = {"c": 0.1}
    xla: ClassVar[bool] = False  # XLA's eigendecompositions measured 5x slower (docs/DESIGN.md)
    estimators: ClassVar[tuple[str, ...] | None] = ("plain",)
    shard_refusal: ClassVar[str | None] = "OSGLD's gradient covariance needs every row's gradient on one worker"

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], context: KernelContext) -> "OSGLD":
        """``arguments``: ``c`` and ``auto_burn_in`` (default False)."""
        c = arguments["c"]
        if isinstance(c, bool) or not isinstance(c, Real) or not 0 < c <= 1:
            raise ValueError(f"c must be a number in (0, 1] (El hanchi 2018 Eq. 16 suggests 0.1), got {c!r}")
        n = context.batch_size or 0
        if context.n_rows and n < 2:
            raise ValueError(
                f"osgld estimates the gradient covariance from each minibatch's per-row gradients, so a "
                f"minibatch needs at least 2 rows; minibatch_size gives {n} "
                f"of N={context.n_rows}: give e.g. minibatch_size=100"
            )
        if context.estimator not in cls.estimators:
            raise ValueError(
                f"osgld works with the plain estimator only (its noise correction assumes plain minibatch "
                f"noise, El hanchi 2018 Eq. 8), got estimator={context.estimator!r}: leave estimator='plain'"
            )
        return cls(c=float(c), detect_burn_in=bool(arguments.get("auto_burn_in", False)), batch_size=n, n_rows=context.n_rows)

    def _is_dense(self, d: int) -> bool:
        return d <= DENSE_MAX_DIM if self.dense is None else bool(self.dense)

    def init_aux(self, params: Params, rng) -> dict:
        x = flatten(params)
        k, d = x.shape[0], x.shape[1]
        cov_shape = [k, d, d] if self._is_dense(d) else [k, d]
        aux = {"count": tf.zeros([], tf.int64), "C": tf.zeros(cov_shape, x.dtype)}
        if self.detect_burn_in:
            if self.batch_size < 2 or self.n_rows < self.batch_size:
                raise ValueError("internal: OSGLD with detect_burn_in needs batch_size and n_rows")
            aux["ready_at"] = tf.zeros([k], tf.int64)
            aux["window"] = tf.zeros([k, max_window(self.c, self.batch_size, self.n_rows), d], x.dtype)
        return aux

    def ready(self, aux: dict) -> tf.Tensor:
        """``[K]``: Eq. 17 has held for each chain (the chain loop may stop on it)."""
        return aux["ready_at"] > 0

    # -- pieces ------------------------------------------------------------------------------
    def _prior_curvature(self, estimator, x: tf.Tensor, like: Params, dense: bool, rng) -> tf.Tensor:
        """G = −∇² log p(θ) per chain: ``[K, d, d]`` dense, ``[K, d]`` diagonal (Hutchinson)."""
        k, d = x.shape[0], x.shape[1]
        log_prior = estimator.log_prior
        if log_prior is None:
            return tf.zeros([k, d, d] if dense else [k, d], x.dtype)
        zero = tf.UnconnectedGradients.ZERO

        def prior_gradient(xi):
            with tf.GradientTape() as inner:
                inner.watch(xi)
                value = log_prior(_unflatten_one(xi, like))
            return tf.convert_to_tensor(inner.gradient(value, xi, unconnected_gradients=zero))

        if dense:

            def one(xi):
                with tf.GradientTape() as outer:
                    outer.watch(xi)
                    grad = prior_gradient(xi)
                return -outer.jacobian(grad, xi, unconnected_gradients=zero)

            return map_over_chains(one, x, k)
        probe = tf.sign(rng.uniform([d], -1.0, 1.0))

        def one_diag(args):
            xi, v = args
            with tf.GradientTape() as outer:
                outer.watch(xi)
                gv = tf.reduce_sum(prior_gradient(xi) * v)
            return -v * tf.convert_to_tensor(outer.gradient(gv, xi, unconnected_gradients=zero))

        return map_over_chains(one_diag, (x, probe), k)

    def one_step(self, params: Params, aux: dict, estimate: Estimator, rng, t) -> tuple[Params, dict, Estimate]:
        estimator = estimate.estimator
        if not hasattr(estimator, "estimate_and_rows"):
            raise TypeError("osgld needs the plain minibatch estimator (per-row gradients for C); it has no other")
        est, rows = estimate.with_rows(params)
        x = flatten(params)
        g = flatten(est.grads)
        k_chains, d = x.shape[0], x.shape[1]
        n, n_rows = estimator.batch_size, estimator.n_rows
        dtype = x.dtype
        dense = self._is_dense(d)
        big_n = tf.constant(float(n_rows), dtype)
        fpc = 1.0 if getattr(estimator, "replace", False) else 1.0 - n / n_rows  # with replacement: no finite-population factor
        ratio = n_rows / n

        # per-row log-lik gradients [K, n, d], centred on the minibatch mean
        r = tf.concat([tf.reshape(v, [k_chains, n, -1]) for v in rows.values()], axis=2)
        r = r - tf.reduce_mean(r, axis=1, keepdims=True)
        count = aux["count"] + 1
        memory = c_memory(d if dense else 1, n)
        weight = tf.maximum(1.0 / tf.cast(count, dtype), tf.constant(1.0 / memory, dtype))
        if dense:
            batch_cov = tf.linalg.matmul(r, r, transpose_a=True) / (n - 1)
        else:
            batch_cov = tf.reduce_sum(tf.square(r), axis=1) / (n - 1)
        cov = (1.0 - weight) * aux["C"] + weight * batch_cov
        prior = self._prior_curvature(estimator, x, params, dense, rng)
        z = tf.reshape(flatten(rng.normal(params)), [k_chains, d])

        if dense:
            h = big_n * cov + prior
            h = 0.5 * (h + tf.linalg.matrix_transpose(h))
            lam, vec = tf.linalg.eigh(h)
            lam = _floor(lam, d)
            c_eig = tf.linalg.matmul(vec, tf.linalg.matmul(cov, vec), transpose_a=True)  # Vᵀ C V
            m = c_eig / (lam[:, :, None] * lam[:, None, :])  # Λ⁻¹ Vᵀ C V Λ⁻¹ = Vᵀ H⁻¹ C H⁻¹ V
            m = 0.5 * (m + tf.linalg.matrix_transpose(m))
            r_ratio = (1.0 / tf.reduce_max(lam, axis=1)) / (big_n * tf.reduce_max(tf.linalg.eigvalsh(m), axis=1))
            k = choose_k(self.c, n, n_rows, r_ratio)[:, None]  # [K, 1]
            # D = (k/2) V Λ⁻¹ Vᵀ; noise covariance in H's eigenbasis:
            # 2D − f N²/n D C D − D H D = V [(k − k²/4) Λ⁻¹ − f (N²/n)(k²/4) M] Vᵀ
            drift = tf.linalg.matvec(vec, 0.5 * k * tf.linalg.matvec(vec, g, transpose_a=True) / lam)
            kk = k[:, :, None]
            sigma = tf.linalg.diag((k - 0.25 * k * k) / lam) - fpc * ratio * n_rows * 0.25 * kk * kk * m
            sigma = 0.5 * (sigma + tf.linalg.matrix_transpose(sigma))
            mu, u = tf.linalg.eigh(sigma)
            root = tf.sqrt(tf.maximum(mu, 0.0))
            noise = tf.linalg.matvec(vec, tf.linalg.matvec(u, root * z))
            whiten = (vec, lam, c_eig)
            floor_rank = 4 * d
        else:
            lam = _floor(big_n * cov + prior, d)
            r_ratio = (1.0 / tf.reduce_max(lam, axis=1)) / tf.reduce_max(big_n * cov / tf.square(lam), axis=1)
            k = choose_k(self.c, n, n_rows, r_ratio)[:, None]
            drift = 0.5 * k * g / lam
            var = (k - 0.25 * k * k) / lam - fpc * ratio * n_rows * 0.25 * k * k * cov / tf.square(lam)
            noise = tf.sqrt(tf.maximum(var, 0.0)) * z
            whiten = (None, lam, cov)
            floor_rank = 4

        moves = count * (n - 1) >= floor_rank
        new = tf.where(moves, x + drift + noise, x)
        new_aux = {"count": count, "C": cov}
        if self.detect_burn_in:
            new_aux.update(self._burn_in(aux, g, k[:, 0], whiten, count, moves, n, n_rows, fpc, floor_rank))
        return unflatten(new, params), new_aux, est

    def _burn_in(self, aux, g, k, whiten, count, moves, n, n_rows, fpc, floor_rank):
        """The burn-in test (module docstring: Eq. 17 with the window mean's own sampling
        covariance, whitened, Šidák-scaled bound), per chain; the window's estimates in a ring
        buffer."""
        dtype = g.dtype
        buffer = aux["window"]
        w_max = int(buffer.shape[1])
        d = int(g.shape[1])
        slot = tf.math.floormod(count - 1, w_max)
        buffer = tf.tensor_scatter_nd_update(
            tf.transpose(buffer, [1, 0, 2]), [[slot]], g[None]
        )
        buffer = tf.transpose(buffer, [1, 0, 2])
        w = tf.minimum(tf.math.ceil(1.0 / k), float(w_max))  # [K]
        age = tf.cast(tf.math.floormod(count - 1 - tf.range(w_max, dtype=tf.int64), w_max), dtype)  # [w_max]
        inside = tf.cast(age[None, :] < w[:, None], dtype)  # [K, w_max]
        mean = tf.reduce_sum(buffer * inside[:, :, None], axis=1) / w[:, None]
        a, b = window_variance_coefficients(k, w, w_max)  # [K] each
        vec, lam, c_part = whiten
        scale = fpc * float(n_rows) * float(n_rows) / n
        root = tf.sqrt(lam)
        if vec is None:  # diagonal form: coordinates independent
            y = mean / root
            var = a[:, None] + b[:, None] * scale * c_part / lam
        else:  # y = Λ^-½ Vᵀ ḡ; its covariance a I + b V_w, V_w = f N²/n Λ^-½ Vᵀ C V Λ^-½
            y = tf.linalg.matvec(vec, mean, transpose_a=True) / root
            v_w = scale * c_part / (root[:, :, None] * root[:, None, :])
            nu, u = tf.linalg.eigh(0.5 * (v_w + tf.linalg.matrix_transpose(v_w)))
            y = tf.linalg.matvec(u, y, transpose_a=True)
            var = a[:, None] + b[:, None] * tf.maximum(nu, 0.0)
        z = y / tf.sqrt(var)
        bound, total = burn_in_bounds(d)
        holds = (tf.reduce_max(tf.abs(z), axis=1) <= bound) & (tf.reduce_sum(tf.square(z), axis=1) <= total)
        first_move = max(1, -(-floor_rank // (n - 1)))  # the first t with t·(n − 1) ≥ floor_rank
        moved = tf.cast(count - first_move + 1, dtype)  # iterations that moved θ
        holds &= moves & (moved >= w)
        ready_at = tf.where((aux["ready_at"] == 0) & holds, count, aux["ready_at"])
        return {"window": buffer, "ready_at": ready_at}


def burn_in_bounds(d: int, level: float | None = None) -> tuple[float, float]:
    r"""The burn-in test's two bounds for d whitened components z (module docstring), each met
    with probability q = ``level`` (default :data:`BURN_IN_LEVEL`) at stationarity whatever d:

    * every component: :math:`\max_j |z_j| \le \Phi^{-1}ig((1 + q^{1/d})/2ig)` (Šidák);
    * all together: :math:`\sum_j z_j^2 \le \chi^2_{d}(q)`, by the Wilson–Hilferty
      approximation :math:`d\,(1 - 	frac{2}{9d} + \Phi^{-1}(q)\sqrt{2/(9d)})^3` (within 2 % of
      the exact quantile at d = 1, closer above).

    Returns
    -------
    (bound on every component, bound on the sum of squares)
    """
    q = BURN_IN_LEVEL if level is None else level
    unit = NormalDist()
    each = unit.inv_cdf(0.5 * (1.0 + q ** (1.0 / d)))
    total = d * (1.0 - 2.0 / (9.0 * d) + unit.inv_cdf(q) * math.sqrt(2.0 / (9.0 * d))) ** 3
    return each, total


def window_variance_coefficients(k: tf.Tensor, w: tf.Tensor, w_max: int) -> tuple[tf.Tensor, tf.Tensor]:
    r"""a and b of the window mean's covariance :math:`aI + bV_w` (module docstring), per chain:
    with ρ = 1 − k/2 and sums over m = 1 … w − 1,

    .. math:: a = rac{w + 2\sum_m (w - m)
ho^m}{w^2},\qquad
              b = rac{w - k\sum_m (w - m)
ho^{m-1}}{w^2}.
    """
    dtype = k.dtype
    m = tf.range(1, max(w_max, 2), dtype=dtype)[None, :]  # [1, w_max - 1]
    rho = (1.0 - 0.5 * k)[:, None]
    weight = tf.maximum(w[:, None] - m, 0.0)  # (w − m) for m < w, else 0
    s1 = tf.reduce_sum(weight * tf.pow(rho, m), axis=1)
    s0 = tf.reduce_sum(weight * tf.pow(rho, m - 1.0), axis=1)
    a = (w + 2.0 * s1) / (w * w)
    b = (w - k * s0) / (w * w)
    return a, b
