"""How the package's compiled functions are run: Grappler's memory and arithmetic optimizers
are off for them.

Why: inside the chunk's ``while`` loop, Grappler's arithmetic optimizer turns a chain of adds
(e.g. θ + (ε/2)g + √ε ξ, or the sum of a user's gradient contributions) into an ``AddN``, and its
memory optimizer then rewrites that ``AddN`` into a ``TemporaryVariable`` + ``AssignAdd``
accumulator. The temporary of the loop's terminal iteration is created but never destroyed in the
per-call resource container, so the *next* call of the same function fails with
``AlreadyExistsError: … AddOpsRewrite_add_1/tmp_var …``. Whether the rewrite fires depends on the
optimizer's cost estimates (it appeared at N = 300,000 rows with a flat prior, not at 10^5), so a
user could hit it with any model. Disabling only the memory optimizer, only for our own calls,
removes the cause; its cost was within the measurements' noise (≤ 7% in one in-process
comparison, benchmarks/RESULTS.md) and it leaves the user's other
TensorFlow code untouched.

The arithmetic optimizer is off too because it reassociates chains of adds differently in the
chunk's loop and in the step function (e.g. θ + (ε/2)g + √ε ξ as ``AddN``), so the two APIs
rounded differently in float64 (7.8e-14 relative after 150 steps), breaking SPEC §4's
bit-for-bit guarantee (tests/test_graph_rewrite_crash.py::test_step_api_and_float64). Its cost
is measured in benchmarks/graph_options_variants.py.

TensorFlow has no public per-function switch for this, so :func:`package_call_options` swaps the
thread's function-call options (``tensorflow.python.eager.context``) for the duration of a call.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

_OPTIONS: dict[bytes, context.FunctionCallOptions] = {}


def _options() -> context.FunctionCallOptions:
    ctx = context.context()
    base = ctx.function_call_options
    key = base.config_proto_serialized
    if key not in _OPTIONS:
        config = config_pb2.ConfigProto()
        config.ParseFromString(key)
        config.graph_options.rewrite_options.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
        config.graph_options.rewrite_options.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
        _OPTIONS[key] = context.FunctionCallOptions(executor_type=base.executor_type, config_proto=config)
    return _OPTIONS[key]


@contextlib.contextmanager
def package_call_options() -> Iterator[None]:
    """Run the enclosed calls of compiled functions with Grappler's memory and arithmetic
    optimizers off."""
    ctx = context.context()
    previous = ctx.function_call_options
    ctx.function_call_options = _options()
    try:
        yield
    finally:
        ctx.function_call_options = previous


def own_function(fn: Callable | None = None, **options: Any) -> Any:
    """``tf.function(fn, **options)`` whose retracing statistics belong to this object alone
    (usable as ``@own_function`` or ``@own_function(reduce_retracing=True)``).

    Why (issue 22.4): TensorFlow's frequent-tracing detector keys a ``tf.function``'s call
    statistics by its Python function's *code object* (``_get_key_for_call_stats`` follows
    ``__wrapped__`` and ``__func__`` to ``__code__``). Every sampler and estimator compiles its own
    functions — closures or bound methods over its own variables and model, so each must be traced
    once for that object — and they all share a few code objects: from the fifth sampler made in
    a process on, TensorFlow logged "5 out of the last 5 calls to … triggered tf.function
    retracing" (up to twice per code object) although no function had retraced. The Python
    function is wrapped in a :func:`functools.partial`, which has no ``__code__``, so the key is
    the wrapper, one per object; a real retrace of one object's function (changing shapes, Python
    numbers as arguments) is still reported.
    """
    if fn is None:
        return lambda f: own_function(f, **options)
    wrapper = functools.partial(fn)
    wrapper.__name__ = getattr(fn, "__name__", "function")  # the graph's name; adds no __wrapped__
    if "autograph" in options:
        return tf.function(wrapper, **options)
    return AutographIfNeeded(wrapper, options)


class AutographIfNeeded:
    """A ``tf.function`` traced without AutoGraph while the Python code allows it, with AutoGraph
    from the first call whose trace does not (the default of :func:`own_function`).

    Why: AutoGraph converts every Python function a trace calls — a user's ``log_lik``, the TFP
    distributions and Keras layers under it, the package's own code — before tracing it. That
    conversion was most of a process's first call: ``sgld`` on a logistic regression (N =
    10^5, 10^3 iterations, the stepsize check included) 5.4–6.4 s with it, 2.0–2.6 s without,
    the same draws (benchmarks/RESULTS.md). Code without tensor-dependent Python control flow traces to the same
    graph either way (the 61 chain fingerprints are unchanged). Code with it — ``if``, ``while``,
    ``assert``, ``and``/``or`` on a tensor, ``for`` over a tensor, ``range(tensor)`` — cannot be
    traced without AutoGraph: TensorFlow raises while tracing, before anything runs, and this
    object then traces with AutoGraph for that call and every later one (a genuine error in
    the code surfaces from that second trace). An error while running (``tf.errors.OpError``)
    is raised as it is."""

    def __init__(self, fn: Callable, options: dict[str, Any]):
        self.plain = tf.function(fn, autograph=False, **options)
        self._fn, self._options = fn, options
        self.converted: Any = None

    @property
    def active(self) -> Any:
        """The ``tf.function`` calls go to."""
        return self.plain if self.converted is None else self.converted

    def _with_fallback(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.converted is None:
            try:
                return getattr(self.plain, method)(*args, **kwargs)
            except tf.errors.OpError:
                raise
            except Exception:  # noqa: BLE001 — a trace that needs AutoGraph (or a genuine error: raised again below)
                self.converted = tf.function(self._fn, **self._options)
        return getattr(self.converted, method)(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_fallback("__call__", *args, **kwargs)

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_fallback("get_concrete_function", *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # experimental_get_tracing_count, python_function, …
        return getattr(self.active, name)


def bound_once(function: Any) -> Callable[..., Any]:
    """``function(*args)`` for a concrete function called many times with tensors of one
    structure, shapes and dtypes (the step API's step): the arguments are flattened in
    ``tf.nest`` order and handed to the function's flat call with its captured inputs — what
    its ``__call__`` does after binding them to its signature, which was ~120 of a step's
    ~530 µs (``/tmp`` probe beside benchmarks/bench_step.py, round 5 session 9). The first
    call checks the flattened arguments against the function's inputs (count, dtypes,
    shapes); on a mismatch, or with a TensorFlow without that private entry point, every call
    goes through ``__call__``."""
    flat_call = getattr(function, "_call_flat", None)
    inputs = getattr(function, "inputs", None)
    if flat_call is None or inputs is None:
        return function
    checked: list[bool] = []

    def call(*args: Any) -> Any:
        flat = tf.nest.flatten(args)
        if not checked:
            specs = [(t.dtype, tuple(t.shape)) for t in inputs[: len(flat)]]
            given = [(getattr(t, "dtype", None), tuple(getattr(t, "shape", ()))) for t in flat]
            checked.append(len(inputs) == len(flat) + len(function.captured_inputs) and specs == given)
        if not checked[0]:
            return function(*args)
        return flat_call(flat, function.captured_inputs)

    return call
