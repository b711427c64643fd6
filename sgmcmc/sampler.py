"""The sampler object: chain state in variables, and the one compiled step both APIs share.

``Sampler._step`` is the only place one iteration is written. The whole-chain API traces it
inside a ``tf.while_loop`` (:meth:`Sampler.run_chunk`, many iterations per call, samples in
a preallocated ``TensorArray``); the step-by-step API traces it alone
(:meth:`Sampler.step`). Both draw from the same ``tf.random.Generator`` in the same order,
so the same seed gives the same chain.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .errors import DivergenceError, NotInitialisedError
from .gradients import ControlVariateGradient, MinibatchGradient
from .kernels import SGD


@dataclass(frozen=True)
class ControlVariateSettings:
    """What the control-variate samplers add: the mode search before sampling."""

    opt_stepsize: dict[str, float]
    n_iters_opt: int
    verbose: bool


class Sampler:
    """One SG-MCMC chain: what ``*_setup`` returns.

    Attributes
    ----------
    params : dict[str, tf.Variable]
        The current state. User code may read it (e.g. a test-set log-loss) and sees each
        new state after every :func:`sgmcmc.sgmcmc_step`.
    method : str
        ``"sgld"``, ``"sghmccv"``, …
    seed : int
        The seed in use (drawn at random when none was given).
    """

    def __init__(
        self,
        method: str,
        kernel,
        log_lik,
        log_prior,
        dataset: dict[str, np.ndarray],
        params: dict[str, np.ndarray],
        batch_size: int,
        seed: int | None,
        dtype: tf.DType,
        control_variate: ControlVariateSettings | None = None,
    ):
        self.method = method
        self.kernel = kernel
        self.dtype = dtype
        self.seed = int(seed) if seed is not None else secrets.randbits(63)
        self.batch_size = batch_size
        self.n_rows = len(next(iter(dataset.values())))
        self.control_variate = control_variate
        self._initial = params
        self.generator = tf.random.Generator.from_seed(self.seed)
        self.params = {k: tf.Variable(v, name=k) for k, v in params.items()}
        data = {k: tf.convert_to_tensor(v) for k, v in dataset.items()}
        self._plain = MinibatchGradient(log_lik, log_prior, data, batch_size, self.generator)
        if control_variate is None:
            self.estimator = self._plain
        else:
            self._anchor = {k: tf.Variable(v, name=f"{k}_anchor") for k, v in params.items()}
            self._anchor_grad = {k: tf.Variable(tf.zeros_like(v), name=f"{k}_anchor_grad") for k, v in params.items()}
            self.estimator = ControlVariateGradient(self._plain, self._anchor, self._anchor_grad)
        self._aux: dict[str, dict[str, tf.Variable]] | None = None
        self.initialised = False
        self.iteration = 0
        self._compiled_step = None
        self._run_chunk = None
        self._run_opt_chunk = None

    # -- one iteration -------------------------------------------------------------------
    def _normal(self, like: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Standard normal noise shaped like each tensor of ``like``, from one generator call
        (one random op per step instead of one per parameter)."""
        sizes = [int(v.shape.num_elements()) for v in like.values()]
        flat = tf.split(self.generator.normal([sum(sizes)], dtype=self.dtype), sizes)
        return {k: tf.reshape(x, v.shape) for (k, v), x in zip(like.items(), flat)}

    def _read_state(self, aux_vars) -> tuple[dict[str, tf.Tensor], dict]:
        return (
            {k: v.read_value() for k, v in self.params.items()},
            tf.nest.map_structure(lambda v: v.read_value(), aux_vars),
        )

    def _write_state(self, state, aux_vars) -> None:
        params, aux = state
        for k, v in self.params.items():
            v.assign(params[k])
        tf.nest.map_structure(lambda var, value: var.assign(value), aux_vars, aux)

    def _step(self, state):
        """One iteration of the chain, a pure function of the state ``(params, aux)`` apart
        from the random generator: returns the new state and the log-posterior estimate at
        the state it started from."""
        params, aux = state
        new_params, new_aux, log_post = self.kernel.one_step(params, aux, self.estimator, self._normal)
        return (new_params, new_aux), log_post

    # -- compiled entry points ------------------------------------------------------------
    def _chunk(self, transition, aux_vars, n: tf.Tensor, store: bool):
        # The state is carried through the loop as tensors and written back to the
        # variables once per chunk: reading and assigning variables every iteration
        # measured about 1.5x slower (benchmarks/RESULTS.md).
        state = self._read_state(aux_vars)
        samples = {
            k: tf.TensorArray(self.dtype, size=n, element_shape=v.shape) for k, v in self.params.items() if store
        }
        log_posts = tf.TensorArray(self.dtype, size=n, element_shape=[])
        for i in tf.range(n):
            state, log_post = transition(state)
            samples = {k: samples[k].write(i, state[0][k]) for k in samples}
            log_posts = log_posts.write(i, log_post)
        self._write_state(state, aux_vars)
        return {k: ta.stack() for k, ta in samples.items()}, log_posts.stack()

    def run_chunk(self, n: int) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """``n`` iterations in one compiled call: the samples ``(n, *shape)`` per parameter and
        the ``n`` log-posterior estimates."""
        self._require_initialised()
        if self._run_chunk is None:

            @tf.function
            def run_chunk(n):
                return self._chunk(self._step, self._aux, n, store=True)

            self._run_chunk = run_chunk
        out = self._run_chunk(tf.constant(n, tf.int32))
        self.iteration += n
        return out

    def run_opt_chunk(self, n: int) -> tf.Tensor:
        """``n`` steps of the SGD mode search; returns their log-posterior estimates."""
        if self._run_opt_chunk is None:
            kernel = SGD(self.control_variate.opt_stepsize)

            def transition(state):
                params, _ = state
                new_params, _, log_post = kernel.one_step(params, {}, self._plain, self._normal)
                return (new_params, {}), log_post

            @tf.function
            def run_opt_chunk(n):
                return self._chunk(transition, {}, n, store=False)[1]

            self._run_opt_chunk = run_opt_chunk
        return self._run_opt_chunk(tf.constant(n, tf.int32))

    def _checked_step(self) -> tf.Tensor:
        """One step, written to the variables only if the new state and the log-posterior
        estimate are finite (so a divergence leaves the last finite state in place)."""
        state, log_post = self._step(self._read_state(self._aux))
        checks = [tf.math.is_finite(log_post)] + [tf.reduce_all(tf.math.is_finite(p)) for p in state[0].values()]
        finite = tf.reduce_all(tf.stack(checks))
        if finite:
            self._write_state(state, self._aux)
        return finite

    def step(self) -> None:
        """One iteration as one call of a compiled concrete function (no retracing)."""
        self._require_initialised()
        if self._compiled_step is None:
            self._compiled_step = tf.function(self._checked_step).get_concrete_function()
        if not self._compiled_step():
            raise DivergenceError(
                f"{self.method} diverged at iteration {self.iteration + 1}: the log-posterior estimate or a "
                f"parameter became NaN or Inf; try a smaller stepsize. sampler.params still holds the state "
                f"after iteration {self.iteration}",
                iteration=self.iteration + 1,
            )
        self.iteration += 1

    # -- state -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the starting values and the seed's first random number."""
        self.generator.reset_from_seed(self.seed)
        for k, v in self.params.items():
            v.assign(self._initial[k])
        self.iteration = 0

    def init_aux(self) -> None:
        """Draw the kernel's auxiliary state (momenta, thermostats) at the current parameters."""
        aux = self.kernel.init_aux({k: v.read_value() for k, v in self.params.items()}, self._normal)
        if self._aux is None:
            self._aux = tf.nest.map_structure(tf.Variable, aux)
        else:
            tf.nest.map_structure(lambda var, value: var.assign(value), self._aux, aux)

    def full_data_gradient(self) -> dict[str, tf.Tensor]:
        r""":math:`\nabla\log p(\theta|x)` at the current parameters, over all the data in batches."""
        return self._plain.full_data_gradient({k: v.read_value() for k, v in self.params.items()})

    def set_anchor(self, anchor_grad: dict[str, tf.Tensor]) -> None:
        """Fix the control variate at the current parameters with its full-data gradient."""
        for k, v in self.params.items():
            self._anchor[k].assign(v)
            self._anchor_grad[k].assign(anchor_grad[k])

    def get_params(self) -> dict[str, np.ndarray]:
        self._require_initialised()
        return {k: np.array(v.numpy()) for k, v in self.params.items()}

    def _require_initialised(self) -> None:
        if not self.initialised:
            raise NotInitialisedError(
                f"this {self.method} sampler is not initialised: call sess = sgmcmc.init_sess(sampler) first"
            )
