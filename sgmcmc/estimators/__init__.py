"""Gradient estimators: callables ``estimator(params, rng, t) -> Estimate`` with one signature,
so every dynamics works with every estimator (SPEC §8). ``params`` carry the leading chain axis;
``rng`` is the chain's :class:`~sgmcmc.random.ChainRandom`; ``t`` the global iteration (for
estimators with a schedule of their own, e.g. SVRG's anchor refresh)."""

from .control_variate import ControlVariateGradient
from .counts import CountsEstimate, MinibatchCounts
from .plain import FULL_GRADIENT_BATCH_ROWS, MinibatchGradient, value_and_grad
from .variance_reduced import SAGAGradient, SVRGGradient

__all__ = [
    "ControlVariateGradient", "CountsEstimate", "MinibatchCounts", "FULL_GRADIENT_BATCH_ROWS", "MinibatchGradient",
    "SAGAGradient", "SVRGGradient", "value_and_grad",
]
