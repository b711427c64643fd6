"""A sampler's compiled programs: made once by key, in one compilation mode, with XLA's fallback.

Compilation mode (:attr:`CompiledPrograms.jit_compile`): XLA (``tf.function(jit_compile=True)``)
by default, except SAGA and OSGLD, which XLA slows down (10× and 5×), the count models (not
measured) and ``tune_stepsize``'s short candidate runs (``GRAPH_MODE_ITERATIONS``);
``SGMCMC_XLA=0``/``1`` in the environment forces graph mode / XLA. A model XLA cannot compile (an
op with no XLA kernel, e.g. ``tf.print``) falls back to graph mode at the first call, with a
:class:`~sgmcmc.CompilationWarning`. Grappler's rewrites are off for every call
(:mod:`sgmcmc.graph_options`): with them the step API's and the whole chain's graphs parted in
the last bit.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Hashable

import tensorflow as tf

from ..errors import CompilationWarning
from ..graph_options import own_function, package_call_options


def default_jit_compile(xla_by_default: bool) -> bool:
    """``xla_by_default`` (where XLA measured faster: ``sgmcmc.api.build``) unless the environment
    says ``SGMCMC_XLA=0`` (graph) or ``1`` (XLA)."""
    value = os.environ.get("SGMCMC_XLA", "auto").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    if value not in ("", "auto"):
        raise ValueError(f"SGMCMC_XLA={value!r}: use 0 (graph mode), 1 (XLA) or auto (the default)")
    return xla_by_default


class CompiledPrograms:
    """The compiled functions of one sampler, by key. ``on_fallback`` is called when XLA could not
    compile a program and every program is made again in graph mode (so both APIs stay in one
    mode): the step API forgets its concrete function."""

    def __init__(self, method: str, jit_compile: bool, on_fallback: Callable[[], None]):
        self.method = method
        self.jit_compile = bool(jit_compile)
        self._on_fallback = on_fallback
        self._functions: dict = {}
        self._xla_ran: set = set()  # keys XLA has compiled and run once

    def function(self, key: Hashable, make: Callable) -> Any:
        """The ``tf.function`` of ``key``, made from ``make`` on first use in the current mode."""
        if key not in self._functions:
            self._functions[key] = own_function(make, jit_compile=self.jit_compile or None)
        return self._functions[key]

    def call(self, key: Hashable, make: Callable, *args: Any) -> Any:
        """Call the compiled function ``key`` with Grappler's rewrites off. Under XLA, an error at
        a function's first call — before any of its ops has run, as XLA compiles the whole
        function first — switches this sampler to graph mode for good and retries once; an error
        that graph mode raises too is the model's own and propagates."""
        with package_call_options():
            if not self.jit_compile or key in self._xla_ran:
                return self.function(key, make)(*args)
            try:
                result = self.function(key, make)(*args)
            except tf.errors.OpError as error:
                self.jit_compile = False
                self._functions.clear()
                self._on_fallback()
                result = self.function(key, make)(*args)
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                warnings.warn(
                    f"{self.method}: XLA could not compile this model ({reason[:300]}); the chain runs in "
                    f"TensorFlow's graph mode instead (the same algorithm, slower per iteration). "
                    f"SGMCMC_XLA=0 selects graph mode from the start.",
                    CompilationWarning,
                    stacklevel=4,
                )
                return result
            self._xla_ran.add(key)
            return result

    def made(self) -> list:
        """The functions made so far (tests/test_gpu_kernels.py reads their graphs)."""
        return list(self._functions.values())
