"""The public functions' arguments, grouped by what they are about and passed on by name.

Each group is a small frozen dataclass that checks its cheap rules when it is made (types,
ranges) and names each default once; the public functions take their defaults from here
(``n_chains: int = Setup.n_chains``). What needs the data or the model (shapes, the trial
evaluation) is checked by :func:`sgmcmc.api.build.build_sampler`, before anything is compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np
import tensorflow as tf

from .. import checks
from ..run.calls import Keep

#: ``log_lik(params, dataset)``: the SUM of the log-likelihood over the rows it is given.
LogLik = Callable[[dict[str, tf.Tensor], dict[str, tf.Tensor]], tf.Tensor]
#: ``log_prior(params)``: a scalar tensor.
LogPrior = Callable[[dict[str, tf.Tensor]], tf.Tensor]
#: ``counts(params, minibatch, seed)``: the minibatch's category counts (simplex samplers).
Counts = Callable[[dict[str, tf.Tensor], dict[str, tf.Tensor], tf.Tensor], dict[str, tf.Tensor]]
#: Name -> array-like with the rows on the first axis, a pandas DataFrame, or (the samplers
#: without a control variate, with ``n_rows``) a ``tf.data.Dataset`` of minibatch dicts.
Dataset = Any
#: Name -> starting value, or a list of such dicts (one per chain).
Starts = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]
#: One value for every parameter or a dict by parameter name (stepsizes: also schedules h(t)).
PerParameter = Union[float, Callable[[tf.Tensor], tf.Tensor], Mapping[str, Any]]


@dataclass(frozen=True)
class Model:
    """The user's model: data, starting values and either ``log_lik``/``log_prior`` (gradient
    samplers) or ``counts`` (simplex samplers, SPEC §9)."""

    dataset: Any
    params: Any
    log_lik: Callable | None = None
    log_prior: Callable | None = None
    counts: Callable | None = None
    check_model: bool = True
    constraints: dict | None = None
    #: Check the stepsize against the curvature before sampling (:mod:`sgmcmc.stability.check`).
    check_stepsize: bool = True
    #: T: sample p(θ | x)^(1/T) (:mod:`sgmcmc.tempering`).
    temperature: float = 1.0


@dataclass(frozen=True)
class Setup:
    """How the chains are set up: minibatches, randomness, precision, how many, where."""

    minibatch_size: float = 0.01
    seed: int | None = None
    dtype: tf.DType = tf.float32
    n_chains: int = 1
    minibatch_replace: bool = False
    strategy: tf.distribute.Strategy | None = None
    shard_rows: bool | None = None
    #: Progress of the set-up's own work (the CV mode search), the R packages' ``verbose``.
    verbose: bool = True
    #: N when ``dataset`` is a ``tf.data.Dataset`` of minibatches (:mod:`sgmcmc.data.stream`).
    n_rows: int | None = None

    def __post_init__(self):
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        if not isinstance(self.minibatch_replace, (bool, np.bool_)):
            raise TypeError(f"minibatch_replace must be True or False, got {self.minibatch_replace!r}")
        object.__setattr__(self, "seed", None if seed is None else int(seed))
        object.__setattr__(self, "dtype", checks.as_dtype(self.dtype))
        object.__setattr__(self, "n_chains", checks.check_count(self.n_chains, "n_chains"))
        object.__setattr__(self, "minibatch_replace", bool(self.minibatch_replace))
        object.__setattr__(self, "verbose", bool(self.verbose))


@dataclass(frozen=True)
class Chain:
    """What a whole-chain run does after the set-up: how long, what it keeps, where it saves."""

    n_iters: int = 10_000
    burn_in: int = 0
    thin: int = 1
    store_gradients: bool = False
    verbose: bool = True
    checkpoint_dir: Any = None
    checkpoint_every: int = 10_000

    def __post_init__(self):
        object.__setattr__(self, "n_iters", checks.check_count(self.n_iters, "n_iters"))
        object.__setattr__(self, "thin", checks.check_count(self.thin, "thin"))
        burn_in = self.burn_in
        if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
            raise ValueError(f"burn_in must be a whole number >= 0, got {burn_in!r}")
        object.__setattr__(self, "burn_in", int(burn_in))
        object.__setattr__(self, "store_gradients", bool(self.store_gradients))
        if self.checkpoint_dir is not None:
            object.__setattr__(self, "checkpoint_every", checks.check_count(self.checkpoint_every, "checkpoint_every"))

    @property
    def keep(self) -> Keep:
        return Keep(self.burn_in, self.thin)


#: The numpy entry of ``n_rows`` (the samplers without a control variate), which the generator
#: puts before ``minibatch_replace``'s (:data:`sgmcmc.api.docs.MINIBATCH_REPLACE`).
N_ROWS = """    n_rows : int, keyword-only
        N, the rows of the data when ``dataset`` is a ``tf.data.Dataset`` of minibatches (each
        minibatch's log-likelihood is scaled by N/n); not given with arrays, whose rows are
        counted. See :mod:`sgmcmc.data.stream`.
"""
