r"""When :func:`sgmcmc.sample` may stop: bulk and tail ESS and rank-normalised split R-hat of
every scalar element (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, computed by ArviZ),
after a burn-in found from the draws.

**Burn-in.** The chains start at the mode and at draws of the Laplace approximation, so most
runs need little; it is still found, not assumed: of the candidate cuts
:data:`BURN_IN_FRACTIONS` of the kept draws, the first after which every element's R-hat is at
most ``max_rhat`` (the chains agree from there on); when none qualifies, the cut with the least
worst R-hat (ties: the earlier). ESS, MCSE and the estimates are then taken on the draws after it.
Choosing among six cuts by R-hat is a mild selection on the statistic that decides stopping;
the MCSE coverage benchmark (``benchmarks/bench_sample_mcse.py``) measures its effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.arviz_io import _from_dict, arviz

#: Candidate burn-ins, as fractions of the kept draws of each chain.
BURN_IN_FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: The per-element columns of :meth:`Convergence.table`, in order.
COLUMNS = ["mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"]


def _rhat(posterior: dict[str, np.ndarray]) -> np.ndarray:
    az = arviz()

    values = az.rhat(_from_dict({"posterior": posterior}), method="rank")
    return np.concatenate([np.ravel(values[k].values) for k in posterior])


def diagnostics(posterior: dict[str, np.ndarray]) -> pd.DataFrame:
    """Mean, sd (ddof 1), MCSE of both, bulk/tail ESS and R-hat of every scalar element of
    arrays ``(chain, draw, *shape)``: one row each, named as ArviZ does (``beta[3]``), in the
    dict's order."""
    az = arviz()

    idata = _from_dict({"posterior": posterior})
    table = az.summary(idata, kind="diagnostics", round_to="none")
    rank = {name: i for i, name in enumerate(posterior)}
    order = sorted(range(len(table)), key=lambda i: (rank[table.index[i].split("[")[0]], i))
    table = table.iloc[order]
    table.insert(0, "sd", np.concatenate([np.ravel(np.std(v, axis=(0, 1), ddof=1)) for v in posterior.values()]))
    table.insert(0, "mean", np.concatenate([np.ravel(np.mean(v, axis=(0, 1))) for v in posterior.values()]))
    return table[COLUMNS].astype(float)


@dataclass(frozen=True)
class Convergence:
    """The state of the chains after a round.

    Attributes
    ----------
    burn_in : int
        Kept draws per chain dropped as burn-in.
    table : pandas.DataFrame
        :data:`COLUMNS` per scalar element, on the draws after the burn-in.
    target_ess, max_rhat : float
        The targets.
    """

    burn_in: int
    table: pd.DataFrame
    target_ess: float
    max_rhat: float

    @property
    def worst_ess(self) -> float:
        return float(np.nanmin(self.table[["ess_bulk", "ess_tail"]].to_numpy()))

    @property
    def worst_rhat(self) -> float:
        values = self.table["r_hat"].to_numpy()
        return float(np.inf if np.any(np.isnan(values)) else values.max())

    @property
    def converged(self) -> bool:
        return self.worst_ess >= self.target_ess and self.worst_rhat <= self.max_rhat

    def worst(self, k: int = 3) -> pd.DataFrame:
        """The ``k`` elements furthest from the targets (lowest ESS ratio or highest R-hat)."""
        t = self.table
        badness = np.maximum(
            self.target_ess / np.maximum(np.minimum(t["ess_bulk"], t["ess_tail"]), 1e-9),
            (t["r_hat"] - 1) / max(self.max_rhat - 1, 1e-9),
        )
        return t.iloc[np.argsort(-badness.to_numpy(), kind="stable")[:k]]


def assess(posterior: dict[str, np.ndarray], target_ess: float, max_rhat: float) -> Convergence:
    """Find the burn-in (module docstring) and the diagnostics after it.

    Parameters
    ----------
    posterior
        Name -> kept draws ``(chain, draw, *shape)``, at least 2 chains.
    target_ess, max_rhat
        The targets.
    """
    n = next(iter(posterior.values())).shape[1]
    best = None
    for fraction in BURN_IN_FRACTIONS:
        cut = int(fraction * n)
        if n - cut < 8:  # too few draws to split
            break
        worst = float(np.max(_rhat({k: v[:, cut:] for k, v in posterior.items()})))
        if worst <= max_rhat:
            best = (cut, worst)
            break
        if best is None or worst < best[1]:
            best = (cut, worst)
    cut = 0 if best is None else best[0]
    return Convergence(cut, diagnostics({k: v[:, cut:] for k, v in posterior.items()}), target_ess, max_rhat)
