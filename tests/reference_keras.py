"""Independent numpy versions of what ``sgmcmc.keras`` computes, for tests/test_keras.py.

Everything here is float64 numpy written from the formulas (no TensorFlow, no Keras): the
two-layer tanh network the tests build in Keras, each likelihood's per-row log-density,
inference-mode batch normalisation, the Normal prior, the ensemble average of the predictive
and the scores of ``evaluate``.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats


def mlp(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, bn: dict | None = None) -> np.ndarray:
    """tanh(x W1 + b1) [→ batch norm in inference mode] → · W2 + b2; dropout is the identity in
    inference mode. ``bn``: gamma, beta, moving_mean, moving_variance, epsilon."""
    h = np.tanh(x.astype(np.float64) @ w1 + b1)
    if bn is not None:
        h = (h - bn["moving_mean"]) / np.sqrt(bn["moving_variance"] + bn["epsilon"]) * bn["gamma"] + bn["beta"]
    return h @ w2 + b2


def conv2d_valid(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Keras' Conv2D, stride 1, "valid" padding, channels last: x [n, h, w, c], kernel
    [kh, kw, c, f] → [n, h − kh + 1, w − kw + 1, f] (a correlation, as Keras computes it)."""
    kh, kw = kernel.shape[:2]
    h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], h, w, kernel.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cf->nhwf", x[:, i : i + h, j : j + w, :], kernel[i, j])
    return out + bias


def max_pool_2x2(x: np.ndarray) -> np.ndarray:
    """Keras' MaxPooling2D(2): non-overlapping 2×2 windows, a trailing odd row/column dropped."""
    n, h, w, c = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2, :]
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def small_cnn(x: np.ndarray, side: int, k1, b1, k2, b2, w, b) -> np.ndarray:
    """bnn_keras.py's CNN on flat images: reshape → conv 3×3 + relu → max pool → conv 3×3 + relu
    → max pool → flatten (row-major, channels last) → dense."""
    h = x.astype(np.float64).reshape(-1, side, side, 1)
    h = max_pool_2x2(np.maximum(conv2d_valid(h, k1, b1), 0.0))
    h = max_pool_2x2(np.maximum(conv2d_valid(h, k2, b2), 0.0))
    return h.reshape(len(h), -1) @ w + b


def log_lik_rows(form: str, y: np.ndarray, out: np.ndarray, noise_sd: float | None = None) -> np.ndarray:
    """Per-row log-likelihoods of the forms of ``from_model``."""
    if form == "categorical":
        log_probs = out - special.logsumexp(out, axis=1, keepdims=True)
        if y.ndim == 2:  # one-hot
            return (y * log_probs).sum(1)
        return log_probs[np.arange(len(y)), y]
    if form == "bernoulli":
        z = out[:, 0]
        return y * z - np.logaddexp(0.0, z)
    if form == "normal":
        return stats.norm.logpdf(y, out[:, 0] if y.ndim == 1 else out, noise_sd).reshape(len(y), -1).sum(1)
    if form == "student_t":  # the tests' own likelihood function: t with 4 degrees of freedom, scale 0.5
        return stats.t.logpdf(y, 4.0, out[:, 0], 0.5)
    raise ValueError(form)


def normal_log_prior(params: dict[str, np.ndarray], sds: dict[str, float]) -> float:
    """Σ log N(θ | 0, s²) over every element of every parameter."""
    return float(sum(stats.norm.logpdf(np.asarray(v, np.float64), 0.0, sds[k]).sum() for k, v in params.items()))


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(z - special.logsumexp(z, axis=-1, keepdims=True))


def ensemble_probs(outputs: list[np.ndarray], form: str) -> np.ndarray:
    """The average over draws of each draw's class probabilities (probabilities, not logits)."""
    if form == "categorical":
        return np.mean([softmax(o) for o in outputs], axis=0)
    p = np.mean([special.expit(o[:, 0]) for o in outputs], axis=0)
    return np.stack([1 - p, p], axis=1)


def ensemble_normal(means: list[np.ndarray], sds: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Mixture of N(μ_d, σ_d²) with equal weights: its mean and sd (law of total variance)."""
    mu = np.stack([m[:, 0] for m in means])
    mean = mu.mean(0)
    variance = np.mean(np.asarray(sds)[:, None] ** 2, axis=0) + mu.var(0)
    return mean, np.sqrt(variance)
