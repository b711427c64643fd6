"""The floor under the step API on this machine: what one eager TensorFlow call costs.

Times (median-free mean of 2,000 calls each) a variable's ``.numpy()`` (what ``get_params`` does
per parameter), a call of a trivial compiled concrete function (an ``assign_add`` of 55 floats:
the least a ``sgmcmc_step`` can be), and the package's Grappler-options context manager that
wraps each of our calls. Compare the first two with the targets ``get_params`` ≤ 50 µs and
``sgmcmc_step`` ≤ 150 µs.

    python benchmarks/eager_floor.py
"""

from __future__ import annotations

import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from sgmcmc.graph_options import package_call_options  # noqa: E402


def _enter_exit() -> None:
    with package_call_options():
        pass


def main() -> None:
    n = 2_000
    variable = tf.Variable(tf.zeros(55))
    trivial = tf.function(lambda: variable.assign_add(tf.ones(55))).get_concrete_function()
    trivial()
    for label, fn in (("package_call_options enter/exit", _enter_exit), ("variable.numpy()", variable.numpy),
                      ("trivial concrete function call", trivial)):
        print(f"{label:<34} {timeit.timeit(fn, number=n) / n * 1e6:8.1f} µs")


if __name__ == "__main__":
    main()
