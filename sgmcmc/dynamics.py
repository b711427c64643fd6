"""The update rules of each dynamics, as pure functions of tensors.

Notation (SPEC §3): ε is the stepsize, g a stochastic gradient of the log posterior at θ,
ξ a standard normal draw of θ's shape. Nothing here draws random numbers, reads data or
touches variables: the kernels in :mod:`sgmcmc.kernels` supply g and ξ.
"""

from __future__ import annotations

import tensorflow as tf


def sgld_update(theta: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize: float) -> tf.Tensor:
    r"""One SGLD step (Welling & Teh 2011).

    .. math:: \theta' = \theta + \tfrac{\epsilon}{2} g(\theta) + \sqrt{\epsilon}\,\xi
    """
    return theta + (0.5 * stepsize) * grad + (stepsize**0.5) * noise


def momentum_refresh(noise: tf.Tensor, stepsize: float) -> tf.Tensor:
    r"""A fresh SGHMC / SGNHT momentum, :math:`\nu \sim N(0, \epsilon)`."""
    return (stepsize**0.5) * noise


def sghmc_update(
    theta: tf.Tensor, nu: tf.Tensor, grad: tf.Tensor, noise: tf.Tensor, stepsize: float, alpha: float
) -> tuple[tf.Tensor, tf.Tensor]:
    r"""One inner SGHMC step with :math:`\hat\beta = 0` (Chen et al. 2014).

    .. math::
        \nu' = \nu + \epsilon g(\theta) - \alpha\nu + \sqrt{2\alpha\epsilon}\,\xi, \qquad
        \theta' = \theta + \nu'

    Returns ``(theta', nu')``.
    """
    nu = nu + stepsize * grad - alpha * nu + ((2.0 * alpha * stepsize) ** 0.5) * noise
    return theta + nu, nu


def sgnht_update(
    theta: tf.Tensor,
    u: tf.Tensor,
    thermostat: tf.Tensor,
    grad: tf.Tensor,
    noise: tf.Tensor,
    stepsize: float,
    a: float,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    r"""One SGNHT step (Ding et al. 2014), one scalar thermostat :math:`\alpha` per parameter.

    .. math::
        u' = u + \epsilon g(\theta) - \alpha u + \sqrt{2a\epsilon}\,\xi, \qquad
        \theta' = \theta + u', \qquad
        \alpha' = \alpha + \overline{u'^2} - \epsilon

    where :math:`\overline{u'^2}` is the mean over the parameter's elements.
    Returns ``(theta', u', alpha')``.
    """
    u = u + stepsize * grad - thermostat * u + ((2.0 * a * stepsize) ** 0.5) * noise
    thermostat = thermostat + tf.reduce_mean(tf.square(u)) - stepsize
    return theta + u, u, thermostat


def sgd_update(theta: tf.Tensor, grad: tf.Tensor, stepsize: float) -> tf.Tensor:
    r"""One stochastic-gradient ascent step on the log posterior, :math:`\theta' = \theta + h g(\theta)`."""
    return theta + stepsize * grad
