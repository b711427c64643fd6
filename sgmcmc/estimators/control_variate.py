r"""The control-variate estimate around a fixed point :math:`\hat\theta` (Baker et al. 2018):

.. math:: \tilde g(\theta) = \nabla\log p(\hat\theta|x) + g_S(\theta) - g_S(\hat\theta),

the same minibatch S in both terms (per chain). It wraps the plain estimator and keeps its
signature, so every dynamics can use it.
"""

from __future__ import annotations

import tensorflow as tf

from ..dynamics.base import Estimate, Params
from .plain import MinibatchGradient


class ControlVariateGradient:
    """``anchor`` and ``anchor_grad`` are variables (one chain's shapes, shared by all chains)
    holding :math:`\\hat\\theta` and :math:`\\nabla\\log p(\\hat\\theta|x)`; they are filled by
    :func:`sgmcmc.control_variates.find_mode_and_anchor` before sampling."""

    def __init__(self, plain: MinibatchGradient, anchor: dict[str, tf.Variable], anchor_grad: dict[str, tf.Variable]):
        self.plain = plain
        self.anchor = anchor
        self.anchor_grad = anchor_grad

    def __call__(self, params: Params, rng, t=None) -> Estimate:
        return self.on_one_batch(rng, t)(params)

    def on_one_batch(self, rng, t=None):
        """One minibatch per chain (and one anchor evaluation on it) shared by every evaluation
        of the returned ``params -> Estimate`` (see :meth:`MinibatchGradient.on_one_batch`)."""
        batch = self.plain.sample_minibatch(rng)
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
