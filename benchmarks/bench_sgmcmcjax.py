"""Baseline speed of SGMCMCJax's SGLD on covertype-shaped Bayesian logistic regression.

This script is NOT run with the project's environment. It needs its own venv
(SGMCMCJax 0.2.13 no longer imports on current jax)::

    python3.11 -m venv /tmp/jaxbench/venv
    /tmp/jaxbench/venv/bin/pip install "jax==0.4.26" "jaxlib==0.4.26" "numpy<2" \
        sgmcmcjax "optax<0.2.3" "scipy<1.13"
    /tmp/jaxbench/venv/bin/python benchmarks/bench_sgmcmcjax.py

(resolved: jax/jaxlib 0.4.26, numpy 1.26.4, optax 0.2.2, scipy 1.12.0,
chex 0.1.86, SGMCMCJax 0.2.13.)

Model: X (N x 54, float32, in [0,1]), y in {0,1}, params {"bias": scalar,
"beta": (54,)}; per-row log-likelihood y*z - softplus(z), z = bias + x.beta;
Laplace(0,1) prior on every coefficient (log prior = -sum|theta| + const).
Minibatch n = 500, SGLD via ``sgmcmcjax.samplers.build_sgld_sampler``.

SGMCMCJax's SGLD update is ``x + dt*g + sqrt(2*dt)*N(0,1)``, so its ``dt`` is
eps/2 in our convention (eps/2 * grad + N(0, eps)); we use eps = 5e-6.

How SGMCMCJax runs (read from the installed source, sgmcmcjax/samplers.py):
``sampler(key, Nsamples, params)`` is ``jit(..., static_argnums=(1,))`` around
``lax.scan`` over the whole chain, returning every sample.  Because Nsamples is
static, every new chain length triggers a recompile, so for the marginal cost
each chain length gets a warm-up call first and only later calls are timed.
The data arrays are closed over by the jitted function (constants in the
compiled program).  Minibatches come from ``random.choice`` (with replacement).
By default the sampler also has a tqdm progress bar implemented with
host_callback inside the scan; we pass ``pbar=False`` unless ``--pbar``.

Reported per N:
  (a) first call: compile + --iters iterations (block_until_ready), also the
      one-off build time of the sampler (mostly host->device copy of the data);
  (b) marginal us/iter = (median t(3*iters) - median t(iters)) / (2*iters),
      both chain lengths warmed up first, --repeats timed calls each
      (interleaved), plus plain repeat-call us/iter = median t(iters)/iters.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import jax
import jax.numpy as jnp
from jax import random

from sgmcmcjax.samplers import build_sgld_sampler

D = 54
N_CONT = 10  # covertype: 10 continuous, 4 wilderness one-hot, 40 soil one-hot
N_WILD = 4
N_SOIL = 40
BATCH = 500
EPS = 5e-6
DT = EPS / 2


def make_data(n_rows: int, seed: int = 0):
    """Covertype-shaped synthetic data: float32 X in [0,1], y in {0,1}."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n_rows, D), dtype=np.float32)
    X[:, :N_CONT] = rng.uniform(0.0, 1.0, size=(n_rows, N_CONT))
    rows = np.arange(n_rows)
    X[rows, N_CONT + rng.integers(0, N_WILD, size=n_rows)] = 1.0
    X[rows, N_CONT + N_WILD + rng.integers(0, N_SOIL, size=n_rows)] = 1.0
    beta_true = rng.normal(0.0, 1.0, size=D).astype(np.float32)
    bias_true = np.float32(-0.5)
    z = bias_true + X @ beta_true
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.uniform(size=n_rows) < p).astype(np.float32)
    return X, y


def loglikelihood(params, x, y):
    # per-datapoint; SGMCMCJax vmaps it over the minibatch
    z = params["bias"] + jnp.dot(x, params["beta"])
    return y * z - jax.nn.softplus(z)


def logprior(params):
    # Laplace(0,1) on every coefficient, up to a constant
    return -jnp.abs(params["bias"]) - jnp.sum(jnp.abs(params["beta"]))


def init_params():
    return {"bias": jnp.zeros((), jnp.float32), "beta": jnp.zeros((D,), jnp.float32)}


def timed_call(sampler, key, n_iters, params):
    t0 = time.perf_counter()
    out = sampler(key, n_iters, params)
    jax.block_until_ready(out)
    return time.perf_counter() - t0, out


def bench(n_rows: int, iters: int, repeats: int, pbar: bool):
    print(f"\n=== N = {n_rows:,} rows, d = {D}, batch = {BATCH}, iters = {iters:,} ===")
    X, y = make_data(n_rows)
    assert X.dtype == np.float32 and y.dtype == np.float32

    t0 = time.perf_counter()
    sampler = build_sgld_sampler(DT, loglikelihood, logprior, (X, y), BATCH, pbar=pbar)
    t_build = time.perf_counter() - t0
    print(f"build_sgld_sampler (incl. data -> device): {t_build:.3f} s")

    params = init_params()
    keys = iter(random.split(random.PRNGKey(0), 4 + 2 * repeats))

    # (a) first call: compile + iters iterations
    t_first, out = timed_call(sampler, next(keys), iters, params)
    print(f"(a) first call (compile + {iters:,} iters): {t_first:.3f} s")
    b = np.asarray(out["beta"][-1])
    assert np.all(np.isfinite(b)), "chain diverged"
    assert out["beta"].shape == (iters, D) and out["beta"].dtype == jnp.float32

    # warm-up of the long chain (new static Nsamples -> recompile)
    long_iters = 3 * iters
    t_first_long, _ = timed_call(sampler, next(keys), long_iters, params)
    print(f"    first call with {long_iters:,} iters (recompile + run): {t_first_long:.3f} s")

    # is there a recompile for a new n_iters? check the jit cache size
    try:
        n_cache = sampler._cache_size()
        print(f"    jit cache entries after 2 chain lengths: {n_cache} "
              f"({'recompiles per n_iters' if n_cache >= 2 else 'no recompile'})")
    except AttributeError:
        pass

    # (b) timed, interleaved, after warm-up
    t_short, t_long = [], []
    for _ in range(repeats):
        t_short.append(timed_call(sampler, next(keys), iters, params)[0])
        t_long.append(timed_call(sampler, next(keys), long_iters, params)[0])
    m_short = statistics.median(t_short)
    m_long = statistics.median(t_long)
    marginal_us = (m_long - m_short) / (long_iters - iters) * 1e6
    repeat_us = m_short / iters * 1e6
    fmt = lambda ts: ", ".join(f"{t:.3f}" for t in ts)
    print(f"    t({iters:,}) s: [{fmt(t_short)}]  median {m_short:.3f}")
    print(f"    t({long_iters:,}) s: [{fmt(t_long)}]  median {m_long:.3f}")
    print(f"(b) marginal: {marginal_us:.2f} us/iter")
    print(f"    repeat-call {iters:,} iters: {m_short:.3f} s = {repeat_us:.2f} us/iter")
    print(f"    implied fixed overhead per call: {(m_short - marginal_us * 1e-6 * iters) * 1e3:.1f} ms")
    print(f"    compile estimate (first call - repeat call): {t_first - m_short:.3f} s")
    return dict(n_rows=n_rows, t_build=t_build, t_first=t_first, t_first_long=t_first_long,
                marginal_us=marginal_us, repeat_us=repeat_us)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-rows", type=str, default="581012,10000",
                    help="comma-separated list of dataset sizes (default: 581012,10000)")
    ap.add_argument("--iters", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pbar", action="store_true",
                    help="keep SGMCMCJax's default host_callback progress bar")
    args = ap.parse_args()

    import sgmcmcjax  # noqa: F401
    from importlib.metadata import version
    print(f"python {platform.python_version()}, jax {jax.__version__}, "
          f"jaxlib {version('jaxlib')}, sgmcmcjax {version('sgmcmcjax')}, "
          f"numpy {np.__version__}, devices {jax.devices()}, pbar={args.pbar}")

    results = [bench(int(n), args.iters, args.repeats, args.pbar)
               for n in args.n_rows.split(",")]
    print("\nsummary:")
    for r in results:
        print(f"  N={r['n_rows']:>9,}: first call {r['t_first']:.2f} s, "
              f"marginal {r['marginal_us']:.2f} us/iter, repeat-call {r['repeat_us']:.2f} us/iter")


if __name__ == "__main__":
    main()
