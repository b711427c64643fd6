"""What :func:`sgmcmc.sample` returns beside the draws: :class:`SampleReport` (how far to trust
them, and how they were made) and :class:`AdaptedSamples` (the usual samples plus the report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.samples import Samples


@dataclass
class SampleReport:
    """How :func:`sgmcmc.sample` ran and how far to trust its draws.

    Attributes
    ----------
    method : str
        The sampler (``"sgldcv"``, ``"sghmccv"``).
    preconditioner : str
        ``"dense"`` (the chain moves the whitened parameters of the Laplace approximation at the
        mode: SGLD with the constant preconditioner A⁻¹) or ``"per-parameter"`` (one stepsize per
        parameter from the stability check).
    why : str
        Why this choice, in words, with the figures it rests on.
    stepsize : float or dict
        On the whitened scale (dense) or per parameter.
    distortion : float
        The stationary sd error the stepsize allows on the Gaussian approximation (the stability
        check's criterion, with the minibatch noise).
    dim : int
        Unconstrained elements.
    condition_number, scaled_condition_number : float
        κ of the Hessian at the mode, raw and after one scale per element (dense path only; NaN
        otherwise).
    mode_search : dict
        What the mode search found (iterations, seconds).
    minibatch_size, n_rows, n_chains : int
    iterations : int
        Sampling iterations per chain (after the mode search).
    burn_in : int
        Iterations per chain dropped: the warm-up before the last re-estimation of the metric plus
        the burn-in found from the draws after it.
    adaptations : int
        How often the metric was re-estimated from the draws.
    thin : int
        Kept one iteration in ``thin``.
    converged : bool
        Every element has bulk and tail ESS ≥ ``target_ess`` and R-hat ≤ ``max_rhat``.
    target_ess, max_rhat : float
    worst_ess, worst_rhat : float
    stopped_by : str
        ``"targets"``, ``"max_iters"`` or ``"max_time"``.
    seconds : dict
        Wall-clock seconds by phase (``checks and mode``, ``curvature``, ``sampling``, ``total``).
    seed : int
    table : pandas.DataFrame
        Per scalar element: mean, sd, mcse_mean, mcse_sd, ess_bulk, ess_tail, r_hat.
    """

    method: str
    preconditioner: str
    why: str
    stepsize: Any
    distortion: float
    dim: int
    condition_number: float
    scaled_condition_number: float
    mode_search: dict
    minibatch_size: int
    n_rows: int
    n_chains: int
    iterations: int
    burn_in: int
    thin: int
    adaptations: int
    converged: bool
    target_ess: float
    max_rhat: float
    worst_ess: float
    worst_rhat: float
    stopped_by: str
    seconds: dict
    seed: int
    table: pd.DataFrame = field(repr=False)

    def summary(self) -> pd.DataFrame:
        """:attr:`table` with the run's facts in ``DataFrame.attrs`` (every field but the table)."""
        out = self.table.copy()
        out.attrs.update({k: v for k, v in self.__dict__.items() if k != "table"})
        return out

    def __str__(self) -> str:
        step = (f"{self.stepsize:.3g}" if isinstance(self.stepsize, float)
                else ", ".join(f"{k}: {v:.3g}" for k, v in self.stepsize.items()))
        kappa = ("" if not np.isfinite(self.condition_number) else
                 f"; κ {self.condition_number:.3g} (after per-element scaling {self.scaled_condition_number:.3g})")
        verdict = (f"converged: every element has bulk and tail ESS ≥ {self.target_ess:g} and R-hat ≤ "
                   f"{self.max_rhat:g} (worst ESS {self.worst_ess:.0f}, R-hat {self.worst_rhat:.4f})"
                   if self.converged else
                   f"NOT converged ({self.stopped_by} reached): worst ESS {self.worst_ess:.0f} (target "
                   f"{self.target_ess:g}), worst R-hat {self.worst_rhat:.4f} (target {self.max_rhat:g})")
        lines = [
            f"sgmcmc.sample: {self.method}, {self.preconditioner} preconditioner, stepsize {step}",
            f"  why: {self.why}",
            f"  d = {self.dim}, N = {self.n_rows:,}, minibatch {self.minibatch_size:,}{kappa}",
            f"  {self.n_chains} chains x {self.iterations:,} iterations (burn-in {self.burn_in:,}, thin {self.thin}; "
            f"metric re-estimated {self.adaptations}x) "
            f"in {self.seconds.get('total', float('nan')):.1f} s; seed {self.seed}",
            f"  {verdict}",
        ]
        return "\n".join(lines)


class AdaptedSamples(Samples):
    """:class:`~sgmcmc.Samples` from :func:`sgmcmc.sample`: every analysis function works on it;
    ``report`` says how it was made and how far to trust it, and :meth:`summary` returns the
    report's table (mean, sd, MCSE of both, bulk/tail ESS, R-hat per element; the run's facts in
    ``DataFrame.attrs``)."""

    report: SampleReport | None = None

    def summary(self) -> pd.DataFrame:  # type: ignore[override]
        if self.report is None:
            return super().summary()
        return self.report.summary()

    def __reduce__(self):
        return _rebuild_adapted, (dict(self), dict(self.__dict__))


def _rebuild_adapted(draws: dict, state: dict) -> "AdaptedSamples":
    out = AdaptedSamples.__new__(AdaptedSamples)
    dict.update(out, draws)
    out.__dict__.update(state)
    return out


def adapted(samples: Samples, report: SampleReport | None) -> AdaptedSamples:
    """``samples`` as :class:`AdaptedSamples` carrying ``report``."""
    return _rebuild_adapted(dict(samples), {**samples.__dict__, "report": report})
