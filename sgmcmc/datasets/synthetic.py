"""Small generated data sets for offline examples, tests and benchmarks."""

import numpy as np

_N_CONTINUOUS = 10
_WILDERNESS_P = np.array([0.45, 0.05, 0.44, 0.06])  # roughly covertype's four wilderness areas
_N_SOIL = 40
_POSITIVE_RATE = 0.6  # covertype: 369,172 of 581,012 rows have label 1
_MODEL_SEED = 20_170_901  # fixes the true model; `seed` only changes the sample drawn from it


def gaussian_mixture_data(n: int = 1000, seed: int = 2) -> np.ndarray:
    """Data of the thesis' Gaussian-mixture example (Baker 2018, section 4.6.1).

    Draws `n` points from ``1/2 N((0, 0), I) + 1/2 N((0.1, 0.1), I)``.

    Parameters
    ----------
    n : int, default 1000
        Number of points.
    seed : int, default 2
        Seed for ``numpy.random.default_rng``; the same seed gives the same data.

    Returns
    -------
    numpy.ndarray
        float32 array of shape (n, 2).
    """
    rng = np.random.default_rng(seed)
    second = rng.random(n) < 0.5
    x = rng.standard_normal((n, 2))
    x[second] += 0.1
    return x.astype(np.float32)


def _true_model() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fixed coefficients, continuous-feature skews and soil-type frequencies."""
    rng = np.random.default_rng(_MODEL_SEED)
    powers = rng.uniform(0.5, 3.0, _N_CONTINUOUS)  # feature = U ** power: skewed like distances
    soil_p = rng.dirichlet(np.full(_N_SOIL, 0.5))
    slopes = np.concatenate(
        [rng.normal(0.0, 1.5, _N_CONTINUOUS), rng.normal(0.0, 1.0, _WILDERNESS_P.size), rng.normal(0.0, 1.0, _N_SOIL)]
    )
    # Intercept chosen so the linear predictor's mean is logit(_POSITIVE_RATE); E[U ** p] = 1 / (1 + p).
    mean_features = np.concatenate([1.0 / (1.0 + powers), _WILDERNESS_P, soil_p])
    intercept = np.log(_POSITIVE_RATE / (1 - _POSITIVE_RATE)) - mean_features @ slopes
    return np.concatenate([[intercept], slopes]), powers, soil_p


def synthetic_covertype(
    n_rows: int = 581_012, seed: int = 0, *, return_coef: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Covertype-shaped data from a known logistic-regression model.

    Columns 1-10 are continuous in [0, 1) (``U ** p`` with a fixed skew ``p``
    per column), columns 11-14 a one-hot "wilderness area" and columns 15-54 a
    one-hot "soil type", as in the real data (12 non-zero features per row).
    Column 0 is a label in {0, 1} drawn from ``P(y = 1) = sigmoid(coef[0] +
    features @ coef[1:])`` with a fixed coefficient vector (the same for every
    `seed`). Runs in well under 2 s at full size.

    Parameters
    ----------
    n_rows : int, default 581012
        Number of rows (the real data set's by default).
    seed : int, default 0
        Seed for ``numpy.random.default_rng``; the same seed gives the same data.
    return_coef : bool, default False
        Also return the true coefficients.

    Returns
    -------
    data : numpy.ndarray
        float32 array of shape (n_rows, 55), laid out like ``get_dataset("covertype")``.
    coef : numpy.ndarray
        Only with `return_coef`: float64 array of length 55, the intercept then
        the 54 feature coefficients.
    """
    coef, powers, soil_p = _true_model()
    rng = np.random.default_rng(seed)
    rows = np.arange(n_rows)
    continuous = rng.random((n_rows, _N_CONTINUOUS), dtype=np.float32) ** powers.astype(np.float32)
    wilderness = 1 + _N_CONTINUOUS + rng.choice(_WILDERNESS_P.size, n_rows, p=_WILDERNESS_P)
    soil = 1 + _N_CONTINUOUS + _WILDERNESS_P.size + rng.choice(_N_SOIL, n_rows, p=soil_p)

    data = np.zeros((n_rows, 1 + _N_CONTINUOUS + _WILDERNESS_P.size + _N_SOIL), dtype=np.float32)
    data[:, 1 : 1 + _N_CONTINUOUS] = continuous
    data[rows, wilderness] = 1
    data[rows, soil] = 1
    eta = coef[0] + continuous @ coef[1 : 1 + _N_CONTINUOUS].astype(np.float32) + coef[wilderness] + coef[soil]
    data[:, 0] = rng.random(n_rows) < 1 / (1 + np.exp(-eta))
    if return_coef:
        return data, coef
    return data
