"""Trace plots through ArviZ."""

from __future__ import annotations

from typing import Any, Mapping

from .arviz_io import arviz
from .diagnostics import to_inference_data


def plot_trace(samples: Mapping[str, Any], var_names: list[str] | None = None, **kwargs):
    """Trace and density of every parameter: ``az.plot_trace`` on :func:`to_inference_data`.

    Parameters
    ----------
    samples
        A :class:`~sgmcmc.Samples` or a dict of arrays (one chain).
    var_names
        Parameters to plot (default all).
    **kwargs
        Passed to ``az.plot_trace`` (e.g. ``compact=False``, ``figsize``).

    Returns
    -------
    What ``az.plot_trace`` returns (with the matplotlib backend, an array of axes; the figure
    is ``axes.flat[0].figure``).
    """
    az = arviz()

    return az.plot_trace(to_inference_data(samples), var_names=var_names, **kwargs)
