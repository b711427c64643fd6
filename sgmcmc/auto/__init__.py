"""``sgmcmc.sample`` (SPEC §14): adapts, chooses and runs until the posterior is known."""

from .report import AdaptedSamples, SampleReport
from .sampling import sample

__all__ = ["AdaptedSamples", "SampleReport", "sample"]
