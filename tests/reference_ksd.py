"""An independent numpy implementation of the IMQ kernel Stein discrepancy, for the tests.

Pairwise differences are formed explicitly, ``(m, m, d)``, and the Stein kernel written term
by term from its definition (Gorham & Mackey 2017; Liu, Lee & Jordan 2016):
k0(x, y) = div_x div_y k + grad_x k . s(y) + grad_y k . s(x) + k s(x).s(y). Small m only.
"""

from __future__ import annotations

import numpy as np


def stein_kernel_matrix(x: np.ndarray, s: np.ndarray, c: float = 1.0, beta: float = -0.5) -> np.ndarray:
    m, d = x.shape
    r = x[:, None, :] - x[None, :, :]
    q = c**2 + np.einsum("ijk,ijk->ij", r, r)
    k = q**beta
    grad_x = 2 * beta * q[..., None] ** (beta - 1) * r  # d k / d x_i
    grad_y = -grad_x
    # d^2 k / dx_l dy_l = d/dy_l [2 beta q^(beta-1) r_l], with dq/dy_l = -2 r_l, dr_l/dy_l = -1;
    # summed over the coordinates l one by one.
    mixed = 2 * beta * ((beta - 1) * q[..., None] ** (beta - 2) * (-2 * r) * r - q[..., None] ** (beta - 1))
    div = mixed.sum(axis=-1)
    term_x = np.einsum("ijk,jk->ij", grad_x, s)
    term_y = np.einsum("ijk,ik->ij", grad_y, s)
    return div + term_x + term_y + k * (s @ s.T)


def ksd(x: np.ndarray, s: np.ndarray, c: float = 1.0, beta: float = -0.5) -> float:
    return float(np.sqrt(stein_kernel_matrix(x, s, c, beta).mean()))
