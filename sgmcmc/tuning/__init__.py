"""Tuning aids: the posterior's curvature and the discretisation's distortion (:mod:`.curvature`),
the stepsize check (:mod:`.stability`: public and before sampling) and the KSD stepsize search
(:mod:`.stepsize_search`)."""

from .curvature import StepsizeCheck
from .stability import check_stepsize
from .stepsize_search import tune_stepsize

__all__ = ["StepsizeCheck", "check_stepsize", "tune_stepsize"]
