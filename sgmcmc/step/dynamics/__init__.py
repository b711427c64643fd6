"""The dynamics: one module each, the pure update rule beside its kernel (init_aux + one_step).

See :mod:`sgmcmc.step.contract` for the kernel protocol every dynamics follows and
:class:`~sgmcmc.step.dynamics.base.Dynamics` for the traits the rest of the library reads from it.
"""

from ..contract import Estimate, Kernel, stepsize_at
from .baoab import BAOAB
from .base import Dynamics, KernelContext, Segment, Stage
from .cir import SCIR, SGRLD
from .cyclical import CSGHMC, CSGLD
from .hamcmc import HAMCMC
from .osgld import OSGLD
from .psgld import PSGLD
from .sgd import SGD
from .sghmc import SGHMC
from .sgld import SGLD
from .sgnht import SGNHT

__all__ = [
    "BAOAB", "CSGHMC", "CSGLD", "Dynamics", "Estimate", "HAMCMC", "Kernel", "KernelContext", "OSGLD", "PSGLD", "SCIR", "SGD", "SGHMC",
    "SGLD", "SGNHT", "SGRLD", "Segment", "Stage", "stepsize_at",
]
