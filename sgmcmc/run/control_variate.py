"""What a control-variate sampler adds: its mode search's settings and the state that search
keeps between calls (:mod:`sgmcmc.run.mode_search`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..step.random import ChainRandom


@dataclass(frozen=True)
class ControlVariateSettings:
    """What the control-variate samplers add: the mode search before sampling."""

    opt_stepsize: dict[str, float]
    n_iters_opt: int
    verbose: bool


@dataclass
class ModeSearchStream:
    """What the control variate's SGD mode search keeps between its calls: its noise stream (one
    chain), the search steps taken so far, and its compiled program (made on first use)."""

    rng: ChainRandom
    iteration: int = 0
    program: Any = None
