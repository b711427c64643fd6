"""What the posterior summary and the ArviZ conversion do with arrays (the work behind
:meth:`Samples.summary <sgmcmc.analysis.samples.Samples.summary>` and
:meth:`~sgmcmc.analysis.samples.Samples.to_inference_data`; the public functions are in
:mod:`.diagnostics`). Nothing here knows :class:`~sgmcmc.analysis.samples.Samples`."""

from __future__ import annotations

import contextlib
import inspect
import logging
import warnings
from typing import Iterator

import numpy as np
import pandas as pd

from ..errors import user_stacklevel

#: Columns of :func:`summary`, in order.
SUMMARY_COLUMNS = ["mean", "sd", "5%", "95%", "mcse_mean", "ess_bulk", "ess_tail", "r_hat"]


def arviz():
    """The ``arviz`` module, imported without its once-a-day notice.

    ArviZ 0.2x warns (a ``FutureWarning``, "ArviZ is undergoing a major refactor …") at its
    first import on each calendar day, keyed by a stamp file in the user's cache: on a fresh
    machine the first ``samples.summary()`` would print it, between a clean run's lines. It
    is about ArviZ's own API, which the user did not call, so it is hidden here; a user who
    imports ArviZ themselves still sees it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz as az
    return az


def _from_dict(groups: dict[str, dict[str, np.ndarray]]):
    """``az.from_dict`` for ArviZ 0.x (groups as keywords) and 1.x (one dict of groups)."""
    az = arviz()

    if "posterior" in inspect.signature(az.from_dict).parameters:
        return az.from_dict(**groups)
    return az.from_dict(groups)


class _NoShapeValidation(logging.Filter):
    """Drops ArviZ's "Shape validation failed ... minimum_shape: (chains=2, ...)" record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Shape validation failed")


@contextlib.contextmanager
def _one_chain_notice_hidden() -> Iterator[None]:
    """ArviZ logs its shape warning for one chain on every call (logger ``arviz``; a warning in
    other versions): hidden for the block; :func:`summary` says it once itself."""
    az = arviz()

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
            stacklevel=user_stacklevel(),
        )


def _quantile(q: float):
    def stat(x: np.ndarray) -> float:
        return float(np.quantile(x, q))

    return stat


def inference_data(posterior: dict[str, np.ndarray], sample_stats: dict[str, np.ndarray]):
    """``InferenceData`` of arrays ``(chain, draw, ...)``: a posterior group and, when not empty,
    a sample_stats group."""
    groups = {"posterior": posterior}
    if sample_stats:
        groups["sample_stats"] = sample_stats
    return _from_dict(groups)


def summary_table(posterior: dict[str, np.ndarray]) -> pd.DataFrame:
    """The :func:`sgmcmc.summary` table of arrays ``(chain, draw, ...)``, rows in the dict's order."""
    az = arviz()

    idata = _from_dict({"posterior": posterior})
    stat_funcs = {
        "mean": np.mean,
        "sd": lambda x: float(np.std(x, ddof=1)),
        "5%": _quantile(0.05),
        "95%": _quantile(0.95),
    }
    if len(next(iter(posterior.values()))) == 1:
        with _one_chain_notice_hidden():
            df = az.summary(idata, kind="diagnostics", stat_funcs=stat_funcs, extend=True, round_to="none")
        _say_one_chain_once()
    else:
        df = az.summary(idata, kind="diagnostics", stat_funcs=stat_funcs, extend=True, round_to="none")
    # ArviZ may sort the variables by name; keep the samples' dict order.
    rank = {name: i for i, name in enumerate(posterior)}
    order = sorted(range(len(df)), key=lambda i: (rank[df.index[i].split("[")[0]], i))
    return df.iloc[order][SUMMARY_COLUMNS].astype(float)
