"""Posterior summaries and the conversion to ArviZ (SPEC §7): the public functions, for a
:class:`~sgmcmc.analysis.samples.Samples` or a plain dict (the array work is :mod:`.arviz_io`)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from .arviz_io import SUMMARY_COLUMNS
from .samples import as_samples

__all__ = ["SUMMARY_COLUMNS", "summary", "to_inference_data"]


def to_inference_data(samples: Mapping[str, Any]):
    """The samples as an ArviZ ``InferenceData`` (chain, draw dims; one chain for a plain dict).

    Groups
    ------
    posterior
        Every parameter, dims ``(chain, draw, <name>_dim_0, ...)`` (ArviZ's default names).
    sample_stats
        ``lp``: the sampler's log-posterior estimate at each kept sample (ArviZ's name for
        the log density, as in the Stan and PyMC converters), when stored; and
        ``grad_<name>``: the stored gradient estimate of the log posterior for parameter
        ``<name>`` (with respect to the unconstrained value), when stored. Gradients are
        sample statistics rather than a group of their own so the object stays within the
        groups every ArviZ version knows.
    """
    return as_samples(samples).to_inference_data()


def summary(samples: Mapping[str, Any]) -> pd.DataFrame:
    r"""Mean, sd, 5% and 95% quantiles, MCSE, bulk/tail ESS and R-hat of every scalar component.

    Everything is computed by ArviZ (``az.summary`` with ``kind="diagnostics"``, the mean, the
    ``ddof=1`` standard deviation and the quantiles passed as its ``stat_funcs``) over the
    pooled chains: R-hat is the rank-normalised split R-hat and ESS the bulk and tail ESS of
    Vehtari et al. (2021). A plain dict of arrays is one chain (draws on the leading axis).
    ArviZ needs at least two chains for R-hat: with one chain ``r_hat`` is NaN, said once per
    session by a ``UserWarning`` (ArviZ's own shape warning, logged on every call, is hidden).

    ESS and R-hat measure autocorrelation and between-chain agreement only. A stochastic-
    gradient sampler is biased (its stationary distribution is not the posterior), and a
    large ESS says nothing about that bias (South 2021): use :func:`sgmcmc.ksd` with exact
    gradients (:func:`sgmcmc.full_gradients`) to judge how close the samples are to the
    posterior.

    Returns
    -------
    pandas.DataFrame
        One row per scalar component, indexed as ArviZ does, 0-based: ``theta``, ``beta[3]``,
        ``W[1, 2]``; columns ``mean, sd, 5%, 95%, mcse_mean, ess_bulk, ess_tail, r_hat``.
    """
    return as_samples(samples).summary()
