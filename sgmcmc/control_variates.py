"""The control-variate set-up: find the posterior mode by SGD, then fix the control
variate there with one full-data gradient (Baker et al. 2018; SPEC §3)."""

from __future__ import annotations

import numpy as np

from .chain import run_mode_search
from .errors import DivergenceError
from .sampler import Sampler
from .tuning.curvature import warn_if_stepsize_too_large


def find_mode_and_anchor(sampler: Sampler, verbose: bool) -> None:
    r"""Run ``n_iters_opt`` steps of :math:`\hat\theta \leftarrow \hat\theta + h\,g(\hat\theta)`
    from the first starting values, compute :math:`\nabla\log p(\hat\theta|x)` over the full
    dataset in batches, and fix the control variate there. With one start for all chains the
    chains start at :math:`\hat\theta` (R); with a list of starts each keeps its own.
    ``n_iters_opt=0`` skips the search: the control variate is anchored at the first start.
    Then the stepsize is checked against the curvature there (a
    :class:`~sgmcmc.StepsizeWarning` if it distorts the sd by more than 10 %,
    :func:`sgmcmc.check_stepsize`)."""
    settings = sampler.control_variate
    if settings.n_iters_opt:
        run_mode_search(sampler, settings.n_iters_opt, verbose)
    anchor_grad = sampler.full_data_gradient_at_mode()
    for name, g in anchor_grad.items():
        if not np.all(np.isfinite(g.numpy())):
            raise DivergenceError(
                f"{sampler.method}: the full-data gradient at the mode estimate is not finite for "
                f"{name!r}; try a smaller opt_stepsize. No samples exist yet",
                iteration=settings.n_iters_opt,
            )
    sampler.set_anchor(anchor_grad)
    if sampler.shard is None:  # the curvature pass is not sharded yet: it would see this worker's rows only
        warn_if_stepsize_too_large(sampler)  # before sampling: stepsize x curvature at the mode
