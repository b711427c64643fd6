"""Which sampler should ``sgmcmc.sample`` choose? Cost to reach the ESS/R-hat target (issue 43.2).

For each posterior and each candidate, 4 chains (chain 0 at the mode, chains 1-3 at the mode plus a
draw of the Laplace approximation) run in rounds until every parameter element has bulk and tail ESS
>= 400 and rank-normalised split R-hat <= 1.01 (ArviZ), computed on the second half of the
iterations run so far (the first half is burn-in), or until a cap. Recorded: iterations to the
target, per-row gradient evaluations (all 4 chains, in full-data passes of N rows), seconds, and
accuracy against the reference posterior (largest |mean - ref mean| / ref sd, range of sd / ref sd,
on the same kept half).

Candidates (public API; the mode search and the curvature are shared and costed once per posterior):
  sgldcv        SGLD-CV, one stepsize: check_stepsize(method="sgldcv", minibatch_size=n).safe_stepsize
  sgldcv_pp     SGLD-CV, the check's safe_stepsize_per_parameter (= sgldcv with one parameter block)
  sgldcv_white  SGLD-CV on phi, theta = mode + M phi, M = Q Lambda^-1/2 (A = Q Lambda Q^T = -Hessian of
                log p at the mode, eigenvalues floored at FLOOR_REL * lambda_max); stepsize from the check
                on the wrapped model at phi = 0
  sghmccv_white SGHMC-CV on phi (alpha, L defaults), stepsize from check_stepsize(method="sghmccv")
  osgld         OSGLD (no stepsize; c = 0.1)
  psgld         pSGLD at the SGLD check's safe scaled curvature (plain estimator, noise included) divided
                by lambda_max(G^1/2 A G^1/2), G its preconditioner after 300 warm-up iterations

Posteriors:
  gauss     conjugate Gaussian mean, d = 5, N = 10^5, n = 500 (exact)
  linreg    linear regression, 6 badly scaled AR(1)-correlated columns (vignettes/ill_conditioned's
            make_problem(20_000, d=6)), n = 200 (exact)
  cancer    logistic regression, scikit-learn's breast cancer (30 standardised columns + intercept,
            prior N(0, 10^2)), n = 50 of 569; reference: TFP NUTS on the full data, cached in
            benchmarks/data/breast_cancer_nuts.json (``--refresh-reference`` recomputes it)
  covtype   logistic regression on synthetic_covertype (d = 55, Laplace(0, 1) prior), n = 500;
            N = 50,000 (``--covtype-rows``); reference: a long whitened SGLD-CV run, cached in
            benchmarks/data/covtype50k_reference.json (other N: the floored Laplace approximation)
  hier      README's "parameters on different scales" hierarchical normal (mu, theta[20]), n = 500 of
            10,000 (exact: a Gaussian posterior)
And on linreg the stepsize multiples (1x, 3x, 10x the check's) for sgldcv and (1x, 2x, 3x) for
sgldcv_white: cost to target and sd ratio.

Usage: python benchmarks/bench_choice.py [--quick] [--posteriors gauss,linreg,...]
       [--candidates ...] [--cap ITERS] [--osgld-cap ITERS] [--floor REL] [--json out.json]
  --quick: cap 20,000 iterations (default 100,000). RESULTS.md: --cap 50000 (--osgld-cap 10000
  for gauss, hier, covtype).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sgmcmc  # noqa: E402  (first: quiet TensorFlow)
import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NUTS_CACHE = os.path.join(HERE, "data", "breast_cancer_nuts.json")
TARGET_ESS, MAX_RHAT, K = 400, 1.01, 4
FLOOR_REL = 1e-6  # eigenvalues of A floored at FLOOR_REL * lambda_max for the whitening
CHECK_AT = [1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000, 12_000, 15_000, 20_000, 25_000, 30_000,
            40_000, 50_000, 60_000, 80_000, 100_000, 120_000, 150_000, 200_000, 250_000, 300_000, 400_000]
MAX_STORED = 20_000  # stored draws per chain before thinning by 2


# --------------------------------------------------------------------------------------------- posteriors
class Posterior:
    def __init__(self, name, log_lik, log_prior, dataset, template, n, ref_mean=None, ref_sd=None, ref="exact"):
        self.name, self.log_lik, self.log_prior, self.dataset = name, log_lik, log_prior, dataset
        self.template = {k: np.asarray(v, np.float32) for k, v in template.items()}
        self.names = list(self.template)
        self.shapes = [self.template[k].shape for k in self.names]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.d = sum(self.sizes)
        self.n = n
        self.N = len(next(iter(dataset.values())))
        self.ref_mean, self.ref_sd, self.ref = ref_mean, ref_sd, ref

    def flatten(self, values: dict) -> np.ndarray:
        """dict of arrays with leading axes L -> array (*L, d)."""
        parts = []
        for k, shape in zip(self.names, self.shapes):
            v = np.asarray(values[k])
            lead = v.shape[: v.ndim - len(shape)]
            parts.append(v.reshape(*lead, -1))
        return np.concatenate(parts, axis=-1)

    def unflatten(self, x: np.ndarray) -> dict:
        out, i = {}, 0
        for k, shape, size in zip(self.names, self.shapes, self.sizes):
            out[k] = np.asarray(x[i:i + size], np.float32).reshape(shape)
            i += size
        return out

    def tf_unflatten(self, x):
        out, i = {}, 0
        for k, shape, size in zip(self.names, self.shapes, self.sizes):
            out[k] = tf.reshape(x[i:i + size], shape)
            i += size
        return out


def gauss_posterior() -> Posterior:
    d, N = 5, 100_000
    rng = np.random.default_rng(1)
    x = rng.normal(np.linspace(-1, 1, d), 1.0, size=(N, d)).astype(np.float32)

    def log_lik(p, ds):
        return -0.5 * tf.reduce_sum(tf.square(ds["x"] - p["mu"]))

    def log_prior(p):
        return -0.5 * tf.reduce_sum(tf.square(p["mu"])) / 100.0

    prec = N + 1 / 100
    mean = x.astype(np.float64).sum(0) / prec
    return Posterior("gauss", log_lik, log_prior, {"x": x}, {"mu": np.zeros(d)}, 500, mean, np.full(d, prec**-0.5))


def linreg_posterior() -> Posterior:
    sys.path.insert(0, os.path.join(HERE, "..", "vignettes"))
    from ill_conditioned import make_problem  # noqa: E402

    p = make_problem(20_000, d=6)
    data = {k: v.astype(np.float32) for k, v in p["dataset"].items()}

    def log_lik(q, ds):
        return -0.5 * tf.reduce_sum(tf.square(ds["y"] - tf.linalg.matvec(ds["X"], q["beta"])))

    def log_prior(q):
        return -0.5 * tf.reduce_sum(tf.square(q["beta"])) / 100.0

    return Posterior("linreg", log_lik, log_prior, data, {"beta": np.zeros(6)}, 200, p["mean"], p["sd"])


def _logistic_lik(p, ds):
    z = p["bias"] + tf.linalg.matvec(ds["X"], p["beta"])
    return tf.reduce_sum(ds["y"] * z - tf.math.softplus(z))


def _normal_prior_10(p):
    return -0.5 * (tf.reduce_sum(tf.square(p["beta"])) + tf.square(p["bias"])) / 100.0


def _laplace_prior(p):
    return -tf.reduce_sum(tf.abs(p["beta"])) - tf.abs(p["bias"])


def cancer_data() -> dict:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return {"X": X.astype(np.float32), "y": y.astype(np.float32)}


def cancer_posterior(refresh: bool = False) -> Posterior:
    data = cancer_data()
    if refresh or not os.path.exists(NUTS_CACHE):
        nuts_reference(data)
    with open(NUTS_CACHE) as f:
        ref = json.load(f)
    return Posterior("cancer", _logistic_lik, _normal_prior_10, data, {"bias": 0.0, "beta": np.zeros(30)}, 50,
                     np.array(ref["mean"]), np.array(ref["sd"]), ref="NUTS")


COVTYPE_ROWS = 50_000
COVTYPE_CACHE = os.path.join(HERE, "data", "covtype50k_reference.json")


def covtype_posterior(n_rows: int = COVTYPE_ROWS, refresh: bool = False) -> Posterior:
    """synthetic_covertype(n_rows, seed 0); the bias and the one-hot blocks are collinear (each block
    sums to 1), so two directions are identified by the Laplace prior alone: the Hessian there is 0
    and the Laplace approximation is no reference. Reference: a long whitened SGLD-CV run on the 50,000
    rows (cached, covtype_long_reference); at other sizes the Laplace approximation (floored), flagged."""
    from sgmcmc.datasets import synthetic_covertype

    raw = synthetic_covertype(n_rows=n_rows, seed=0)
    data = {"X": raw[:, 1:], "y": raw[:, 0]}
    post = Posterior("covtype", _logistic_lik, _laplace_prior, data, {"bias": 0.0, "beta": np.zeros(54)}, 500,
                     ref="Laplace (floored)")
    if n_rows == COVTYPE_ROWS:
        if refresh or not os.path.exists(COVTYPE_CACHE):
            covtype_long_reference(post)
        with open(COVTYPE_CACHE) as f:
            ref = json.load(f)
        post.ref_mean, post.ref_sd, post.ref = np.array(ref["mean"]), np.array(ref["sd"]), "long run"
    return post


def covtype_long_reference(post: Posterior, n_iters: int = 100_000, factor: float = 0.3, seed: int = 7) -> dict:
    """A long whitened SGLD-CV run: 4 chains x ``n_iters`` at ``factor`` x the check's safe stepsize (sd
    stretched ~3 % instead of 10 %), theta = mode + M phi with the Hessian's eigenvalues floored at 1
    (the two prior-only directions get the Laplace(0, 1) prior's scale), the first 10 % dropped.
    (TFP NUTS on the 50,000 rows did not finish in 20 minutes on the loaded machine: not used.)"""
    ms = mode_search(post)
    A = full_hessian(post, ms["mode"])
    lam, Q = np.linalg.eigh(A)
    white = Whitened(post, ms["mode"], Q / np.sqrt(np.maximum(lam, 1.0)))
    zero = {"phi": np.zeros(post.d, np.float32)}
    check = sgmcmc.check_stepsize(white.log_lik, post.dataset, zero, 1e-2, white.log_prior, method="sgldcv",
                                  minibatch_size=post.n, warn=False)
    eps = factor * check.safe_stepsize
    rng = np.random.default_rng(seed)
    starts = [{"phi": z.astype(np.float32)} for z in np.vstack([np.zeros(post.d), rng.normal(size=(K - 1, post.d))])]
    t = time.perf_counter()
    out = sgmcmc.sgldcv(white.log_lik, post.dataset, starts, eps, log_prior=white.log_prior, minibatch_size=post.n,
                        n_iters=n_iters, n_iters_opt=0, burn_in=n_iters // 10, thin=10, n_chains=K, seed=seed,
                        verbose=False)
    seconds = time.perf_counter() - t
    theta = white.to_theta(np.asarray(out["phi"], np.float64))
    bulk, tail, rhat = diagnose(theta)
    flat = theta.reshape(-1, post.d)
    ref = dict(
        what=f"Bayesian logistic regression on sgmcmc.datasets.synthetic_covertype(n_rows={post.N}, seed=0), "
             "Laplace(0, 1) prior on all 55 (vignettes/main_job.py); order: bias, beta[0..53]",
        sampler=f"sgmcmc SGLD-CV on phi, theta = mode + Q max(Lambda, 1)^-1/2 phi, stepsize {eps:.3g} "
                f"({factor} x the check's safe {check.safe_stepsize:.3g}), n = {post.n}, {K} chains x {n_iters} "
                f"iterations, first 10 % dropped, thin 10, seed {seed}",
        mean=flat.mean(0).tolist(), sd=flat.std(0, ddof=1).tolist(), mode=ms["mode"].tolist(),
        laplace_sd=np.sqrt(np.sum(white.M**2, axis=1)).tolist(),
        min_ess_bulk=bulk, min_ess_tail=tail, max_rhat=rhat, seconds=round(seconds, 1),
    )
    with open(COVTYPE_CACHE, "w") as f:
        json.dump(ref, f, indent=1)
    print(f"covtype reference: {seconds:.1f} s, min bulk ESS {bulk:.0f}, min tail ESS {tail:.0f}, max R-hat "
          f"{rhat:.4f}", flush=True)
    return ref


def hier_posterior() -> Posterior:
    J, n_per = 20, 500
    rng = np.random.default_rng(2)
    group = np.repeat(np.arange(J), n_per)
    y = rng.normal(rng.normal(3.0, 1.0, J)[group], 1.0).astype(np.float32)

    def log_lik(p, ds):
        return -0.5 * tf.reduce_sum(tf.square(ds["y"] - tf.gather(p["theta"], ds["group"])))

    def log_prior(p):
        return -0.5 * tf.square(p["mu"]) / 100.0 - 0.5 * tf.reduce_sum(tf.square(p["theta"] - p["mu"]))

    # exact Gaussian posterior of (mu, theta): precision P
    P = np.zeros((J + 1, J + 1))
    P[0, 0] = 1 / 100 + J
    P[0, 1:] = P[1:, 0] = -1.0
    P[1:, 1:] = np.diag(np.full(J, n_per + 1.0))
    b = np.zeros(J + 1)
    b[1:] = np.bincount(group, weights=y.astype(np.float64), minlength=J)
    cov = np.linalg.inv(P)
    return Posterior("hier", log_lik, log_prior, {"y": y, "group": group}, {"mu": 0.0, "theta": np.zeros(J)}, 500,
                     cov @ b, np.sqrt(np.diag(cov)))


# ----------------------------------------------------------------------------------- NUTS reference
def _newton_logistic(X, y, prior_var, iters=50):
    Z = np.hstack([np.ones((len(y), 1)), X]).astype(np.float64)
    b = np.zeros(Z.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-Z @ b))
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.eye(len(b)) / prior_var
        step = np.linalg.solve(H, Z.T @ (y - p) - b / prior_var)
        b = b + step
        if np.max(np.abs(step)) < 1e-12:
            break
    p = 1 / (1 + np.exp(-Z @ b))
    H = (Z * (p * (1 - p))[:, None]).T @ Z + np.eye(len(b)) / prior_var
    return b, H


def nuts_reference(data: dict, n_chains: int = 4, n_warmup: int = 2_000, n_draws: int = 25_000, seed: int = 7) -> dict:
    """TFP NUTS on the full data (float64) with a dense metric: NUTS runs on phi, theta = mode + L^-T phi
    (H = L L^T the Hessian at the exact mode, by Newton) -- the same posterior, an exact sampler."""
    import tensorflow_probability as tfp

    X, y = data["X"].astype(np.float64), data["y"].astype(np.float64)
    mode, H = _newton_logistic(X, y, 100.0)
    Lc = np.linalg.cholesky(H)
    M = np.linalg.inv(Lc).T  # M M^T = H^-1
    Z = tf.constant(np.hstack([np.ones((len(y), 1)), X]))
    yt, mt, Mt = tf.constant(y), tf.constant(mode), tf.constant(M)

    def target(phi):  # phi: (chains, d)
        theta = mt + tf.linalg.matvec(Mt, phi)
        z = tf.einsum("nd,cd->cn", Z, theta)
        return tf.reduce_sum(yt * z - tf.math.softplus(z), -1) - 0.5 * tf.reduce_sum(theta**2, -1) / 100.0

    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        tfp.mcmc.NoUTurnSampler(target, step_size=0.5), num_adaptation_steps=int(0.8 * n_warmup))

    @tf.function(jit_compile=True)
    def run(init):
        return tfp.mcmc.sample_chain(n_draws, init, kernel=kernel, num_burnin_steps=n_warmup, seed=(seed, 1),
                                     trace_fn=lambda _, r: (r.inner_results.leapfrogs_taken,
                                                            r.inner_results.has_divergence))

    init = tf.constant(np.random.default_rng(seed).normal(size=(n_chains, len(mode))))
    t = time.perf_counter()
    phi, (leapfrogs, divergent) = run(init)
    seconds = time.perf_counter() - t
    theta = mode + np.einsum("tcd,ed->cte", phi.numpy(), M)  # (chains, draws, d)
    bulk, tail, rhat = diagnose(theta)
    flat = theta.reshape(-1, theta.shape[-1])
    ref = dict(
        what="Bayesian logistic regression, scikit-learn load_breast_cancer, 30 columns standardised (mean 0, "
             "population sd 1) + intercept, prior N(0, 10^2) on all 31; order: bias, beta[0..29]",
        sampler=f"TFP {tfp.__version__} NoUTurnSampler, float64, dense metric (NUTS on phi, theta = mode + "
                f"L^-T phi, H = L L^T the Hessian at the Newton mode), {n_chains} chains x {n_draws} draws after "
                f"{n_warmup} warm-up (dual averaging), seed {seed}",
        mean=flat.mean(0).tolist(), sd=flat.std(0, ddof=1).tolist(), laplace_mode=mode.tolist(),
        laplace_sd=np.sqrt(np.diag(np.linalg.inv(H))).tolist(),
        min_ess_bulk=bulk, min_ess_tail=tail, max_rhat=rhat, divergences=int(np.sum(divergent.numpy())),
        mean_leapfrogs=float(np.mean(leapfrogs.numpy())), seconds=round(seconds, 1),
        condition_number_raw=float(np.linalg.cond(H)),
    )
    os.makedirs(os.path.dirname(NUTS_CACHE), exist_ok=True)
    with open(NUTS_CACHE, "w") as f:
        json.dump(ref, f, indent=1)
    print(f"NUTS reference: {seconds:.1f} s, min bulk ESS {bulk:.0f}, min tail ESS {tail:.0f}, max R-hat "
          f"{rhat:.4f}, {ref['mean_leapfrogs']:.1f} leapfrogs a draw, {ref['divergences']} divergences", flush=True)
    return ref


# ------------------------------------------------------------------------------------ shared set-up
def full_hessian(post: Posterior, theta: np.ndarray, batch: int = 20_000) -> np.ndarray:
    """-d^2 log p / d theta^2 over the full data at ``theta`` (float64, in row batches): A."""
    data64 = {k: (v.astype(np.float64) if np.issubdtype(v.dtype, np.floating) else v) for k, v in post.dataset.items()}

    @tf.function
    def block_hessian(x, rows):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                value = post.log_lik(post.tf_unflatten(x), rows)
            g = inner.gradient(value, x)
        return outer.jacobian(g, x)

    @tf.function
    def prior_hessian(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                value = post.log_prior(post.tf_unflatten(x))
            g = inner.gradient(value, x)
        return outer.jacobian(g, x)

    x = tf.constant(theta, tf.float64)
    H = prior_hessian(x).numpy()
    for i in range(0, post.N, batch):
        H += block_hessian(x, {k: tf.constant(v[i:i + batch]) for k, v in data64.items()}).numpy()
    A = -H
    return 0.5 * (A + A.T)


def mode_search(post: Posterior, seed: int = 0) -> dict:
    """The CV samplers' own mode search (automatic opt_stepsize, 10^4 SGD steps, Newton steps if
    needed) from all-zero starts; its cost counted as 10^4 n + N x (full passes: the anchor's gradient
    and each Newton line-search evaluation)."""
    err = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stderr(err), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = sgmcmc.sgldcv_setup(post.log_lik, post.dataset, post.template, 1e-12, log_prior=post.log_prior,
                                minibatch_size=post.n, seed=seed, verbose=True, check_stepsize=False)
        sgmcmc.init_sess(s)
    seconds = time.perf_counter() - t
    text = err.getvalue()
    newton = text.count("Newton step (")
    mode = post.flatten({k: v.numpy() for k, v in s.estimator.anchor.items()}).astype(np.float64)
    passes = 1 + newton + (1 if newton else 0)
    return dict(mode=mode, seconds=seconds, newton_steps=newton,
                passes=10_000 * post.n / post.N + passes,
                messages=[ln for ln in text.splitlines() if "mode" in ln][-2:] +
                         [f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught])


def whitening(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lam, Q = np.linalg.eigh(A)
    floored = np.maximum(lam, FLOOR_REL * lam[-1])
    return Q / np.sqrt(floored), lam


def conditioning(A: np.ndarray) -> tuple[float, float]:
    lam = np.linalg.eigvalsh(A)
    dg = np.sqrt(np.abs(np.diag(A)))
    lam_s = np.linalg.eigvalsh(A / np.outer(dg, dg))
    return float(lam[-1] / max(lam[0], 1e-300)), float(lam_s[-1] / max(lam_s[0], 1e-300)), float(lam[0]), float(lam[-1])


class Whitened:
    """The wrapped model: params {"phi": d}, theta = mode + M phi unflattened into the user's dict."""

    def __init__(self, post: Posterior, mode: np.ndarray, M: np.ndarray):
        self.post = post
        self.mode32, self.M32 = tf.constant(mode, tf.float32), tf.constant(M, tf.float32)
        self.mode, self.M = mode, M

    def theta(self, phi):
        return self.post.tf_unflatten(self.mode32 + tf.linalg.matvec(self.M32, phi))

    def log_lik(self, p, ds):
        return self.post.log_lik(self.theta(p["phi"]), ds)

    def log_prior(self, p):
        return self.post.log_prior(self.theta(p["phi"]))

    def to_theta(self, phi: np.ndarray) -> np.ndarray:
        return self.mode + phi @ self.M.T


# --------------------------------------------------------------------------------------- diagnostics
def diagnose(draws: np.ndarray) -> tuple[float, float, float]:
    """draws (K, n, d) -> (min bulk ESS, min tail ESS, max rank R-hat) over elements."""
    ds = az.convert_to_dataset({"x": draws})
    bulk = az.ess(ds, method="bulk")["x"].values
    tail = az.ess(ds, method="tail")["x"].values
    rhat = az.rhat(ds, method="rank")["x"].values
    return float(np.nanmin(bulk)), float(np.nanmin(tail)), float(np.nanmax(rhat))


def accuracy(draws: np.ndarray, ref_mean, ref_sd) -> tuple[float, float, float]:
    flat = draws.reshape(-1, draws.shape[-1])
    mean_err = np.max(np.abs(flat.mean(0) - ref_mean) / ref_sd)
    ratio = flat.std(0, ddof=1) / ref_sd
    return float(mean_err), float(ratio.min()), float(ratio.max())


def run_to_target(step, to_theta, rows_per_iter: float, post: Posterior, cap: int, label: str, cost_per_iter: int = 1):
    """Run ``step(n)`` (-> draws (K, n, d') on the chain's scale) in rounds; check at CHECK_AT
    (iterations x cost_per_iter <= cap). Returns a result dict."""
    stored, its, thin, T, seconds = [], [], 1, 0, 0.0
    res = dict(reached=False)
    for check in [c for c in CHECK_AT if c * cost_per_iter <= cap] or [cap // cost_per_iter]:
        t = time.perf_counter()
        new = step(check - T)
        seconds += time.perf_counter() - t
        new_its = np.arange(T + 1, check + 1)
        keep = (new_its % thin) == 0
        stored.append(to_theta(new[:, keep]))
        its.append(new_its[keep])
        T = check
        x, it = np.concatenate(stored, 1), np.concatenate(its)
        if x.shape[1] > MAX_STORED:
            x, it, thin = x[:, 1::2], it[1::2], thin * 2
        stored, its = [x], [it]
        kept = x[:, it > T // 2]
        if not np.all(np.isfinite(kept)):
            res.update(error="non-finite draws", iters=T)
            break
        bulk, tail, rhat = diagnose(kept)
        mean_err, sd_lo, sd_hi = accuracy(kept, post.ref_mean, post.ref_sd)
        res.update(iters=T, bulk=bulk, tail=tail, rhat=rhat, mean_err=mean_err, sd_lo=sd_lo, sd_hi=sd_hi,
                   seconds=seconds, passes=T * rows_per_iter / post.N)
        print(f"    {label:14s} T={T:7d} bulk {bulk:8.1f} tail {tail:8.1f} rhat {rhat:.4f} mean err {mean_err:.3f} "
              f"sd {sd_lo:.3f}-{sd_hi:.3f} {seconds:6.1f}s", flush=True)
        if bulk >= TARGET_ESS and tail >= TARGET_ESS and rhat <= MAX_RHAT:
            res["reached"] = True
            break
    if not res["reached"] and "bulk" in res and res["bulk"] > 0:
        worst = min(res["bulk"], res["tail"])
        res["projected_iters"] = T * max(1.0, TARGET_ESS / max(worst, 1e-9))
    return res


# ---------------------------------------------------------------------------------------- candidates
def _catch(fn):
    """Run fn() recording warnings; returns (result or exception, warnings list)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 -- recorded, not hidden
            out = e
    msgs = []
    for w in caught:
        if issubclass(w.category, (sgmcmc.StepsizeWarning,)) or "Warning" in w.category.__name__:
            if w.category.__name__ in ("DeprecationWarning", "FutureWarning", "PendingDeprecationWarning"):
                continue
            msgs.append(f"{w.category.__name__}: {str(w.message)[:200]}")
    return out, msgs


def make_runner(sampler):
    def step(n):
        out = sgmcmc.sample_chain(sampler, n, False)
        return out
    return step


def candidate(name: str, post: Posterior, shared: dict, cap: int, seed: int, factor: float = 1.0) -> dict:
    mode, M, starts_theta, starts_phi = shared["mode"], shared["M"], shared["starts_theta"], shared["starts_phi"]
    white = shared["white"]
    common = dict(minibatch_size=post.n, seed=seed, n_chains=K)
    setup_t = time.perf_counter()
    info: dict = dict(candidate=name, factor=factor)
    starts = [post.unflatten(s) for s in starts_theta]
    flat = lambda out: post.flatten({k: out[k] for k in post.names})  # noqa: E731
    warn: list = []

    def build():
        nonlocal flat
        if name in ("sgldcv", "sgldcv_pp"):
            check = sgmcmc.check_stepsize(post.log_lik, post.dataset, post.unflatten(mode), 1e-6, post.log_prior,
                                          method="sgldcv", minibatch_size=post.n, warn=False)
            eps = check.safe_stepsize
            if name == "sgldcv_pp":
                eps = check.safe_stepsize_per_parameter or check.safe_stepsize
            eps = ({k: v * factor for k, v in eps.items()} if isinstance(eps, dict) else eps * factor)
            info["stepsize"] = eps
            s = sgmcmc.sgldcv_setup(post.log_lik, post.dataset, starts, eps, log_prior=post.log_prior, n_iters_opt=0,
                                    verbose=False, check_stepsize=True,
                                    **common)
            return s, 2
        if name in ("sgldcv_white", "sghmccv_white"):
            method = "sgldcv" if name == "sgldcv_white" else "sghmccv"
            zero = {"phi": np.zeros(post.d, np.float32)}
            check = sgmcmc.check_stepsize(white.log_lik, post.dataset, zero, 1e-2, white.log_prior, method=method,
                                          minibatch_size=post.n, warn=False)
            eps = check.safe_stepsize * factor
            info["stepsize"] = eps
            info["scaled_curvature_at_eps"] = check.scaled_curvature / 1e-2 * eps
            wstarts = [{"phi": s.astype(np.float32)} for s in starts_phi]
            setup = sgmcmc.sgldcv_setup if method == "sgldcv" else sgmcmc.sghmccv_setup
            s = setup(white.log_lik, post.dataset, wstarts, eps, log_prior=white.log_prior, n_iters_opt=0,
                      verbose=False, **common)
            flat = lambda out: white.to_theta(np.asarray(out["phi"], np.float64))  # noqa: E731
            return s, (2 if method == "sgldcv" else 2 * s.kernel.L)
        if name == "osgld":
            s = sgmcmc.osgld_setup(post.log_lik, post.dataset, starts, log_prior=post.log_prior, **common)
            return s, 1
        if name == "psgld":
            chk = sgmcmc.check_stepsize(post.log_lik, post.dataset, post.unflatten(mode), 1e-6, post.log_prior,
                                        method="sgld", minibatch_size=post.n, warn=False, per_parameter=False)
            safe_mu = chk.safe_stepsize * chk.curvature
            warm = sgmcmc.psgld_setup(post.log_lik, post.dataset, starts, 1e-3 * safe_mu / chk.curvature,
                                      log_prior=post.log_prior, check_stepsize=False, **common)
            sgmcmc.sample_chain(warm, 300, False)
            v = warm.kernel_state()["v"]
            G = post.flatten({k: np.asarray(v[k]) for k in post.names})[0]
            G = 1.0 / (warm.kernel.lam + np.sqrt(G))
            root = np.sqrt(G)
            mu1 = np.linalg.eigvalsh(root[:, None] * shared["A"] * root[None, :])[-1]
            eps = safe_mu / mu1 * factor
            info["stepsize"] = eps
            info["warmup_passes"] = 300 * K * post.n / post.N
            s = sgmcmc.psgld_setup(post.log_lik, post.dataset, starts, eps, log_prior=post.log_prior,
                                   check_stepsize=False, **common)
            return s, 1
        raise ValueError(name)

    def build_and_init():
        s, per_row = build()
        sgmcmc.init_sess(s, verbose=False)
        return s, per_row

    out, warn = _catch(build_and_init)
    info["setup_seconds"] = time.perf_counter() - setup_t
    info["warnings"] = warn
    if isinstance(out, Exception):
        info["error"] = f"{type(out).__name__}: {str(out)[:300]}"
        print(f"    {name}: {info['error']}", flush=True)
        return info
    sampler, grads_per_row = out
    cost_per_iter = grads_per_row // 2 if name == "sghmccv_white" else 1  # SGHMC: L kicks an iteration
    rows_per_iter = K * post.n * grads_per_row
    label = name if factor == 1.0 else f"{name} x{factor:g}"

    def step(n):
        out = sgmcmc.sample_chain(sampler, n, False)
        return flat(out)

    res, run_warn = _catch(lambda: run_to_target(step, lambda x: x, rows_per_iter, post, cap, label, cost_per_iter))
    info["warnings"] += run_warn
    if isinstance(res, Exception):
        info["error"] = f"{type(res).__name__}: {str(res)[:300]}"
        print(f"    {label}: {info['error']}", flush=True)
        return info
    info.update(res)
    info["rows_per_iter"] = rows_per_iter
    for w in info["warnings"]:
        print(f"      warned: {w[:160]}", flush=True)
    return info


# ---------------------------------------------------------------------------------------------- main
CANDIDATES = ["sgldcv", "sgldcv_pp", "sgldcv_white", "sghmccv_white", "osgld", "psgld"]


def prepare(post: Posterior, seed: int = 0) -> dict:
    print(f"== {post.name}: N = {post.N}, n = {post.n}, d = {post.d}", flush=True)
    ms = mode_search(post, seed)
    t = time.perf_counter()
    A = full_hessian(post, ms["mode"])
    hess_seconds = time.perf_counter() - t
    M, lam = whitening(A)
    kraw, kscaled, lmin, lmax = conditioning(A)
    if post.ref_mean is None:  # the Laplace approximation at the mode (floored eigenvalues)
        post.ref_mean = ms["mode"]
        post.ref_sd = np.sqrt(np.sum(M**2, axis=1))
    rng = np.random.default_rng(seed + 100)
    z = np.vstack([np.zeros(post.d), rng.normal(size=(K - 1, post.d))])
    starts_theta = ms["mode"] + z @ M.T
    white = Whitened(post, ms["mode"], M)
    mode_err = float(np.max(np.abs(ms["mode"] - post.ref_mean) / post.ref_sd))
    floored = int(np.sum(lam < FLOOR_REL * lam[-1]))
    shared = dict(mode=ms["mode"], A=A, M=M, starts_theta=starts_theta, starts_phi=z, white=white)
    meta = dict(posterior=post.name, N=post.N, n=post.n, d=post.d, kappa_raw=kraw, kappa_scaled=kscaled,
                lambda_min=lmin, lambda_max=lmax, eigen_floored=floored, mode_seconds=ms["seconds"],
                mode_passes=ms["passes"], newton_steps=ms["newton_steps"], mode_err_sd=mode_err,
                hessian_seconds=hess_seconds, hessian_passes=2 * post.d, mode_messages=ms["messages"], ref=post.ref)
    print(f"   kappa raw {kraw:.3g}, diagonally scaled {kscaled:.3g} (lambda {lmin:.3g}..{lmax:.3g}, {floored} floored); "
          f"mode search {ms['seconds']:.1f} s, {ms['passes']:.1f} passes, {ms['newton_steps']} Newton steps, "
          f"{mode_err:.3f} ref sds from the reference mean; Hessian {hess_seconds:.1f} s", flush=True)
    return shared, meta


def fmt_row(meta: dict, r: dict) -> str:
    setup = meta["mode_passes"] + meta["hessian_passes"]
    label = r["candidate"] + ("" if r.get("factor", 1.0) == 1.0 else f" x{r['factor']:g}")
    eps = r.get("stepsize")
    if isinstance(eps, dict):
        eps = "{" + ", ".join(f"{k}: {v:.2g}" for k, v in eps.items()) + "}"
    elif eps is not None:
        eps = f"{eps:.3g}"
    else:
        eps = "-"
    if "error" in r and "iters" not in r:
        return f"| {meta['posterior']} | {label} | {eps} | {r['error'][:120]} | | | | | | |"
    status = f"{r['iters']:,}" if r.get("reached") else f"not in {r['iters']:,} (proj. {r.get('projected_iters', math.nan):,.0f})"
    passes = r["passes"] + setup + r.get("warmup_passes", 0)
    return (f"| {meta['posterior']} | {label} | {eps} | {status} | {passes:,.0f} | {r['seconds'] + r['setup_seconds']:.0f} | "
            f"{min(r['bulk'], r['tail']):.0f} | {r['rhat']:.3f} | {r['mean_err']:.2f} | {r['sd_lo']:.2f}-{r['sd_hi']:.2f} |"
            + (" warned" if r.get("warnings") else ""))


def main(argv=None) -> None:
    global FLOOR_REL
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--posteriors", default="gauss,linreg,cancer,covtype,hier")
    p.add_argument("--candidates", default=",".join(CANDIDATES))
    p.add_argument("--cap", type=int, default=None, help="iterations (SGLD-equivalent) per candidate")
    p.add_argument("--no-multiples", action="store_true")
    p.add_argument("--osgld-cap", type=int, default=10**9, help="a lower cap for OSGLD (its iterations cost most)")
    p.add_argument("--refresh-reference", action="store_true")
    p.add_argument("--reference-only", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--covtype-rows", type=int, default=COVTYPE_ROWS)
    p.add_argument("--floor", type=float, default=FLOOR_REL, help="whitening: eigenvalue floor / lambda_max")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    FLOOR_REL = args.floor
    if args.reference_only:
        nuts_reference(cancer_data())
        covtype_posterior(COVTYPE_ROWS, refresh=True)
        return
    cap = args.cap or (20_000 if args.quick else 100_000)
    makers = dict(gauss=gauss_posterior, linreg=linreg_posterior, cancer=lambda: cancer_posterior(args.refresh_reference),
                  covtype=lambda: covtype_posterior(args.covtype_rows, args.refresh_reference), hier=hier_posterior)
    print(f"machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}; cap {cap:,} iterations", flush=True)
    records = []
    for name in args.posteriors.split(","):
        post = makers[name]()
        shared, meta = prepare(post)
        rows = []
        for cand in args.candidates.split(","):
            if cand == "sgldcv_pp" and len(post.names) == 1:
                rows.append(dict(candidate=cand, error="one parameter block: the same as sgldcv"))
                continue
            r = candidate(cand, post, shared, min(cap, args.osgld_cap) if cand == "osgld" else cap, args.seed)
            rows.append(r)
        if name == "linreg" and not args.no_multiples:
            for cand, factors in (("sgldcv", (3.0, 10.0)), ("sgldcv_white", (2.0, 3.0))):
                if cand in args.candidates.split(","):
                    for f in factors:
                        rows.append(candidate(cand, post, shared, cap, args.seed, factor=f))
        meta["load_after"] = os.getloadavg()[0]
        records.append(dict(meta=meta, rows=rows))
        print("\n| posterior | candidate | stepsize | iterations to target | passes (N rows) | s | min ESS | R-hat | "
              "max mean err (sd) | sd ratio |\n|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(fmt_row(meta, r))
        print(flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(records, f, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    print("\n# all posteriors")
    for rec in records:
        m = rec["meta"]
        print(f"{m['posterior']}: d {m['d']}, N/n {m['N'] / m['n']:.0f}, kappa raw {m['kappa_raw']:.3g}, scaled "
              f"{m['kappa_scaled']:.3g}; set-up {m['mode_passes'] + m['hessian_passes']:.1f} passes "
              f"({m['mode_seconds'] + m['hessian_seconds']:.0f} s)")
        for r in rec["rows"]:
            print(fmt_row(m, r))


if __name__ == "__main__":
    main()
