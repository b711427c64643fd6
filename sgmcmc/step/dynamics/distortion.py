r"""From a dynamics' stationary-sd formula to its stability limit and safe stepsizes.

Each dynamics that the stepsize check judges gives :math:`\rho(\mu, q)`, the stationary sd of its
discretised recursion over the target's along a direction of scaled curvature μ = ελ with
scaled gradient noise q, on a Gaussian (its ``sd_ratio``; ``inf`` where it grows, NaN where it
neither grows nor settles). What the check needs follows from ρ alone, by a grid scan and
bisection (SGLD has closed forms and overrides them); the module docstring of
:mod:`sgmcmc.stability.curvature` derives the formulas.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

RatioFn = Callable[..., float]


def stability_limit(sd_ratio: RatioFn, **hyper: float) -> float:
    """The scaled curvature μ at which the recursion becomes unstable: bisection on where
    ``sd_ratio`` turns infinite (64 when it never does below 64). The noise does not move it."""

    def grows(mu: float) -> bool:
        return bool(np.isinf(sd_ratio(mu, **hyper)))

    lo, hi = 1e-6, 64.0
    if not grows(hi):
        return hi
    for _ in range(80):
        mid = np.sqrt(lo * hi)
        lo, hi = (lo, mid) if grows(mid) else (mid, hi)
    return float(lo)


def safe_factor(sd_ratio: RatioFn, mu: float, noise: float = 0.0, distortion: float = 0.1, **hyper: float) -> float:
    r"""The largest c such that the stepsize times c keeps :math:`|\rho - 1| \le \delta` along a
    direction of scaled curvature μ and scaled noise q (both scale with the stepsize: cμ, cq), by
    a geometric grid scan and bisection."""
    if mu <= 0 and noise <= 0:
        return np.inf

    def bad(c: float) -> bool:  # a NaN ratio (no friction: no stationary sd) is not judged
        ratio = sd_ratio(c * mu, noise=c * noise, **hyper)
        return bool(np.isinf(ratio) or abs(ratio - 1.0) > distortion)

    return last_good(bad, np.geomspace(1e-6, 64.0, 600) / max(mu, noise))


def largest_safe_mu(sd_ratio: RatioFn, distortion: float = 0.1, **hyper: float) -> float:
    r"""The smallest scaled curvature μ at which :math:`|\rho(\mu) - 1|` reaches ``distortion``
    (grid scan over (0, 4] and bisection)."""

    def bad(mu: float) -> bool:  # a NaN ratio (no friction: no stationary sd) is not judged
        ratio = sd_ratio(mu, **hyper)
        return bool(np.isinf(ratio) or abs(ratio - 1.0) > distortion)

    return last_good(bad, np.geomspace(1e-4, 4.0, 400))


def last_good(bad: Callable[[float], bool], grid: np.ndarray) -> float:
    """The largest x before ``bad`` first holds on the increasing ``grid`` (its last point when
    it never does, 0 when it holds at the first), refined by 60 bisections."""
    flags = [bad(x) for x in grid]
    if not any(flags):
        return float(grid[-1])
    i = flags.index(True)
    if i == 0:
        return 0.0
    lo, hi = grid[i - 1], grid[i]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if bad(mid) else (mid, hi)
    return float(lo)
