"""Independent numpy SVRG and SAGA (Dubey et al. 2016) for a logistic regression with a N(0, 1)
prior, one chain, written from the formulas (not from sgmcmc's code), for tests/test_estimators.py.

Per-row gradient ∇log p(x_i|θ) = x_i (y_i − σ(x_i·θ)); prior gradient −θ; scale N/n.
"""

from __future__ import annotations

import numpy as np


def per_row(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[N, d]: the gradient of every row's log-likelihood at θ."""
    return x * (y - 1.0 / (1.0 + np.exp(-x @ theta)))[:, None]


def minibatch(theta, x, y, rows) -> np.ndarray:
    """g_S(θ) = −θ + (N/n) Σ_{i∈S} ∇log p(x_i|θ), S = ``rows`` (repeats count)."""
    return -theta + len(x) / len(rows) * per_row(theta, x[rows], y[rows]).sum(axis=0)


def full(theta, x, y) -> np.ndarray:
    return -theta + per_row(theta, x, y).sum(axis=0)


class SVRG:
    """g = ∇log p(θ̃|x) + g_S(θ) − g_S(θ̃); θ̃ := the first point evaluated at iteration t when
    (t − 1) % period == 0 (once per iteration)."""

    def __init__(self, x, y, period):
        self.x, self.y, self.period = x, y, period
        self.anchor = self.anchor_grad = None
        self.refreshed_at = 0

    def estimate(self, theta, rows, t, update=True):
        anchor, anchor_grad = self.anchor, self.anchor_grad
        if (t - 1) % self.period == 0 and self.refreshed_at != t:
            anchor, anchor_grad = theta.copy(), full(theta, self.x, self.y)
            if update:
                self.anchor, self.anchor_grad, self.refreshed_at = anchor, anchor_grad, t
        return anchor_grad + minibatch(theta, self.x, self.y, rows) - minibatch(anchor, self.x, self.y, rows)


class SAGA:
    """g = −θ + Σ_i φ_i + (N/n) Σ_{i∈S} (∇_i(θ) − φ_i); then φ_i := ∇_i(θ) for i ∈ S."""

    def __init__(self, x, y, theta0):
        self.x, self.y = x, y
        self.table = per_row(theta0, x, y)

    def estimate(self, theta, rows, update=True):
        rows = np.asarray(rows)
        new = per_row(theta, self.x[rows], self.y[rows])
        g = -theta + self.table.sum(axis=0) + len(self.x) / len(rows) * (new - self.table[rows]).sum(axis=0)
        if update:
            self.table[rows] = new
        return g
