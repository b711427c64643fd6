"""Choosing a stepsize: :func:`~sgmcmc.tuning.stepsize_search.tune_stepsize` runs short chains of
the public samplers and keeps the stepsize that scores best. It sits above the API it runs; the
stability check it leans on lives below, in :mod:`sgmcmc.stability`."""

from .stepsize_search import tune_stepsize

__all__ = ["tune_stepsize"]
