"""A sampler's whole state as a ``tf.train.Checkpoint`` (SPEC §10): what ``save`` writes and
``restore`` reads, the checkpoint directories' shards (:mod:`sgmcmc.run.checkpoints`) and the
reused samplers' memory count (:mod:`sgmcmc.api.reuse`).

Everything the chain's future depends on: the seed, the parameters, the kernel's auxiliary state
(momenta, thermostats, preconditioners), the iteration counter (which, with the seed, fixes every
draw), the last log-posterior estimate, for CV samplers the mode, anchor and its gradient, and a
stateful estimator's variables (SVRG's anchors, SAGA's table).
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from .variables import nbytes


def checkpointed(sampler, with_seed: bool = True) -> dict[str, Any]:
    """The sampler's variables by checkpoint key (the kernel's state only once
    :meth:`~sgmcmc.run.sampler.Sampler.init_aux` has made it)."""
    parts = sampler.variables.checkpointed(with_seed)
    if sampler.control_variate is not None:  # top-level keys, as the CV state always had
        parts.update(sampler.estimator.variables())
    elif hasattr(sampler.estimator, "variables"):
        parts.update(estimator=sampler.estimator.variables())
    return parts


def state_checkpoint(sampler, with_seed: bool = True) -> tf.train.Checkpoint:
    """A checkpoint of :func:`checkpointed`; makes the kernel's state first if it does not exist
    yet (a restore fills it)."""
    if sampler.variables.aux is None:
        sampler.init_aux()
    return tf.train.Checkpoint(**checkpointed(sampler, with_seed))


def state_bytes(sampler) -> int:
    """Bytes of the variables a checkpoint holds."""
    return nbytes(tf.nest.flatten(checkpointed(sampler)))


def save(sampler, directory: str) -> str:
    """:meth:`~sgmcmc.run.sampler.Sampler.save`: the whole state to ``directory``; returns the
    path prefix."""
    sampler.require_initialised()
    os.makedirs(directory, exist_ok=True)
    sampler.variables.seed.assign(sampler.seed)
    return state_checkpoint(sampler).write(os.path.join(directory, "sampler"))


def restore(sampler, directory_or_prefix: str) -> None:
    """:meth:`~sgmcmc.run.sampler.Sampler.restore`: the state :func:`save` wrote; the sampler
    adopts the saved seed (a checkpoint written before the seed was saved keeps the sampler's)."""
    prefix = directory_or_prefix
    if os.path.isdir(prefix):
        prefix = os.path.join(prefix, "sampler")
    saved = {name for name, _ in tf.train.list_variables(prefix)}
    with_seed = "seed/.ATTRIBUTES/VARIABLE_VALUE" in saved
    state_checkpoint(sampler, with_seed).read(prefix).assert_existing_objects_matched()
    if with_seed:
        sampler.adopt_seed(int(sampler.variables.seed.numpy()))
    sampler.initialised = True
