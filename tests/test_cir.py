"""The simplex dynamics (SPEC §9; thesis §5.2–5.4) against exact answers.

Replicates, not long loops: every test steps many independent copies of a small state together
in one compiled loop, so the final states are iid draws whose law is known exactly (Corollary
5.4.2's moments; the Dirichlet / gamma marginals) and tests with honest p-values apply.
The exact answers and the calibration runs come from ``tests/reference_simplex.py`` (numpy's
non-central χ² sampler, numpy's hypergeometric minibatches; no sgmcmc code).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from scipy import stats  # noqa: E402

import reference_simplex as ref  # noqa: E402
from sgmcmc.step.dynamics import cir  # noqa: E402

TINY32 = float(np.finfo(np.float32).tiny)  # 1.1754944e-38, float32's smallest normal number


def z_scores(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z-scores of the sample mean and sample variance of the rows of x (replicates × d)."""
    r = len(x)
    m = x.mean(0)
    c = x - m
    v = (c**2).mean(0)
    m4 = (c**4).mean(0)
    return (m - mean) / np.sqrt(var / r), (v - var) / np.sqrt((m4 - v**2) / r)


@tf.function(reduce_retracing=True)
def _exact_chain(log_theta0, a_hat_seq, h, seed):
    """Step log θ by the exact transition once per row of ``a_hat_seq`` ([M, R, d])."""

    def body(m, lt):
        return m + 1, cir.cir_exact_log_step(lt, a_hat_seq[m], h, tf.random.experimental.stateless_fold_in(seed, m))

    _, lt = tf.while_loop(lambda m, lt: m < tf.shape(a_hat_seq)[0], body, (tf.constant(0), log_theta0))
    return lt


@tf.function(reduce_retracing=True)
def _sgrld_chain(theta0, a_hat_seq, h, seed):
    def body(m, th):
        xi = tf.random.stateless_normal(tf.shape(th), tf.random.experimental.stateless_fold_in(seed, m), dtype=th.dtype)
        return m + 1, cir.sgrld_step(th, a_hat_seq[m], h, xi)

    _, th = tf.while_loop(lambda m, th: m < tf.shape(a_hat_seq)[0], body, (tf.constant(0), theta0))
    return th


def exact_chain(theta0, a_hat_seq, h, seed=0, dtype=tf.float64) -> np.ndarray:
    """θ_M (replicates × d) as log θ; ``a_hat_seq`` is [M, R, d] (or broadcastable)."""
    lt0 = tf.math.log(tf.cast(theta0, dtype))
    return _exact_chain(lt0, tf.cast(a_hat_seq, dtype), tf.cast(h, dtype), tf.constant([seed, 7], tf.int64)).numpy()


def test_exact_transition_moments_match_corollary_5_4_2():
    """â fixed (the minibatch is all data): after M steps, E and Var are the CIR ones over time
    Mh, E = θ₀e^(−Mh) + a(1 − e^(−Mh)), Var = 2θ₀(e^(−Mh) − e^(−2Mh)) + a(1 − e^(−Mh))²
    (derived in the report from χ²(k, λ): mean k + λ, variance 2k + 4λ). Mh = 1, far from
    stationarity, so θ₀'s terms matter. 20,000 replicates of a 10-d state, |z| < 5."""
    R, M, h = 20_000, 10, 0.1
    theta0 = np.array([0.0, 1e-3, 0.5, 2.0, 10.0, 50.0, 0.3, 5.0, 100.0, 0.01])
    a = np.array([0.1, 0.01, 1.0, 3.0, 0.5, 20.0, 80.0, 5.0, 1.0, 300.0])
    a_seq = np.broadcast_to(a, (M, R, 10))
    theta = np.exp(exact_chain(np.broadcast_to(theta0, (R, 10)), a_seq, h))
    mean, var = ref.scir_moments(theta0, a, h, M)
    zm, zv = z_scores(theta, mean, var)
    assert np.all(np.abs(zm) < 5), zm
    assert np.all(np.abs(zv) < 5), zv


def test_large_step_draws_match_dirichlet_where_sgrld_does_not():
    """h = 1, â = a (all data), the running experiment's posterior Dir(800.1, 100.1, 100.1,
    0.1 × 7): after 25 steps (e^(−25) of the start left) every ω_j of 4,000 replicates passes a
    KS test against its Beta marginal; SGRLD at the same h is off by a KS distance > 0.3."""
    R, M, h = 4_000, 25, 1.0
    a = ref.RUNNING_COUNTS + ref.RUNNING_ALPHA
    theta0 = np.full((R, 10), a.sum() / 10)
    a_seq = np.broadcast_to(a, (M, R, 10))
    omega = tf.exp(tf.nn.log_softmax(exact_chain(theta0, a_seq, h, seed=1), -1)).numpy()
    for j in range(10):
        p = stats.kstest(omega[:, j], lambda x, j=j: ref.dirichlet_marginal_cdf(x, a, j)).pvalue
        assert p > 1e-4, (j, p)
    theta = _sgrld_chain(tf.constant(theta0), tf.constant(a_seq), tf.constant(h, tf.float64), tf.constant([1, 2], tf.int64))
    omega_sgrld = cir.to_simplex(theta).numpy()
    d_sgrld = [ref.ks_distance(omega_sgrld[:, j], lambda x, j=j: ref.dirichlet_marginal_cdf(x, a, j)) for j in range(3, 10)]
    assert min(d_sgrld) > 0.3, d_sgrld


def test_minibatch_mean_exact_and_variance_inflation_matches_corollary():
    """â from minibatches of n = 100 rows drawn without replacement from N = 1000 category
    labels (fresh each step): E[θ_M] is the exact mean, and Var[θ_M] has Corollary 5.4.2's
    extra (1 − e^(−2Mh))(1 − e^(−h))/(1 + e^(−h))·Var[â] with the hypergeometric
    Var[â_j] = (N/n)² n p(1 − p)(N − n)/(N − 1). h = 1 makes the inflation large; the
    finite-population correction (N − n)/(N − 1) = 0.9 is itself detectable (checked)."""
    R, M, h, n, alpha = 20_000, 6, 1.0, 100, 0.5
    counts = np.array([300, 200, 150, 100, 100, 50, 50, 30, 20, 0])
    a = alpha + counts
    rng = np.random.default_rng(3)
    a_seq = ref.minibatch_a_hat(counts, alpha, n, (M, R), rng)
    theta0 = np.linspace(1.0, 400.0, 10)
    theta = np.exp(exact_chain(np.broadcast_to(theta0, (R, 10)), a_seq, h, seed=3))
    mean, var = ref.scir_moments(theta0, a, h, M, ref.var_a_hat(counts, n))
    zm, zv = z_scores(theta, mean, var)
    assert np.all(np.abs(zm) < 5), zm
    assert np.all(np.abs(zv) < 5), zv
    # the test can tell: Var[â] with replacement (no correction) is rejected for the big components
    _, var_wr = ref.scir_moments(theta0, a, h, M, ref.var_a_hat(counts, n) * (counts.sum() - 1) / (counts.sum() - n))
    assert np.max(np.abs(z_scores(theta, mean, var_wr)[1])) > 5


def test_sparse_components_float32():
    """float32, â = a = (1000, 0.1, 0.01, 5): ω₂ has posterior mean ≈ 1e-4, and a = 0.01 puts
    42% of Gamma(0.01) below 1.2e-38. The log-space state is right everywhere (KS against the
    exact log-gamma CDF, no censoring); the linear outputs θ' = cir_exact_step(...) and ω are
    right above float32's smallest normal (censored KS), and none is 0 whose log-value is above it."""
    R, M, h = 20_000, 20, 1.0
    a = np.array([1000.0, 0.1, 0.01, 5.0])
    a_seq = np.broadcast_to(a, (M, R, 4)).astype(np.float32)
    lt = exact_chain(np.broadcast_to(a, (R, 4)), a_seq, h, seed=4, dtype=tf.float32)
    assert lt.dtype == np.float32 and np.all(np.isfinite(lt))
    for j in range(4):
        p = stats.kstest(lt[:, j].astype(np.float64), lambda y, j=j: ref.log_gamma_cdf_log(y, a[j])).pvalue
        assert p > 1e-4, ("log theta", j, p)
    # ω on the log scale, exact Beta(a_j, Σa − a_j) marginals
    log_omega = tf.nn.log_softmax(lt, -1).numpy().astype(np.float64)
    for j in (1, 2):
        p = stats.kstest(log_omega[:, j], lambda y, j=j: ref.log_beta_cdf_log(y, a[j], a.sum() - a[j])).pvalue
        assert p > 1e-4, ("log omega", j, p)
    # the linear-scale step, same seed as the log step: θ' = exp(log θ')
    theta_prev = np.exp(exact_chain(np.broadcast_to(a, (R, 4)), a_seq[:-1], h, seed=4, dtype=tf.float32))
    last_seed = tf.random.experimental.stateless_fold_in(tf.constant([4, 7], tf.int64), M - 1)
    theta = cir.cir_exact_step(tf.constant(theta_prev), a_seq[-1], h, last_seed).numpy()
    assert theta.dtype == np.float32 and np.all(theta >= 0)
    lt_last = cir.cir_exact_log_step(tf.math.log(tf.constant(theta_prev)), a_seq[-1], h, last_seed).numpy()
    assert not np.any((theta == 0) & (lt_last > np.log(TINY32))), "a zero above float32's smallest normal"
    for j in (1, 2):
        _, p = ref.censored_ks(theta[:, j], lambda x, j=j: stats.gamma.cdf(x, a[j]), TINY32)
        assert p > 1e-4, ("theta", j, p)
    omega = cir.to_simplex(tf.constant(np.exp(lt))).numpy()
    for j in (1, 2):
        _, p = ref.censored_ks(omega[:, j], lambda x, j=j: ref.dirichlet_marginal_cdf(x, a, j), TINY32)
        assert p > 1e-4, ("omega", j, p)


class _Rng:
    """The protocol's rng for tests: fresh stateless seeds from (seed, t, call number)."""

    def __init__(self, seed: tf.Tensor, t: tf.Tensor):
        self.base = tf.random.experimental.stateless_fold_in(seed, t)
        self.calls = 0

    def seed(self) -> tf.Tensor:
        self.calls += 1
        return tf.random.experimental.stateless_fold_in(self.base, self.calls)

    def normal(self, like: dict) -> dict:
        return {k: tf.random.stateless_normal(tf.shape(v), self.seed(), dtype=v.dtype) for k, v in like.items()}


def _minibatch_estimate(labels: tf.Tensor, d: int, alpha: float, n: int, seed: tf.Tensor):
    """â = α + (N/n)·counts of n rows drawn without replacement, one minibatch per chain."""

    def estimate(params):
        (omega,) = params.values()
        K, N = tf.shape(omega)[0], tf.shape(labels)[0]
        keys = tf.random.stateless_uniform(tf.stack([K, N]), seed)
        rows = tf.math.top_k(keys, n).indices  # a uniformly random n-subset per chain
        counts = tf.reduce_sum(tf.one_hot(tf.gather(labels, rows), d, dtype=omega.dtype), axis=1)
        return {"omega": alpha + tf.cast(N, omega.dtype) / n * counts}

    return estimate


def run_kernel(kernel, omega0, labels, d, alpha, n, n_iters, seed, dtype=tf.float64):
    """Drive a kernel as the lead's sampler would; returns ω of every iteration [n_iters, K, d]."""

    @tf.function
    def loop(omega0, seed):
        params = {"omega": omega0}
        aux = kernel.init_aux(params, None)

        def body(t, params, aux, out):
            rng = _Rng(seed, t)
            estimate = _minibatch_estimate(labels, d, alpha, n, rng.seed())
            params, aux, _ = kernel.one_step(params, aux, estimate, rng, t)
            return t + 1, params, aux, out.write(t - 1, params["omega"])

        out = tf.TensorArray(dtype, size=n_iters)
        _, _, _, out = tf.while_loop(lambda t, *_: t <= n_iters, body, (tf.constant(1), params, aux, out))
        return out.stack()

    return loop(tf.cast(omega0, dtype), tf.constant([seed, 11], tf.int64)).numpy()


def _three_steps(kernel, omega0, dtype, estimate):
    @tf.function
    def steps(seed):
        params = {"omega": tf.constant(omega0, dtype)}
        aux = kernel.init_aux(params, None)
        outs = []
        for t in range(1, 4):
            params, aux, _ = kernel.one_step(params, aux, estimate, _Rng(seed, t), tf.constant(t))
            outs.append(params["omega"])
        return tf.stack(outs)

    return steps


def test_simplex_shapes_dtypes_seeds():
    """Stacked simplices (3, 5) with a chain axis K = 2, float32 and float64, both kernels:
    every sample on the simplex, shapes and dtypes kept, same seed → identical, another differs;
    the stepsize may be a number, a dict or a schedule h(t); init_aux with â starts at ω₀."""
    rng_np = np.random.default_rng(5)
    omega0 = rng_np.dirichlet(np.ones(5), size=(2, 3))
    a_hat = {"omega": tf.constant(rng_np.gamma(1.0, 10.0, size=(2, 3, 5)) + 0.01)}

    def estimate(params):
        return {"omega": tf.cast(a_hat["omega"], params["omega"].dtype)}

    for dtype in (tf.float32, tf.float64):
        for kernel in (
            cir.SCIR(stepsize=0.5),
            cir.SCIR(stepsize={"omega": lambda t: 0.5 * (1.0 + tf.cast(t, tf.float32) / 10.0) ** -0.33}),
            cir.SGRLD(stepsize={"omega": 0.01}),
        ):

            steps = _three_steps(kernel, omega0, dtype, estimate)

            a = steps(tf.constant([1, 2], tf.int64)).numpy()
            b = steps(tf.constant([1, 2], tf.int64)).numpy()
            c = steps(tf.constant([3, 4], tf.int64)).numpy()
            assert a.shape == (3, 2, 3, 5) and a.dtype == dtype.as_numpy_dtype
            assert np.all(a >= 0) and np.allclose(a.sum(-1), 1.0, atol=1e-5)
            np.testing.assert_array_equal(a, b)
            assert not np.array_equal(a, c)
        aux = cir.SCIR(0.5).init_aux({"omega": tf.constant(omega0, dtype)}, None, a_hat=estimate({"omega": tf.constant(omega0, dtype)}))
        np.testing.assert_allclose(cir.log_to_simplex(aux["log_theta"]["omega"]).numpy(), omega0, rtol=1e-5)
        np.testing.assert_allclose(
            np.exp(aux["log_theta"]["omega"].numpy()).sum(-1), a_hat["omega"].numpy().sum(-1), rtol=1e-5
        )
    # the pure functions on any shape, same seed → identical
    th = tf.constant(rng_np.gamma(0.5, size=(2, 3, 5)))
    s = tf.constant([9, 9], tf.int64)
    np.testing.assert_array_equal(cir.cir_exact_step(th, 0.3, 0.1, s).numpy(), cir.cir_exact_step(th, 0.3, 0.1, s).numpy())
    assert cir.cir_exact_step(th, 0.3, 0.1, s).shape == (2, 3, 5)


def test_running_experiment_scir_beats_sgrld():
    """The thesis running experiment (§5.2.3): d = 10, N = 1000, counts 800, 100, 100, 0 × 7,
    α = 0.1, minibatch 10, through the kernels with a TF minibatch estimator; 20 chains, 1000
    burn-in + 1000 kept, the mean KS distance of the 7 sparse ω_j to their Beta marginals.
    Stepsizes: the best of the thesis grid (Table B.5.1) on the numpy reference, SCIR h = 0.5,
    SGRLD h = 0.005. Calibration (tests/reference_simplex.run, same sizes, seeds 0, 1, 2):
    SCIR 0.007 0.007 0.006 (h = 0.5; h = 1: 0.007 0.007 0.005); SGRLD 0.495 0.490 0.496
    (h = 0.005; its best; 0.518 at 0.01, ≥ 0.99 at h ≤ 1e-3 where it has not burnt in).
    Thresholds: SCIR < 0.03, SGRLD > 0.3."""
    a = ref.RUNNING_COUNTS + ref.RUNNING_ALPHA
    labels = tf.constant(np.repeat(np.arange(10), ref.RUNNING_COUNTS), tf.int32)
    omega0 = np.full((20, 10), 0.1)

    def ks_sparse(omega):
        return np.mean([ref.ks_distance(omega[1000:, :, j], lambda x, j=j: ref.dirichlet_marginal_cdf(x, a, j)) for j in range(3, 10)])

    d_scir = ks_sparse(run_kernel(cir.SCIR(0.5), omega0, labels, 10, 0.1, 10, 2000, seed=6))
    d_sgrld = ks_sparse(run_kernel(cir.SGRLD(0.005), omega0, labels, 10, 0.1, 10, 2000, seed=6))
    assert d_scir < 0.03, d_scir
    assert d_sgrld > 0.3, d_sgrld


def test_sgrld_step_is_the_mirrored_euler_step():
    """SGRLD itself is right: with given noise it is |θ + h(â − θ) + √(2hθ)ξ| (mirroring
    included), and at a small h on a dense Gamma(20) target it keeps the stationary mean and
    variance 20 to within O(h) (20,000 replicates, 300 steps of h = 0.01)."""
    theta = np.array([[0.01, 5.0, 50.0]])
    a_hat = np.array([[0.1, 2.0, 80.0]])
    xi = np.array([[-3.0, 0.5, -1.0]])
    expected = np.abs(theta + 0.2 * (a_hat - theta) + np.sqrt(0.4 * theta) * xi)
    np.testing.assert_allclose(cir.sgrld_step(tf.constant(theta), a_hat, 0.2, xi).numpy(), expected, rtol=1e-12)
    R, M, h, a = 20_000, 300, 0.01, 20.0
    a_seq = np.full((M, R, 1), a)
    th = _sgrld_chain(tf.fill([R, 1], tf.constant(a, tf.float64)), tf.constant(a_seq), tf.constant(h, tf.float64), tf.constant([8, 8], tf.int64)).numpy()
    zm, _ = z_scores(th, np.array([a]), np.array([a]))
    assert abs(zm[0]) < 5, zm
    assert abs(th.var() / a - 1) < 0.05, th.var()
