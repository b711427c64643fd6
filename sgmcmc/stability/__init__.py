"""Is a stepsize stable on this posterior? The curvature (Hessian-vector products, Lanczos, the
per-parameter blocks) and the discretisation's distortion (:mod:`.curvature`), and the stepsize
check built on them (:mod:`.check`: the public :func:`~sgmcmc.stability.check.check_stepsize` and
the check every gradient sampler makes before sampling). Below :mod:`sgmcmc.run`, which calls it;
the stepsize search that uses it is :mod:`sgmcmc.tuning`, above the API."""

from .check import check_stepsize
from .curvature import StepsizeCheck

__all__ = ["StepsizeCheck", "check_stepsize"]
