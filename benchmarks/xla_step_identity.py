"""Is the XLA-compiled chain the same from both APIs? (issue 11; a check, not a timing)

With the sampler's chunk functions compiled by ``jit_compile=True``:
(a) the step API's own step function, also under XLA, against the whole chain (``sgld(...)``):
    60 iterations of sgld, sghmc and sgldcv in float32 and float64 — the two are different XLA
    programs;
(b) 60 calls of the compiled ``advance`` program with n = 1 against one ``sample_groups(60)``
    call and three ``sample_groups(20)`` calls.
Prints whether the arrays are bit-identical and the largest difference.

    python benchmarks/xla_step_identity.py
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sgmcmc  # noqa: E402
from logreg_model import log_lik, log_prior, make_data, start  # noqa: E402
from sgmcmc.run.sampler import Sampler  # noqa: E402

_plain_step = Sampler.step


def _compiled(self, key, make):
    if key not in self._functions:
        self._functions[key] = tf.function(make, jit_compile=True)
    return self._functions[key]


def _xla_step(self):
    if self._compiled_step is None:
        self._compiled_step = tf.function(self._checked_step, jit_compile=True).get_concrete_function()
    return _plain_step(self)


def main() -> None:
    Sampler._compiled = _compiled
    Sampler.step = _xla_step
    data = make_data(20_000)
    common = dict(log_prior=log_prior, minibatch_size=100, seed=3)
    print("(a) XLA step function vs XLA whole chain, 60 iterations")
    for name, kw in [("sgld", {}), ("sghmc", {}), ("sgldcv", dict(opt_stepsize=1e-6, n_iters_opt=50))]:
        for dtype in (tf.float32, tf.float64):
            whole = getattr(sgmcmc, name)(log_lik, data, start(), 1e-5, n_iters=60, verbose=False, dtype=dtype,
                                          **common, **kw)["beta"]
            sampler = getattr(sgmcmc, f"{name}_setup")(log_lik, data, start(), 1e-5, dtype=dtype, **common, **kw)
            sess = sgmcmc.init_sess(sampler, verbose=False)
            steps = []
            for _ in range(60):
                sgmcmc.sgmcmc_step(sampler, sess)
                steps.append(sgmcmc.get_params(sampler, sess)["beta"])
            steps = np.stack(steps)
            print(f"  {name:7s} {dtype.name}: identical {np.array_equal(whole, steps)}, "
                  f"max difference {np.abs(whole - steps).max():.3g}")
    print("(b) XLA advance(1) x 60 and sample_groups(20) x 3 vs sample_groups(60)")
    for name in ("sgld", "sghmc"):
        for dtype in (tf.float32, tf.float64):
            sampler = getattr(sgmcmc, f"{name}_setup")(log_lik, data, start(), 1e-5, dtype=dtype, **common)
            sgmcmc.init_sess(sampler, verbose=False)
            one_call = sampler.sample_groups(60, 1).samples["beta"][:, 0]
            sampler.reset()
            sampler.init_aux()
            stepped = []
            for _ in range(60):
                sampler.advance(1)
                stepped.append(sampler.params["beta"].numpy())
            stepped = np.stack(stepped)
            sampler.reset()
            sampler.init_aux()
            chunked = np.concatenate([sampler.sample_groups(20, 1).samples["beta"][:, 0] for _ in range(3)])
            print(f"  {name:7s} {dtype.name}: advance(1) identical {np.array_equal(one_call, stepped)}, "
                  f"3 chunks identical {np.array_equal(one_call, chunked)}")


if __name__ == "__main__":
    main()
