"""Op-by-op profile of one compiled sampling chunk (issue 11, item 1), with ``tf.profiler``.

SGLD on the covertype-shaped logistic regression (d = 54 + bias, n = 500, Laplace prior,
float32): a prepared, warmed-up sampler runs one ``sample_groups`` call of ``--iters``
iterations under the profiler; the framework-op statistics are grouped by op type and divided
by the iteration count, so each line is "per iteration": how many kernels of that type ran, and
their self time in µs. The total count is the number of op dispatches the TF executor makes per
iteration (the cost the issue attributes the gap to SGMCMCJax to).

    python benchmarks/profile_ops.py [--rows 581012] [--chains 1] [--iters 2000] [--top 25]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
from collections import defaultdict

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import tensorflow as tf  # noqa: E402
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as profiler_plugin  # noqa: E402

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402


def op_table(xplane_path: str) -> list[dict]:
    """The profiler's framework-op statistics as a list of dicts (one per op instance)."""
    raw, ok = profiler_plugin.xspace_to_tools_data([xplane_path], "framework_op_stats", {})
    if not ok:
        raise RuntimeError("the profiler could not convert its trace")
    table = json.loads(raw)[0]
    names = [c["id"] for c in table["cols"]]
    return [dict(zip(names, (cell["v"] if cell else None for cell in row["c"]))) for row in table["rows"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--iters", type=int, default=2_000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    sampler = sgmcmc.sgld_setup(
        log_lik, make_data(args.rows), start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=1,
        n_chains=args.chains,
    )
    sgmcmc.init_sess(sampler, verbose=False)
    sampler.sample_groups(args.iters, 1)  # compile and warm up
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        sampler.sample_groups(args.iters, 1)
        tf.profiler.experimental.stop()
        rows = op_table(sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1])

    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        if row.get("host_or_device") != "Host" or row["type"] in ("IDLE",):
            continue
        by_type[row["type"]][0] += row["occurrences"] / args.iters
        by_type[row["type"]][1] += row["total_self_time"] / args.iters
    ordered = sorted(by_type.items(), key=lambda kv: -kv[1][1])
    n_ops = sum(v[0] for _, v in ordered)
    total = sum(v[1] for _, v in ordered)
    print(f"N = {args.rows}, K = {args.chains}, {args.iters} iterations profiled")
    print(f"{'op type':<28}{'kernels/it':>11}{'self µs/it':>12}{'share':>8}")
    for op_type, (count, micros) in ordered[: args.top]:
        print(f"{op_type:<28}{count:>11.1f}{micros:>12.2f}{micros / total:>8.1%}")
    rest = ordered[args.top:]
    if rest:
        print(f"{'(' + str(len(rest)) + ' other types)':<28}{sum(v[0] for _, v in rest):>11.1f}"
              f"{sum(v[1] for _, v in rest):>12.2f}")
    print(f"{'total':<28}{n_ops:>11.1f}{total:>12.2f}")


if __name__ == "__main__":
    main()
