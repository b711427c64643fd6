"""The chains' state in variables, between compiled calls.

A compiled call reads the variables into a :class:`~sgmcmc.run.program.ChainState`, runs a pure
program (:mod:`sgmcmc.run.program`) and writes the state it returns. ``params`` holds the user's
layout: the parameter's shape for one chain (R), ``[K, *shape]`` for several; every state tensor
a program sees has the leading chain axis (:mod:`sgmcmc.step.dynamics.base`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

from .program import ChainState


def read_now(variable: tf.Variable) -> np.ndarray:
    """A plain variable's value as a new numpy array, by one eager ``ReadVariableOp``.

    ``variable.numpy()`` also runs an ``Identity`` op and the tape's and the distribution
    strategy's bookkeeping: 4–5× the cost (benchmarks/bench_step.py: what ``get_params`` costs
    per parameter in a user's step loop). A strategy's variable takes the usual path."""
    if type(variable) is not resource_variable_ops.ResourceVariable:
        return np.array(variable.numpy())
    return np.array(gen_resource_variable_ops.read_variable_op(variable.handle, variable.dtype))


def nbytes(variables: Iterable[tf.Variable]) -> int:
    """Bytes the values of ``variables`` hold."""
    return sum(int(np.prod(v.shape)) * v.dtype.size for v in variables)


class ChainVariables:
    """``params`` (user layout), ``aux`` (the kernel's auxiliary state, made by :meth:`set_aux`),
    ``iteration`` (the global counter burn-in, thinning and every draw count on),
    ``last_log_post`` (``[K]``, the last iteration's estimate) and ``seed``."""

    def __init__(self, starts: list[dict[str, np.ndarray]], dtype: tf.DType, seed: int):
        self.n_chains = len(starts)
        self.dtype = dtype
        self.params = {k: tf.Variable(self.user_layout(k, starts), name=k) for k in starts[0]}
        self.aux: Any = None
        self.iteration = tf.Variable(0, dtype=tf.int64, name="iteration")
        self.seed = tf.Variable(seed, dtype=tf.int64, trainable=False, name="seed")
        self.last_log_post = tf.Variable(tf.zeros([self.n_chains], dtype), name="log_posterior")

    def user_layout(self, name: str, starts: list[Mapping[str, np.ndarray]]) -> np.ndarray:
        if self.n_chains == 1:
            return starts[0][name]
        return np.stack([s[name] for s in starts])

    def bytes_per_chain(self) -> int:
        """Bytes of one chain's parameters."""
        return nbytes(self.params.values()) // self.n_chains

    def read_params(self) -> dict[str, tf.Tensor]:
        """The parameters with the chain axis, ``[K, *shape]``."""
        if self.n_chains == 1:
            return {k: v.read_value()[None] for k, v in self.params.items()}
        return {k: v.read_value() for k, v in self.params.items()}

    def write_params(self, params: Mapping[str, tf.Tensor]) -> None:
        for k, v in self.params.items():
            v.assign(params[k][0] if self.n_chains == 1 else params[k])

    def set_params(self, starts: list[Mapping[str, np.ndarray]]) -> None:
        """Every chain's parameters from ``starts`` (one dict per chain)."""
        for k, v in self.params.items():
            v.assign(self.user_layout(k, starts))

    def read_aux(self) -> Any:
        return tf.nest.map_structure(lambda v: v.read_value(), self.aux)

    def set_aux(self, aux: Any) -> None:
        """Make the auxiliary variables from ``aux`` (the first time) or assign them."""
        if self.aux is None:
            self.aux = tf.nest.map_structure(tf.Variable, aux)
        else:
            tf.nest.map_structure(lambda var, value: var.assign(value), self.aux, aux)

    def read(self) -> ChainState:
        return ChainState(self.read_params(), self.read_aux(), self.iteration.read_value(), self.last_log_post.read_value())

    def write(self, state: ChainState) -> None:
        self.write_params(state.params)
        tf.nest.map_structure(lambda var, value: var.assign(value), self.aux, state.aux)
        self.iteration.assign(state.t)
        self.last_log_post.assign(state.log_post)

    def restart(self, starts: list[Mapping[str, np.ndarray]]) -> None:
        """Back to ``starts`` and iteration 0 (the auxiliary state is drawn again by the caller)."""
        self.set_params(starts)
        self.iteration.assign(0)
        self.last_log_post.assign(tf.zeros([self.n_chains], self.dtype))

    def checkpointed(self, with_seed: bool = True) -> dict[str, Any]:
        """The variables a checkpoint holds, by key (the auxiliary state once it exists)."""
        parts = dict(params=self.params, aux=tf.nest.flatten(self.aux or {}), iteration=self.iteration,
                     log_posterior=self.last_log_post)
        if with_seed:
            parts.update(seed=self.seed)
        return parts
