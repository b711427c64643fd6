"""Posterior summaries and the conversion to ArviZ (SPEC §7)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import warnings
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from ..run.samples import Samples, as_samples

#: Columns of :func:`summary`, in order.
SUMMARY_COLUMNS = ["mean", "sd", "5%", "95%", "mcse_mean", "ess_bulk", "ess_tail", "r_hat"]


def _from_dict(groups: dict[str, dict[str, np.ndarray]]):
    """``az.from_dict`` for ArviZ 0.x (groups as keywords) and 1.x (one dict of groups)."""
    import arviz as az

    if "posterior" in inspect.signature(az.from_dict).parameters:
        return az.from_dict(**groups)
    return az.from_dict(groups)


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
    s = as_samples(samples)
    posterior = s.by_chain()
    stats: dict[str, np.ndarray] = {}
    lp = s.log_posterior_by_chain()
    if lp is not None:
        stats["lp"] = lp
    if s.gradients is not None:
        stats.update({f"grad_{name}": g for name, g in s.by_chain("gradients").items()})
    groups = {"posterior": posterior}
    if stats:
        groups["sample_stats"] = stats
    return _from_dict(groups)


class _NoShapeValidation(logging.Filter):
    """Drops ArviZ's "Shape validation failed ... minimum_shape: (chains=2, ...)" record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Shape validation failed")


@contextlib.contextmanager
def _one_chain_notice_hidden() -> Iterator[None]:
    """ArviZ logs its shape warning for one chain on every call (logger ``arviz``; a warning in
    other versions): hidden for the block; :func:`summary` says it once itself."""
    import arviz as az

    log = getattr(az, "_log", None)
    log = log if isinstance(log, logging.Logger) else logging.getLogger("arviz")
    drop = _NoShapeValidation()
    log.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Shape validation failed")
            yield
    finally:
        log.removeFilter(drop)


#: Whether summary has said (once per process) that R-hat needs two chains.
_said_one_chain = False


def _say_one_chain_once() -> None:
    global _said_one_chain
    if not _said_one_chain:
        _said_one_chain = True
        warnings.warn(
            "summary of one chain: r_hat is NaN (R-hat needs at least two chains; run n_chains >= 2 "
            "from dispersed starts). Said once per session.",
            UserWarning,
            stacklevel=3,
        )


def _quantile(q: float):
    def stat(x: np.ndarray) -> float:
        return float(np.quantile(x, q))

    return stat


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
    import arviz as az

    s = as_samples(samples)
    idata = _from_dict({"posterior": s.by_chain()})
    stat_funcs = {
        "mean": np.mean,
        "sd": lambda x: float(np.std(x, ddof=1)),
        "5%": _quantile(0.05),
        "95%": _quantile(0.95),
    }
    if s.n_chains == 1:
        with _one_chain_notice_hidden():
            df = az.summary(idata, kind="diagnostics", stat_funcs=stat_funcs, extend=True, round_to="none")
        _say_one_chain_once()
    else:
        df = az.summary(idata, kind="diagnostics", stat_funcs=stat_funcs, extend=True, round_to="none")
    # ArviZ may sort the variables by name; keep the samples' dict order.
    rank = {name: i for i, name in enumerate(s)}
    order = sorted(range(len(df)), key=lambda i: (rank[df.index[i].split("[")[0]], i))
    return df.iloc[order][SUMMARY_COLUMNS].astype(float)
