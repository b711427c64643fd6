"""The dynamics: one module each, the pure update rule beside its kernel (init_aux + one_step).

See :mod:`sgmcmc.dynamics.base` for the kernel protocol every dynamics follows.
"""

from .base import Estimate, Kernel, stepsize_at
from .hamcmc import HAMCMC
from .psgld import PSGLD
from .sgd import SGD
from .sghmc import SGHMC
from .sgld import SGLD
from .sgnht import SGNHT

__all__ = ["Estimate", "HAMCMC", "Kernel", "PSGLD", "SGD", "SGHMC", "SGLD", "SGNHT", "stepsize_at"]
