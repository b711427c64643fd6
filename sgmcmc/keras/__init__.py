"""Keras models as Bayesian neural networks (SPEC §13).

``bnn = sgmcmc.keras.from_model(model, "categorical")`` turns a built Keras 3 model into
``bnn.params``, ``bnn.log_lik`` and ``bnn.log_prior`` for any sampler, and
``bnn.predict(samples, x)`` gives the posterior-predictive ensemble; :func:`evaluate` and
:func:`plot_calibration` score it, :func:`agreement` and :func:`total_variation` compare it with a
reference's predictions (e.g. HMC's), :func:`to_model` turns one draw back into a Keras model.

This module imports Keras; ``import sgmcmc`` does not import it (``sgmcmc.keras`` is loaded on
first use).
"""

from .likelihoods import NOISE_LOG_SCALE
from .metrics import agreement, evaluate, plot_calibration, total_variation
from .network import BayesianNetwork, from_model, to_model

__all__ = [
    "BayesianNetwork", "NOISE_LOG_SCALE", "agreement", "evaluate", "from_model", "plot_calibration", "to_model",
    "total_variation",
]
