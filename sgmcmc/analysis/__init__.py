"""Analysis of SG-MCMC output (SPEC §7): summaries, kernel Stein discrepancy, Stein thinning,
zero-variance control variates, exact full-data gradients and trace plots.

Every function takes a :class:`sgmcmc.Samples` or a plain dict of arrays (one chain, draws on
the leading axis).
"""

from .exact_gradients import full_gradients
from .stein_discrepancy import imq_stein_kernel, ksd
from .plots import plot_trace
from .stein_thinning import stein_thin
from .diagnostics import summary, to_inference_data
from .zero_variance import zv

__all__ = ["full_gradients", "imq_stein_kernel", "ksd", "plot_trace", "stein_thin", "summary", "to_inference_data", "zv"]
