"""The control-variate set-up: find the posterior mode by SGD, then fix the control
variate there with one full-data gradient (Baker et al. 2018; SPEC §3)."""

from __future__ import annotations

import numpy as np

from .chain import run_chunked
from .errors import DivergenceError
from .sampler import Sampler


def find_mode_and_anchor(sampler: Sampler, verbose: bool) -> None:
    r"""Run ``n_iters_opt`` steps of :math:`\hat\theta \leftarrow \hat\theta + h\,g(\hat\theta)`
    from the sampler's starting values, compute :math:`\nabla\log p(\hat\theta|x)` over the full
    dataset in batches, and leave the chain at :math:`\hat\theta`."""
    settings = sampler.control_variate
    run_chunked(
        lambda k: ({}, sampler.run_opt_chunk(k)),
        settings.n_iters_opt,
        {},
        np.dtype(sampler.dtype.as_numpy_dtype),
        desc=f"{sampler.method}: finding the mode",
        verbose=verbose,
        hint="try a smaller opt_stepsize",
        keep_on_interrupt=False,
    )
    mode = {k: v.numpy() for k, v in sampler.params.items()}
    anchor_grad = sampler.full_data_gradient()
    for name in mode:
        if not (np.all(np.isfinite(mode[name])) and np.all(np.isfinite(anchor_grad[name].numpy()))):
            raise DivergenceError(
                f"{sampler.method}: the mode search ended at a non-finite value or gradient of "
                f"{name!r}; try a smaller opt_stepsize",
                iteration=settings.n_iters_opt,
            )
    sampler.set_anchor(anchor_grad)
