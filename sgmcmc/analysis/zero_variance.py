r"""Zero-variance control variates (Mira et al. 2013; Baker 2018 thesis §3.4; Friel et al. 2016).

For a polynomial :math:`Q`, :math:`h(\theta) = \Delta Q(\theta) + \nabla Q(\theta)\cdot\nabla\log\pi(\theta)`
has mean zero under :math:`\pi` (integration by parts), so
:math:`\frac1n\sum_i [f(\theta_i) + a^\top h(\theta_i)]` estimates :math:`E_\pi f` for any
coefficients :math:`a`, with least variance at :math:`a = -\mathrm{Var}(h)^{-1}\mathrm{Cov}(h, f)`
(the thesis prints it without the minus sign; see the seeds' errata).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from .stein_discrepancy import flatten, points_and_scores


def _component_names(arrays: Mapping[str, np.ndarray]) -> list[str]:
    """ArviZ-style names of every scalar component: ``theta``, ``beta[3]``, ``W[1, 2]``."""
    names = []
    for name, value in arrays.items():
        shape = value.shape[1:]
        if not shape:
            names.append(name)
        else:
            names.extend(f"{name}[{', '.join(map(str, idx))}]" for idx in np.ndindex(*shape))
    return names


def control_variates(theta: np.ndarray, z: np.ndarray, order: int = 1) -> np.ndarray:
    r"""The basis of :math:`h` for every draw, ``(n, p)`` for order 1, ``(n, p + p(p+1)/2)`` for 2.

    Order 1, :math:`Q = \theta_i`: :math:`h_i = z_i` (:math:`z = \nabla\log\pi`).
    Order 2 adds, for every :math:`i \le j`, :math:`Q = \theta_i\theta_j`:
    :math:`h_{ij} = 2\delta_{ij} + \theta_j z_i + \theta_i z_j`.
    """
    if order == 1:
        return z
    if order != 2:
        raise ValueError(f"order must be 1 or 2, got {order}")
    i, j = np.triu_indices(theta.shape[1])
    quad = theta[:, j] * z[:, i] + theta[:, i] * z[:, j] + 2.0 * (i == j)
    return np.concatenate([z, quad], axis=1)


def zv(
    samples: Mapping[str, Any],
    f: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
    order: int = 1,
    gradients: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    r"""Zero-variance control-variate estimates of :math:`E_\pi[f(\theta)]`.

    The estimate is the average of :math:`f + h a` with :math:`h` of :func:`control_variates`
    and :math:`a = -\mathrm{Var}(h)^{-1}\mathrm{Cov}(h, f)`, computed as the least-squares fit
    of the centred :math:`f` on the centred :math:`h` (``numpy.linalg.lstsq`` with its default
    cut-off, so collinear columns, e.g. a constant component or order 2 with few draws, give
    the minimum-norm solution rather than a singular solve). Coefficients and the estimate use
    the same draws (as Mira et al. 2013 do); the bias this adds is O(1/n).

    With stochastic gradients (Baker 2018 thesis §3.4) :math:`h` is still mean zero given the
    sample when the gradient noise is, but its variance reduction is smaller; exact gradients
    (:func:`sgmcmc.full_gradients`) give the full benefit.

    Parameters
    ----------
    samples
        A :class:`~sgmcmc.Samples` or a dict of arrays (one chain); chains are pooled.
    f
        Maps a dict of arrays with one leading draw axis (the pooled draws, on the
        constrained scale) to an array ``(n, k)`` (or ``(n,)``). Default: every scalar
        component. :math:`h` uses the unconstrained values, where the gradients are taken.
    order
        Degree of :math:`Q`: 1 (:math:`p` control variates) or 2 (:math:`p + p(p+1)/2`).
    gradients
        Name -> :math:`\nabla\log\pi` at every sample; default the stored gradients.

    Returns
    -------
    pandas.DataFrame
        One row per component of ``f`` (named like :func:`sgmcmc.summary` when ``f`` is None,
        ``f[0]``, ``f[1]``, ... otherwise), columns ``zv`` (the estimate), ``mean`` (the plain
        average of f) and ``variance_reduction`` (per-draw variance of f over that of f + h a).
    """
    s, theta, z = points_and_scores(samples, gradients)
    pooled = s.pooled()
    if f is None:
        values = flatten(pooled, list(s))
        index = _component_names(pooled)
    else:
        values = np.asarray(f(pooled), np.float64)
        values = values.reshape(len(values), -1)
        index = [f"f[{k}]" for k in range(values.shape[1])]
    if len(values) != len(theta):
        raise ValueError(f"f returned {len(values)} rows for {len(theta)} draws")
    h = control_variates(theta, z, order)
    h_c = h - h.mean(0)
    f_c = values - values.mean(0)
    a = -np.linalg.lstsq(h_c, f_c, rcond=None)[0]
    corrected = values + h @ a
    var_f = values.var(0, ddof=1)
    var_corrected = corrected.var(0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        reduction = var_f / var_corrected
    return pd.DataFrame(
        {"zv": corrected.mean(0), "mean": values.mean(0), "variance_reduction": reduction}, index=index
    )
