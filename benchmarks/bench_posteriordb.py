"""``sgmcmc.sample`` on Stan's posteriordb against the reference draws, with TFP's NUTS as the cost
anchor, and a 10^6-row logistic regression where minibatches must win (issue 43, targets).

posteriordb is NOT part of this repository: ``--posteriordb`` names a checkout of
github.com/stan-dev/posteriordb (a work tree, or a bare git directory, read with ``git show HEAD:``).
Read at run time: posterior_database/data/data/<data>.json.zip and
posterior_database/reference_posteriors/draws/draws/<posterior>.json.zip (10 chains x 1,000 draws).

Posteriors (the model code is posterior_database/models/stan/<model>.stan, written here in TF):
  earnings  earnings-logearn_height_male  log(earn) ~ N(b1 + b2 height + b3 male, sigma); flat priors
  sblrc     sblrc-blr                     y ~ N(X beta, sigma), beta ~ N(0, 10), sigma ~ N+(0, 10)
  nes2000   nes2000-nes                   partyid7 ~ N(9 coefficients, sigma); flat priors
  diamonds  diamonds-diamonds             brms: Y ~ N(Intercept + Xc b, sigma), b ~ N(0, 1),
                                          Intercept ~ t3(8, 10), sigma ~ t3+(0, 10); Xc = centred X[:, 2:]
  mixture   low_dim_gauss_mix-low_dim_gauss_mix   y ~ theta N(mu1, s1) + (1 - theta) N(mu2, s2),
                                          mu ordered ~ N(0, 2), s ~ N+(0, 2), theta ~ Beta(5, 5)
Constrained parameters as Stan: sigma > 0 through Exp (Stan's log transform), theta through
Sigmoid (logit), ordered mu through Ascending (Stan's ordered transform); the prior is on the
constrained scale and the log-Jacobian is added (a flat prior is flat on the constrained scale,
as in Stan). Starts: every unconstrained parameter 0, positive ones 1, theta 0.5, ordered mu
(0, 1) (= the unconstrained zero of Stan's ordered transform). Nothing else is chosen: ``sample``
runs with its defaults (float32, 4 chains, ESS 400, R-hat 1.01, minibatch min(N, 500)) and a
guard ``max_time`` (``--guard``, 300 s; the target is 180 s: a run that reaches the guard fails).

Accuracy per parameter: |mean - ref mean| / ref sd (target <= 0.3) and sd / ref sd (target in
[0.8, 1.25]). For ``sample``: wall seconds (target <= 180), iterations per chain, kappa, stopped_by.

NUTS (``--nuts``): tfp.mcmc.NoUTurnSampler (max tree depth 10, identity metric) inside
DualAveragingStepSizeAdaptation (target acceptance 0.8, adaptation over 80 % of the warm-up), 4
chains from the same starts, 1,000 warm-up + 1,000 draws, full data in float64, run in chunks of
100 iterations each in ``tf.function(jit_compile=True)`` (falls back to graph mode if XLA
refuses); ``--nuts-cap`` seconds per posterior (a run stopped by the cap is marked, and its
ESS/s extrapolated from the draws it has). Reported: seconds (compile included), leapfrog steps,
min bulk ESS, ESS/s, and the same accuracy.

logreg1m (``--posteriors logreg1m``): synthetic logistic regression, N = 10^6 rows, d = 10
(intercept + 9 standard-normal columns), prior N(0, 10^2); ``sample`` with its defaults vs NUTS on
the full data for ``--logreg-warmup`` (200) + ``--logreg-draws`` (200) iterations, whose time to
400 effective draws is extrapolated: warm-up seconds + 400 / (min bulk ESS per draw-phase second).

Usage: python benchmarks/bench_posteriordb.py --posteriordb DIR [--posteriors earnings,sblrc,...]
       [--no-sample] [--nuts] [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import sgmcmc  # noqa: E402

tfb, tfd = tfp.bijectors, tfp.distributions
LOG_2PI = float(np.log(2 * np.pi))


# ---------------------------------------------------------------- posteriordb access (read-only)

class PosteriorDB:
    def __init__(self, where: str):
        p = Path(where)
        if (p / "posterior_database").is_dir():
            self.root, self.git = p / "posterior_database", None
        elif (p / "HEAD").exists() and (p / "objects").is_dir():
            self.root, self.git = None, str(p)
        else:
            raise SystemExit(f"--posteriordb {where}: neither a posteriordb work tree nor a git directory")

    def read(self, rel: str) -> bytes:
        if self.git is None:
            return (self.root / rel).read_bytes()
        return subprocess.run(["git", "--git-dir", self.git, "show", f"HEAD:posterior_database/{rel}"],
                              check=True, capture_output=True).stdout

    def _zipped(self, rel: str):
        z = zipfile.ZipFile(io.BytesIO(self.read(rel)))
        return json.loads(z.read(z.namelist()[0]))

    def data(self, name: str) -> dict:
        return self._zipped(f"data/data/{name}.json.zip")

    def reference(self, posterior: str) -> dict[str, np.ndarray]:
        chains = self._zipped(f"reference_posteriors/draws/draws/{posterior}.json.zip")
        return {k: np.array([c[k] for c in chains], dtype=np.float64) for k in chains[0]}  # (chains, draws)


# ---------------------------------------------------------------- models (Stan code, in TF)

def _normal_lpdf_sum(y, mu, sigma):
    z = (y - mu) / sigma
    n = tf.cast(tf.size(y), y.dtype)
    return -0.5 * tf.reduce_sum(z * z) - n * tf.math.log(sigma) - 0.5 * n * LOG_2PI


def _c(x, like):
    return tf.cast(x, like.dtype)


def earnings(db):
    d = db.data("earnings")
    data = {"log_earn": np.log(np.array(d["earn"], float)), "height": np.array(d["height"], float),
            "male": np.array(d["male"], float)}

    def log_lik(p, x):
        b = p["beta"]
        mu = b[0] + b[1] * x["height"] + b[2] * x["male"]
        return _normal_lpdf_sum(x["log_earn"], mu, p["sigma"])

    start = {"beta": np.zeros(3), "sigma": np.array(1.0)}
    return dict(posterior="earnings-logearn_height_male", data=data, log_lik=log_lik, log_prior=None,
                start=start, constraints={"sigma": tfb.Exp}, names={"beta": "beta", "sigma": "sigma"})


def sblrc(db):
    d = db.data("sblrc")
    data = {"X": np.array(d["X"], float), "y": np.array(d["y"], float)}

    def log_lik(p, x):
        return _normal_lpdf_sum(x["y"], tf.linalg.matvec(x["X"], p["beta"]), p["sigma"])

    def log_prior(p):
        return (-0.5 * tf.reduce_sum(tf.square(p["beta"] / _c(10.0, p["beta"])))
                - 0.5 * tf.square(p["sigma"] / _c(10.0, p["sigma"])))

    start = {"beta": np.zeros(int(d["D"])), "sigma": np.array(1.0)}
    return dict(posterior="sblrc-blr", data=data, log_lik=log_lik, log_prior=log_prior, start=start,
                constraints={"sigma": tfb.Exp}, names={"beta": "beta", "sigma": "sigma"})


def nes2000(db):
    d = db.data("nes2000")
    age = np.array(d["age_discrete"])
    cols = [d["real_ideo"], d["race_adj"], age == 2, age == 3, age == 4, d["educ1"], d["gender"], d["income"]]
    X = np.column_stack([np.ones(len(age))] + [np.asarray(c, float) for c in cols])
    data = {"X": X, "y": np.array(d["partyid7"], float)}

    def log_lik(p, x):
        return _normal_lpdf_sum(x["y"], tf.linalg.matvec(x["X"], p["beta"]), p["sigma"])

    start = {"beta": np.zeros(9), "sigma": np.array(1.0)}
    return dict(posterior="nes2000-nes", data=data, log_lik=log_lik, log_prior=None, start=start,
                constraints={"sigma": tfb.Exp}, names={"beta": "beta", "sigma": "sigma"})


def diamonds(db):
    d = db.data("diamonds")
    X = np.array(d["X"], float)
    Xc = X[:, 1:] - X[:, 1:].mean(0)
    data = {"Xc": Xc, "Y": np.array(d["Y"], float)}

    def log_lik(p, x):
        return _normal_lpdf_sum(x["Y"], p["Intercept"] + tf.linalg.matvec(x["Xc"], p["b"]), p["sigma"])

    def log_prior(p):
        b, i, s = p["b"], p["Intercept"], p["sigma"]
        return (-0.5 * tf.reduce_sum(b * b)
                + tfd.StudentT(_c(3.0, i), _c(8.0, i), _c(10.0, i)).log_prob(i)
                + tfd.StudentT(_c(3.0, s), _c(0.0, s), _c(10.0, s)).log_prob(s))

    start = {"b": np.zeros(Xc.shape[1]), "Intercept": np.array(0.0), "sigma": np.array(1.0)}
    return dict(posterior="diamonds-diamonds", data=data, log_lik=log_lik, log_prior=log_prior, start=start,
                constraints={"sigma": tfb.Exp}, names={"b": "b", "Intercept": "Intercept", "sigma": "sigma"})


def mixture(db):
    d = db.data("low_dim_gauss_mix")
    data = {"y": np.array(d["y"], float)}

    def log_lik(p, x):
        y = x["y"][:, None]
        mu, s, th = p["mu"], p["sigma"], p["theta"]
        comp = -0.5 * tf.square((y - mu) / s) - tf.math.log(s) - 0.5 * LOG_2PI  # (n, 2)
        w = tf.math.log(tf.stack([th, 1.0 - th]))
        return tf.reduce_sum(tf.reduce_logsumexp(comp + w, axis=1))

    def log_prior(p):
        mu, s, th = p["mu"], p["sigma"], p["theta"]
        return (-0.5 * tf.reduce_sum(tf.square(mu / 2.0)) - 0.5 * tf.reduce_sum(tf.square(s / 2.0))
                + 4.0 * tf.math.log(th) + 4.0 * tf.math.log1p(-th))

    start = {"mu": np.array([0.0, 1.0]), "sigma": np.ones(2), "theta": np.array(0.5)}
    return dict(posterior="low_dim_gauss_mix-low_dim_gauss_mix", data=data, log_lik=log_lik, log_prior=log_prior,
                start=start, constraints={"mu": tfb.Ascending, "sigma": tfb.Exp, "theta": tfb.Sigmoid},
                names={"mu": "mu", "sigma": "sigma", "theta": "theta"})


def logreg1m(db=None, n=1_000_000, d=10, seed=43):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    beta = rng.normal(0, 0.5, d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    data = {"X": X, "y": y}

    def log_lik(p, x):
        eta = tf.linalg.matvec(x["X"], p["beta"])
        return tf.reduce_sum(x["y"] * eta - tf.math.softplus(eta))

    def log_prior(p):
        return -0.5 * tf.reduce_sum(tf.square(p["beta"] / _c(10.0, p["beta"])))

    def log_post_batch(betas, x):
        """NUTS's target for (chains, d) at once (a matrix product: vectorized_map over 10^6 rows
        made XLA constant-fold for minutes)."""
        eta = tf.linalg.matmul(x["X"], betas, transpose_b=True)  # (N, chains)
        return (tf.reduce_sum(x["y"][:, None] * eta - tf.math.softplus(eta), axis=0)
                - 0.5 * tf.reduce_sum(tf.square(betas / _c(10.0, betas)), axis=1))

    return dict(posterior=None, data=data, log_lik=log_lik, log_prior=log_prior, start={"beta": np.zeros(d)},
                constraints={}, names={"beta": "beta"}, beta_true=beta, log_post_batch=log_post_batch)


MODELS = {"earnings": earnings, "sblrc": sblrc, "nes2000": nes2000, "diamonds": diamonds, "mixture": mixture,
          "logreg1m": logreg1m}


def element_names(spec) -> list[str]:
    out = []
    for k, v in spec["start"].items():
        v = np.asarray(v)
        out += [spec["names"][k]] if v.ndim == 0 else [f"{spec['names'][k]}[{i + 1}]" for i in range(v.size)]
    return out


def flat_draws(draws: dict[str, np.ndarray], spec) -> np.ndarray:
    """(chains, draws, elements) in element_names order."""
    parts = []
    for k, v in spec["start"].items():
        a = np.asarray(draws[k], float)
        parts.append(a.reshape(a.shape[0], a.shape[1], -1))
    return np.concatenate(parts, axis=2)


def accuracy(draws: np.ndarray, names: list[str], ref: dict[str, np.ndarray] | None) -> dict:
    pooled = draws.reshape(-1, draws.shape[2])
    mean, sd = pooled.mean(0), pooled.std(0, ddof=1)
    ess = np.array([float(az.ess(draws[:, :, i], method="bulk")) for i in range(draws.shape[2])])
    rows = []
    for i, n in enumerate(names):
        row = {"element": n, "mean": mean[i], "sd": sd[i], "ess_bulk": ess[i]}
        if ref is not None and n in ref:
            rm, rs = ref[n].mean(), ref[n].std(ddof=1)
            row.update(ref_mean=rm, ref_sd=rs, z=abs(mean[i] - rm) / rs, sd_ratio=sd[i] / rs)
        rows.append(row)
    out = {"rows": rows, "min_ess_bulk": float(ess.min())}
    if ref is not None:
        z = np.array([r["z"] for r in rows])
        q = np.array([r["sd_ratio"] for r in rows])
        out.update(max_z=float(z.max()), worst_z=rows[int(z.argmax())]["element"], sd_ratio_min=float(q.min()),
                   sd_ratio_max=float(q.max()), worst_sd=rows[int(np.abs(np.log(q)).argmax())]["element"],
                   ok=bool(z.max() <= 0.3 and q.min() >= 0.8 and q.max() <= 1.25))
    return out


# ---------------------------------------------------------------- sgmcmc.sample

def run_sample(spec, ref, guard: float, seed: int) -> dict:
    start = {k: np.asarray(v, np.float32) for k, v in spec["start"].items()}
    data = {k: np.asarray(v, np.float32) for k, v in spec["data"].items()}
    constraints = {k: b() for k, b in spec["constraints"].items()} or None
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sgmcmc.sample(spec["log_lik"], data, start, spec["log_prior"], constraints=constraints,
                            max_time=guard, seed=seed, verbose=False)
    seconds = time.perf_counter() - t
    rep = out.report
    draws = flat_draws(out.by_chain(), spec)
    acc = accuracy(draws, element_names(spec), ref)
    table = out.summary()
    acc["ess_table"] = {str(i): {c: float(table.loc[i, c]) for c in ("ess_bulk", "ess_tail", "r_hat")}
                        for i in table.index}
    return dict(acc, seconds=seconds, iterations=rep.iterations, burn_in=rep.burn_in, thin=rep.thin,
                kappa=rep.condition_number, stopped_by=rep.stopped_by, converged=rep.converged,
                worst_ess=rep.worst_ess, worst_rhat=rep.worst_rhat, stepsize=rep.stepsize,
                adaptations=rep.adaptations, minibatch=rep.minibatch_size, report_seconds=rep.seconds,
                preconditioner=rep.preconditioner, n_rows=rep.n_rows,
                warnings=[f"{w.category.__name__}: {str(w.message)[:300]}" for w in caught])


# ---------------------------------------------------------------- NUTS (TFP) on the full data

def run_nuts(spec, ref, warmup: int, draws: int, cap: float, seed: int, chunk: int = 100, n_chains: int = 4) -> dict:
    dt = tf.float64
    keys = list(spec["start"])
    shapes = {k: np.shape(spec["start"][k]) for k in keys}
    sizes = {k: int(np.prod(shapes[k])) for k in keys}
    bij = {k: b() for k, b in spec["constraints"].items()}
    # variables, not constants: XLA would otherwise fold the whole data set into the program
    data = {k: tf.Variable(np.asarray(v, np.float64), trainable=False) for k, v in spec["data"].items()}
    xi0 = np.concatenate([np.ravel(np.asarray(bij[k].inverse(np.asarray(spec["start"][k], float)))
                                   if k in bij else np.asarray(spec["start"][k], float)) for k in keys])
    d = xi0.size

    def split(x):
        out, i = {}, 0
        for k in keys:
            out[k] = tf.reshape(x[i:i + sizes[k]], shapes[k])
            i += sizes[k]
        return out

    def single(x):
        xi = split(x)
        p = {k: bij[k].forward(v) if k in bij else v for k, v in xi.items()}
        lp = spec["log_lik"](p, data)
        if spec["log_prior"] is not None:
            lp += spec["log_prior"](p)
        for k, b in bij.items():
            lp += b.forward_log_det_jacobian(xi[k], event_ndims=len(shapes[k]))
        return lp

    def target(x):
        if "log_post_batch" in spec:
            return spec["log_post_batch"](x, data)
        return tf.vectorized_map(single, x)

    n_adapt = int(0.8 * warmup)
    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        tfp.mcmc.NoUTurnSampler(target, step_size=tf.constant(0.1, dt), max_tree_depth=10),
        num_adaptation_steps=n_adapt, target_accept_prob=tf.constant(0.8, dt))

    def run_chunk(state, pkr, s):
        return tfp.mcmc.sample_chain(
            chunk, state, previous_kernel_results=pkr, kernel=kernel, seed=s, return_final_kernel_results=True,
            trace_fn=lambda _, kr: (kr.inner_results.leapfrogs_taken, kr.inner_results.has_divergence,
                                    kr.new_step_size))

    state = tf.constant(np.tile(xi0, (n_chains, 1)), dt)
    t0 = time.perf_counter()
    try:
        fn = tf.function(run_chunk, jit_compile=True)
        pkr = tf.function(kernel.bootstrap_results, jit_compile=True)(state)
        res = fn(state, pkr, tf.constant([seed, 0], tf.int32))
        mode = "XLA"
        first = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        print(f"  NUTS: XLA refused ({type(e).__name__}: {str(e)[:120]}); graph mode", file=sys.stderr)
        fn = tf.function(run_chunk)
        pkr = kernel.bootstrap_results(state)
        res = fn(state, pkr, tf.constant([seed, 0], tf.int32))
        mode = "graph"
        first = time.perf_counter() - t0
    total = warmup + draws
    chunks, done, stopped = [res], chunk, "done"
    t_warm = None
    while done < total:
        if done >= warmup and t_warm is None:
            t_warm = time.perf_counter() - t0
        if time.perf_counter() - t0 > cap:
            stopped = "cap"
            break
        last = chunks[-1]
        res = fn(last.all_states[-1], last.final_kernel_results, tf.constant([seed, done], tf.int32))
        chunks.append(res)
        done += chunk
    if t_warm is None:
        t_warm = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    states = np.concatenate([c.all_states.numpy() for c in chunks], 0)  # (iters, chains, d)
    leap = np.concatenate([c.trace[0].numpy() for c in chunks], 0)
    div = np.concatenate([c.trace[1].numpy() for c in chunks], 0)
    step = float(np.ravel(chunks[-1].trace[2].numpy())[-1])
    kept = states[warmup:]
    out = dict(mode=mode, iterations=int(states.shape[0]), warmup=warmup, stopped_by=stopped, seconds=seconds,
               first_chunk_seconds_with_compile=first, warmup_seconds=t_warm, leapfrogs_per_chain=float(leap.sum(0).mean()),
               mean_leapfrogs_per_iter=float(leap.mean()), divergences_after_warmup=int(div[warmup:].sum()),
               step_size=step, d=d)
    if kept.shape[0] < 20:
        out["note"] = "warm-up not finished within the cap"
        return out
    # to the user's scale
    xs = tf.constant(kept.reshape(-1, d), dt)
    user = {}
    i = 0
    for k in keys:
        v = xs[:, i:i + sizes[k]]
        v = tf.reshape(v, (-1,) + shapes[k])
        user[k] = (bij[k].forward(v) if k in bij else v).numpy().reshape((kept.shape[0], n_chains) + shapes[k]).swapaxes(0, 1)
        i += sizes[k]
    acc = accuracy(flat_draws(user, spec), element_names(spec), ref)
    draw_seconds = max(seconds - t_warm, 1e-9)
    out.update(acc, ess_per_second=acc["min_ess_bulk"] / seconds, draws_kept=int(kept.shape[0]),
               seconds_to_400_extrapolated=t_warm + 400.0 / (acc["min_ess_bulk"] / draw_seconds))
    return out


# ---------------------------------------------------------------- tables

def fmt_sample(name, r):
    if "max_z" in r:
        acc = (f"{r['max_z']:.2f} ({r['worst_z']}) | {r['sd_ratio_min']:.2f}–{r['sd_ratio_max']:.2f} ({r['worst_sd']}) | "
               f"{'yes' if r['ok'] else '**no**'}")
    else:
        acc = "– | – | –"
    return (f"| {name} | {r['n_rows']:,} | {len(r['rows'])} | {acc} | {r['seconds']:.0f} | {r['iterations']:,} | "
            f"{r['burn_in']:,} | {r['kappa']:.3g} | {r['worst_ess']:.0f} / {r['worst_rhat']:.3f} | {r['stopped_by']} |")


def fmt_nuts(name, r):
    if "min_ess_bulk" not in r:
        return f"| {name} | {r['mode']} | {r['iterations']:,} ({r['stopped_by']}) | – | – | – | {r['seconds']:.0f} | – | {r.get('note', '')} |"
    acc = (f"{r['max_z']:.2f} ({r['worst_z']}) | {r['sd_ratio_min']:.2f}–{r['sd_ratio_max']:.2f}"
           if "max_z" in r else "– | –")
    return (f"| {name} | {r['mode']} | {r['iterations']:,} ({r['stopped_by']}) | {r['mean_leapfrogs_per_iter']:.0f} | "
            f"{acc} | {r['seconds']:.0f} | {r['min_ess_bulk']:.0f} | {r['ess_per_second']:.2f}; to 400: "
            f"{r['seconds_to_400_extrapolated']:.0f} s (div. {r['divergences_after_warmup']}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--posteriordb", required=True, help="posteriordb work tree or git directory")
    ap.add_argument("--posteriors", default="earnings,sblrc,nes2000,diamonds,mixture")
    ap.add_argument("--no-sample", action="store_true")
    ap.add_argument("--nuts", action="store_true")
    ap.add_argument("--nuts-cap", type=float, default=600.0)
    ap.add_argument("--guard", type=float, default=300.0, help="sample's max_time (a guard; target 180 s)")
    ap.add_argument("--logreg-warmup", type=int, default=200)
    ap.add_argument("--logreg-draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    db = PosteriorDB(args.posteriordb)
    results = {}
    if args.json and Path(args.json).exists():
        results = json.loads(Path(args.json).read_text())
    for name in args.posteriors.split(","):
        spec = MODELS[name](db)
        ref = db.reference(spec["posterior"]) if spec["posterior"] else None
        res = results.setdefault(name, {})
        if not args.no_sample:
            print(f"{name}: sample ...", flush=True)
            r = run_sample(spec, ref, args.guard, args.seed)
            res["sample"] = r
            print(f"  {fmt_sample(name, r)}", flush=True)
            for row in r["rows"]:
                print(f"    {row['element']}: mean {row['mean']:.4g} sd {row['sd']:.4g}"
                      + (f" | z {row['z']:.2f} sd ratio {row['sd_ratio']:.3f}" if "z" in row else ""), flush=True)
            for w in r["warnings"]:
                print(f"    warning: {w}", flush=True)
        if args.nuts:
            print(f"{name}: NUTS ...", flush=True)
            if name == "logreg1m":
                r = run_nuts(spec, ref, args.logreg_warmup, args.logreg_draws, args.nuts_cap, args.seed, chunk=50)
                if "sample" in res:  # sample's accuracy against NUTS's draws (a short run: indicative)
                    nr = {row["element"]: row for row in r.get("rows", [])}
                    res["sample_vs_nuts"] = {
                        e: {"z": abs(row["mean"] - nr[e]["mean"]) / nr[e]["sd"], "sd_ratio": row["sd"] / nr[e]["sd"]}
                        for e, row in ((row["element"], row) for row in res["sample"]["rows"]) if e in nr}
            else:
                r = run_nuts(spec, ref, 1000, 1000, args.nuts_cap, args.seed)
            res["nuts"] = r
            print(f"  {fmt_nuts(name, r)}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, default=float, indent=1))
    print_table(results, "sample", fmt_sample, ["posterior", "N", "elements", "max \\|Δmean\\|/ref sd", "sd/ref sd",
                                                 "met", "seconds", "iterations/chain", "burn-in", "κ",
                                                 "worst ESS / R-hat", "stopped_by"])
    print_table(results, "nuts", fmt_nuts, ["posterior", "NUTS", "iterations", "leapfrogs/iter",
                                            "max \\|Δmean\\|/ref sd", "sd/ref sd", "seconds", "min bulk ESS", "ESS/s"])


def print_table(results: dict, key: str, fmt, columns: list[str]) -> None:
    """A markdown table: one row per posterior that has a ``key`` result, formatted by ``fmt``."""
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for name, res in results.items():
        if key in res:
            print(fmt(name, res[key]))


if __name__ == "__main__":
    main()
