"""Scores of predicted class probabilities: accuracy, log loss, calibration error, Brier score,
and the reliability diagram (SPEC §13)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Probabilities are clipped below at this before the log in ``nll`` (a float32 softmax can round
#: a very wrong class to exactly 0, whose log loss would be infinite).
MIN_PROBABILITY = 1e-12


def _as_probs(probs: Any, name: str = "probs") -> np.ndarray:
    """``probs`` as (n, K) class probabilities, or an error saying what is wrong."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 1:  # binary: P(y = 1)
        probs = np.stack([1.0 - probs, probs], axis=1)
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise ValueError(f"{name} must be class probabilities of shape (n, K), or P(y = 1) of shape (n,); got {probs.shape}")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0) or np.any(np.abs(probs.sum(1) - 1) > 1e-3):
        raise ValueError(f"{name} must be finite, non-negative and sum to 1 over each row (probabilities, not logits)")
    return probs


def _as_probs_and_labels(probs: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """``probs`` as (n, K) and ``y`` as integer labels (n,), or an error saying what is wrong."""
    probs = _as_probs(probs)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == probs.shape[1] and y.shape[1] > 1:
        y = y.argmax(1)  # one-hot
    elif y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or len(y) != len(probs):
        raise ValueError(f"y must be {len(probs)} integer labels or one-hot rows of {probs.shape[1]}; got shape {y.shape}")
    if not np.all(np.equal(np.mod(y, 1), 0)) or y.min() < 0 or y.max() >= probs.shape[1]:
        raise ValueError(f"y must hold integer labels 0 to {probs.shape[1] - 1}")
    return probs, y.astype(np.int64)


def _calibration_bins(probs: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width confidence bin ((m−1)/M, m/M], the first closed at 0: row count, mean
    confidence and accuracy (NaN for an empty bin)."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer; got {bins!r}")
    confidence = probs.max(1)
    correct = probs.argmax(1) == y
    index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    counts = np.bincount(index, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(index, confidence, minlength=bins) / counts
        accuracy = np.bincount(index, correct, minlength=bins) / counts
    return counts, mean_confidence, accuracy


def evaluate(probs: Any, y: Any, bins: int = 15) -> dict[str, float]:
    r"""Scores of predicted class probabilities against the labels.

    With :math:`p_{ik}` the probability of class k for row i, :math:`\hat y_i = \arg\max_k p_{ik}`
    and :math:`c_i = \max_k p_{ik}` its confidence:

    - ``accuracy`` :math:`= \frac1n\sum_i 1[\hat y_i = y_i]`;
    - ``nll`` :math:`= -\frac1n\sum_i \log p_{i y_i}` (probabilities clipped below at 1e-12);
    - ``ece`` :math:`= \sum_m \frac{|B_m|}{n}\,|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)|` over
      ``bins`` equal-width confidence bins :math:`B_m = \{i : (m-1)/M < c_i \le m/M\}` (Guo et al.
      2017);
    - ``brier`` :math:`= \frac1n\sum_i\sum_k (p_{ik} - 1[y_i = k])^2` (Brier 1950; for two classes
      twice the one-probability form :math:`(p_i - y_i)^2`).

    Parameters
    ----------
    probs : array, shape (n, K), or (n,) for P(y = 1) of two classes
        Predicted probabilities, e.g. ``bnn.predict(samples, x)``.
    y : array, shape (n,) integer labels or (n, K) one-hot
        The true classes.
    bins : int
        Number of confidence bins of the ECE.

    Returns
    -------
    dict
        ``accuracy``, ``nll``, ``ece``, ``brier`` (floats).
    """
    probs, y = _as_probs_and_labels(probs, y)
    n = len(y)
    counts, mean_confidence, accuracy = _calibration_bins(probs, y, bins)
    filled = counts > 0
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), y] = 1.0
    return {
        "accuracy": float(np.mean(probs.argmax(1) == y)),
        "nll": float(-np.mean(np.log(np.maximum(probs[np.arange(n), y], MIN_PROBABILITY)))),
        "ece": float(np.sum(counts[filled] / n * np.abs(accuracy[filled] - mean_confidence[filled]))),
        "brier": float(np.mean(np.sum((probs - onehot) ** 2, axis=1))),
    }


def _as_pair(probs: Any, ref_probs: Any) -> tuple[np.ndarray, np.ndarray]:
    probs, ref_probs = _as_probs(probs), _as_probs(ref_probs, "ref_probs")
    if probs.shape != ref_probs.shape:
        raise ValueError(f"probs {probs.shape} and ref_probs {ref_probs.shape} must be the same rows' predictions "
                         f"over the same classes (the same shape)")
    return probs, ref_probs


def agreement(probs: Any, ref_probs: Any) -> float:
    r"""Top-1 agreement of two predictive distributions on the same rows (Izmailov et al. 2021,
    the NeurIPS 2021 BDL competition's first metric):

    .. math:: \mathrm{agreement} = \frac1n\sum_i 1\big[\arg\max_k p_{ik} = \arg\max_k q_{ik}\big],

    p the method's, q the reference's (e.g. HMC's) predictive probabilities; ties go to the
    lower class index, as ``argmax``. 1 is perfect.

    Parameters
    ----------
    probs : array, shape (n, K), or (n,) for P(y = 1) of two classes
        The method's predicted probabilities (e.g. an ensemble's ``bnn.predict(samples, x)``).
    ref_probs : array of the same shape
        The reference's on the same rows.

    Returns
    -------
    float
    """
    probs, ref_probs = _as_pair(probs, ref_probs)
    return float(np.mean(probs.argmax(1) == ref_probs.argmax(1)))


def total_variation(probs: Any, ref_probs: Any) -> float:
    r"""Mean total-variation distance between two predictive distributions on the same rows
    (Izmailov et al. 2021, the NeurIPS 2021 BDL competition's second metric):

    .. math:: \mathrm{TV} = \frac1n\sum_i \tfrac12\sum_k |p_{ik} - q_{ik}|,

    in [0, 1]; 0 is perfect.

    Parameters
    ----------
    probs : array, shape (n, K), or (n,) for P(y = 1) of two classes
        The method's predicted probabilities.
    ref_probs : array of the same shape
        The reference's on the same rows.

    Returns
    -------
    float
    """
    probs, ref_probs = _as_pair(probs, ref_probs)
    return float(np.mean(0.5 * np.abs(probs - ref_probs).sum(1)))


def plot_calibration(probs: Any, y: Any, bins: int = 15, ax: Any = None, label: str | None = None) -> tuple[Any, Any]:
    """The reliability diagram: accuracy against mean confidence in each of ``bins`` equal-width
    confidence bins (points, sized by the bin's share of rows), with the diagonal of perfect
    calibration; the ECE in the legend.

    Parameters
    ----------
    probs : array, shape (n, K), or (n,) for P(y = 1)
        Predicted probabilities.
    y : array
        Integer labels (n,) or one-hot (n, K).
    bins : int
        Number of confidence bins.
    ax : matplotlib Axes, optional
        Where to draw (several models on one axes: call once per model). Default: a new figure.
    label : str, optional
        The legend entry (the ECE is appended).

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
    """
    import matplotlib.pyplot as plt

    probs_, y_ = _as_probs_and_labels(probs, y)
    counts, mean_confidence, accuracy = _calibration_bins(probs_, y_, bins)
    ece = evaluate(probs_, y_, bins)["ece"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.plot([0, 1], [0, 1], ":", color="grey", lw=1, label="perfect calibration")
    else:
        fig = ax.figure
    filled = counts > 0
    sizes = 8 + 200 * counts[filled] / counts.sum()
    (line,) = ax.plot(mean_confidence[filled], accuracy[filled], "-", lw=1,
                      label=f"{label + ': ' if label else ''}ECE {ece:.3f}")
    ax.scatter(mean_confidence[filled], accuracy[filled], s=sizes, color=line.get_color(), alpha=0.7)
    ax.set(xlabel="confidence (max probability)", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1), aspect="equal")
    ax.legend(loc="upper left", fontsize="small")
    return fig, ax
