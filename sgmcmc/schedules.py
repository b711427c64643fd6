"""Stepsize schedules (SPEC §8): accepted wherever a stepsize is, alone or in a per-parameter
dict, and evaluated in-graph at the 1-based global iteration ``t`` (the counter burn-in and
thinning use, so a continued or resumed chain continues its schedule).

A schedule is a callable ``schedule(t) -> tensor`` of an int64 scalar tensor; the kernels
evaluate it through :func:`sgmcmc.step.dynamics.base.stepsize_at`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tensorflow as tf


class Schedule:
    """Base class: a positive stepsize as a function of the iteration."""

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def at(self, t: int) -> float:
        """The value at iteration ``t``, as a Python float (for tables and plots)."""
        return float(self(tf.constant(t, tf.int64)))


@dataclass(frozen=True)
class polynomial(Schedule):  # noqa: N801 - public name fixed by the SPEC
    r"""The decreasing stepsize of the thesis (ch.5, LDA; Teh et al. 2016):

    .. math:: h_m = h\,(1 + m/\tau)^{-\kappa}

    with m = t − 1, so the first iteration uses h. κ ∈ (0.5, 1] gives the classical conditions
    Σ h_m = ∞, Σ h_m² < ∞.
    """

    h: float
    tau: float
    kappa: float

    def __post_init__(self):
        for name in ("h", "tau"):
            if not (isinstance(getattr(self, name), (int, float)) and getattr(self, name) > 0):
                raise ValueError(f"polynomial schedule: {name} must be a positive number, got {getattr(self, name)!r}")
        if not (isinstance(self.kappa, (int, float)) and self.kappa >= 0):
            raise ValueError(f"polynomial schedule: kappa must be >= 0, got {self.kappa!r}")

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        m = tf.cast(t, tf.float64) - 1.0
        return self.h * tf.pow(1.0 + m / self.tau, -self.kappa)


@dataclass(frozen=True)
class cyclical(Schedule):  # noqa: N801 - public name fixed by the SPEC
    r"""Cyclical stepsize (Zhang et al. 2020, eq. 1): ``n_cycles`` cosine cycles over ``n_iters``
    iterations,

    .. math:: h_t = \frac{h}{2}\left[\cos\left(\frac{\pi\,\mathrm{mod}(t - 1, \lceil T/M\rceil)}
              {\lceil T/M\rceil}\right) + 1\right]

    (T = ``n_iters``, M = ``n_cycles``): each cycle starts at h and decays towards 0. Past
    ``n_iters`` the cycles simply continue.
    """

    h: float
    n_cycles: int
    n_iters: int

    def __post_init__(self):
        if not (isinstance(self.h, (int, float)) and self.h > 0):
            raise ValueError(f"cyclical schedule: h must be a positive number, got {self.h!r}")
        for name in ("n_cycles", "n_iters"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"cyclical schedule: {name} must be a whole number >= 1, got {getattr(self, name)!r}")

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        return cosine_cycle(self.h, t, self.n_iters, self.n_cycles)[0]


def cosine_cycle(h: float, t: tf.Tensor, n_iters: int, n_cycles: int) -> tuple[tf.Tensor, tf.Tensor]:
    r"""The cyclical stepsize :math:`h_t` of :class:`cyclical` at the 1-based iteration ``t`` and
    the position in its cycle, :math:`r_t = \mathrm{mod}(t - 1, \lceil T/M\rceil)/\lceil T/M\rceil`
    in [0, 1) (both float64; also the kernels of :mod:`sgmcmc.step.dynamics.cyclical`)."""
    period = math.ceil(n_iters / n_cycles)
    phase = tf.cast(tf.math.floormod(tf.cast(t, tf.int64) - 1, period), tf.float64) / period
    return 0.5 * h * (tf.cos(math.pi * phase) + 1.0), phase


@dataclass(frozen=True)
class Scaled(Schedule):
    """``factor`` times another schedule (``temperature=``'s stepsize, :mod:`sgmcmc.tempering`)."""

    schedule: Schedule
    factor: float

    def __call__(self, t: tf.Tensor) -> tf.Tensor:
        return self.factor * self.schedule(t)
