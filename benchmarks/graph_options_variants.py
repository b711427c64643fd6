"""Per-iteration cost of the compiled chain under three Grappler settings, in one process.

    python benchmarks/graph_options_variants.py

Variants (sgmcmc/graph_options.py): Grappler's defaults; the memory optimizer off (the crash
fix); the memory and arithmetic optimizers off (what the package uses: the arithmetic
optimizer's reassociation of adds rounded the chunk loop and the step function differently in
float64, breaking the two APIs' bit-identity). Covertype-shaped logistic regression, SGLD,
n = 500, thin = 1 (the default variant crashes with thin > 1). Marginal µs/iteration =
(time of 3k − time of k iterations) / 2k after warm-up; variants alternate, medians of rounds.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from tensorflow.core.protobuf import rewriter_config_pb2  # noqa: E402

import sgmcmc  # noqa: E402
import sgmcmc.graph_options as graph_options  # noqa: E402
import logreg_model  # noqa: E402

RC = rewriter_config_pb2.RewriterConfig
VARIANTS = {
    "grappler defaults": {},
    "memory optimizer off": {"memory_optimization": RC.NO_MEM_OPT},
    "memory + arithmetic off (package)": {"memory_optimization": RC.NO_MEM_OPT, "arithmetic_optimization": RC.OFF},
}


def configure(settings: dict) -> None:
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.eager import context

    def options():
        base = context.context().function_call_options
        config = config_pb2.ConfigProto()
        config.ParseFromString(base.config_proto_serialized)
        for name, value in settings.items():
            setattr(config.graph_options.rewrite_options, name, value)
        return context.FunctionCallOptions(executor_type=base.executor_type, config_proto=config)

    graph_options._options = options


def main(k: int = 1000, rounds: int = 3) -> None:
    data = logreg_model.make_data(581_012)
    log_lik, log_prior, params = logreg_model.log_lik, logreg_model.log_prior, logreg_model.start()
    samplers = {}
    for name, settings in VARIANTS.items():
        configure(settings)
        s = sgmcmc.sgld_setup(log_lik, data, params, 5e-6, log_prior, 500, seed=1)
        sgmcmc.sample_chain(s, 500, verbose=False)
        samplers[name] = s
    times = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, settings in VARIANTS.items():
            configure(settings)
            s = samplers[name]
            t0 = time.perf_counter()
            sgmcmc.sample_chain(s, k, verbose=False)
            t1 = time.perf_counter()
            sgmcmc.sample_chain(s, 3 * k, verbose=False)
            t2 = time.perf_counter()
            times[name].append(((t2 - t1) - (t1 - t0)) / (2 * k) * 1e6)
    base = statistics.median(times["grappler defaults"])
    for name, values in times.items():
        m = statistics.median(values)
        print(f"{name:38s} {m:7.1f} us/it  (x{m / base:.2f})  rounds: {', '.join(f'{v:.0f}' for v in values)}")


if __name__ == "__main__":
    main()
