"""What a new sampler's compilation costs in graph mode and under XLA (issue 11).

``sgld(...)`` on the covertype-shaped logistic regression (N = ``--rows``, n = 500) with
``--iters`` iterations, twice in one process (the second call builds a new sampler, so it
compiles again but pays no process warm-up); each compiled call of the run is timed. Run it once
per mode:

    SGMCMC_XLA=0 python benchmarks/first_call_modes.py [--rows 581012] [--iters 1000] [--replace]
    SGMCMC_XLA=1 python benchmarks/first_call_modes.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402
from sgmcmc.run.sampler import Sampler  # noqa: E402


def timing(method: str):
    original = getattr(Sampler, method)

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        result = original(self, *args, **kwargs)
        print(f"    {method}{args}: {time.perf_counter() - t:.2f} s")
        return result

    setattr(Sampler, method, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--iters", type=int, default=1_000)
    parser.add_argument("--replace", action="store_true", help="minibatch_replace=True")
    args = parser.parse_args()
    data = make_data(args.rows)
    for method in ("sample_groups", "advance", "estimate_for_storage", "init_aux"):
        timing(method)
    for name in ("trial_evaluation",):  # the user's functions, run eagerly once before compiling
        original = getattr(sgmcmc.checks, name)

        def timed(*a, _original=original, _name=name, **k):
            t = time.perf_counter()
            result = _original(*a, **k)
            print(f"    {_name}: {time.perf_counter() - t:.2f} s")
            return result

        setattr(sgmcmc.checks, name, timed)
    print(f"SGMCMC_XLA={os.environ.get('SGMCMC_XLA', 'auto')}, replace={args.replace}, N = {args.rows}, {args.iters} iterations, "
          f"load {os.getloadavg()[0]:.2f}")
    for call in ("first", "second"):
        t = time.perf_counter()
        sgmcmc.sgld(log_lik, data, start(), 1e-5, log_prior=log_prior, minibatch_size=500, seed=3,
                    n_iters=args.iters, verbose=False, minibatch_replace=args.replace)
        print(f"  {call} sgld call: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
