r"""The control-variate estimate around a fixed point :math:`\hat\theta` (Baker et al. 2018):

.. math:: \tilde g(\theta) = \nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta),

the same minibatch S in both terms (per chain). It wraps the plain estimator and keeps its
signature, so every dynamics can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from ... import checks
from ..contract import Estimate, Minibatch, Params
from .plain import MinibatchGradient
from .spec import EstimatorSpec

@dataclass(frozen=True)
class ControlVariate(EstimatorSpec):
    """``estimator="cv"`` or ``ControlVariate(opt_stepsize=..., n_iters_opt=...)``: the
    estimate below around the mode that ``n_iters_opt`` SGD steps of size ``opt_stepsize`` find
    (None: chosen from the curvature, :func:`sgmcmc.run.mode_search.auto_opt_stepsize`);
    ``n_iters_opt=0`` anchors at the first start. The sampler builds the estimator itself (its
    mode, anchor and anchor gradient are the sampler's variables)."""

    opt_stepsize: Any = None
    n_iters_opt: int = 10_000  # the R package's default
    name: ClassVar[str] = "cv"
    stream_refusal: ClassVar[str | None] = "needs full-data passes (the mode search and its anchor's gradient over all N rows)"
    keywords: ClassVar[dict[str, str]] = {"opt_stepsize": "opt_stepsize", "n_iters_opt": "n_iters_opt"}

    def __post_init__(self):
        object.__setattr__(self, "n_iters_opt", checks.check_count(self.n_iters_opt, "n_iters_opt", allow_zero=True))

    def settings(self) -> dict[str, Any]:
        return dict(opt_stepsize=self.opt_stepsize, n_iters_opt=self.n_iters_opt, estimator="cv")


class ControlVariateGradient:
    """The estimator and its state, variables of one chain's shapes shared by all chains:
    ``mode`` (where the mode search is; it starts at ``mode_start``), ``anchor``
    (:math:`\\hat\\theta`) and ``anchor_grad`` (:math:`\\nabla\\log p(\\hat\\theta|x)`), fixed by
    :meth:`set_anchor` at the end of :func:`sgmcmc.run.mode_search.find_mode_and_anchor`."""

    def __init__(self, plain: MinibatchGradient, mode_start: dict[str, np.ndarray]):
        self.plain = plain
        self.mode_start = mode_start
        self.mode = {k: tf.Variable(v, name=f"{k}_mode") for k, v in mode_start.items()}
        self.anchor = {k: tf.Variable(v, name=f"{k}_anchor") for k, v in mode_start.items()}
        self.anchor_grad = {k: tf.Variable(tf.zeros_like(v), name=f"{k}_anchor_grad") for k, v in mode_start.items()}

    def reset(self, params: Params | None = None) -> None:
        """The mode search starts again at ``mode_start`` (``params``, the chains' starts, are
        not this estimator's: accepted for the stateful estimators' common ``reset``)."""
        for k, v in self.mode.items():
            v.assign(self.mode_start[k])

    def set_anchor(self, anchor_grad: dict[str, tf.Tensor]) -> None:
        """Fix the control variate at the mode-search state with its full-data gradient."""
        for k, v in self.mode.items():
            self.anchor[k].assign(v)
            self.anchor_grad[k].assign(anchor_grad[k])

    def take_mode(self, other: "ControlVariateGradient") -> None:
        """Take another estimator's mode-search result (one mode search shared); then
        :meth:`set_anchor` with its anchor gradient."""
        for k, v in self.mode.items():
            v.assign(other.mode[k])

    def variables(self) -> dict[str, dict[str, tf.Variable]]:
        """For checkpoints (the keys the sampler's checkpoints have always used)."""
        return dict(mode=self.mode, anchor=self.anchor, anchor_grad=self.anchor_grad)

    def __call__(self, params: Params, minibatch: Minibatch, rng=None, t=None) -> Estimate:
        return self.on_one_batch(minibatch, rng, t)(params)

    def on_one_batch(self, minibatch: Minibatch, rng=None, t=None):
        """One minibatch per chain (and one anchor evaluation on it) shared by every evaluation
        of the returned ``params -> Estimate`` (see :meth:`MinibatchGradient.on_one_batch`)."""
        batch = minibatch.rows
        k = self.plain.n_chains
        anchor = {name: tf.repeat(v[None], k, axis=0) for name, v in self.anchor.items()}
        at_anchor = self.plain.value_and_grad(anchor, batch, self.plain.scale)

        def evaluate(params: Params) -> Estimate:
            at_params = self.plain.value_and_grad(params, batch, self.plain.scale)
            grads = {
                name: self.anchor_grad[name][None] + at_params.grads[name] - at_anchor.grads[name]
                for name in at_params.grads
            }
            return Estimate(at_params.log_post, grads)

        return evaluate

    def estimate_and_rows(self, params: Params, minibatch: Minibatch) -> tuple[Estimate, Params]:
        r"""The estimate on a minibatch per chain and its per-row terms
        :math:`\nabla\log p(x_i|\theta) - \nabla\log p(x_i|\hat\theta)` ``[K, n, *shape]``, whose
        N/n-scaled sum is the estimate's random part (SGHMC's noise correction: their spread is
        the estimate's noise, as the plain rows' are the plain estimate's)."""
        batch = minibatch.rows
        k = self.plain.n_chains
        anchor = {name: tf.repeat(v[None], k, axis=0) for name, v in self.anchor.items()}
        at_params = self.plain.per_row_gradients(params, batch)
        at_anchor = self.plain.per_row_gradients(anchor, batch)
        return self(params, minibatch), {name: at_params[name] - at_anchor[name] for name in at_params}
