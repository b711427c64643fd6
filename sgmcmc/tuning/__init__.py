"""Tuning aids: the stepsize sanity check (:mod:`.curvature`) and the KSD stepsize search
(:mod:`.stepsize_search`)."""

from .curvature import StepsizeCheck, check_stepsize
from .stepsize_search import tune_stepsize

__all__ = ["StepsizeCheck", "check_stepsize", "tune_stepsize"]
