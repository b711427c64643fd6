"""The digits Bayesian neural network, defined once: the data split, the network, the prior.

``bnn_keras.py`` (the SG-MCMC ensembles) and ``_hmc_reference.py`` (their full-batch HMC
reference) both import it, so the reference samples the same posterior the ensembles are
measured on: scikit-learn's bundled 8 × 8 digits (no download), pixels / 16, split 962 training /
241 validation / 594 test (stratified, seed 0); the Keras MLP 64-100-10 (ReLU) with the
categorical likelihood on its logits and independent N(0, 2²) priors on every weight and bias
(``DIGITS["prior_scale"]``). :func:`load_hmc_reference` reads the reference's cached test-set
predictive (``vignettes/data/digits_hmc_reference.npz``) and refuses a cache made for another
split or network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import sgmcmc  # noqa: F401 -- first: it imports TensorFlow without its start-up lines (sgmcmc/_quiet.py)
import keras  # noqa: E402
import numpy as np  # noqa: E402

#: SGHMC settings for the digits MLP. prior_scale 2: the sweep of the full version (0.5 … 5)
#: found the ensemble's NLL and ECE best from 2 up; minibatches of 100 of 962 rows; alpha 0.1
#: (0.01, 0.5 and full-data minibatches measured the same scores).
DIGITS = dict(hidden=100, prior_scale=2.0, stepsize=2e-4, alpha=0.1, L=5, minibatch_size=100)

#: The full-batch HMC reference's cache, written by ``python vignettes/_hmc_reference.py``.
REFERENCE = Path(__file__).resolve().parent / "data" / "digits_hmc_reference.npz"

#: The script that writes :data:`REFERENCE` (named in the loader's errors).
REFERENCE_SCRIPT = "vignettes/_hmc_reference.py"


def load_digits_split(seed: int = 0) -> dict[str, np.ndarray]:
    """The 8 × 8 digits, pixels / 16, split 962 / 241 / 594 (stratified)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.33, random_state=seed, stratify=y)
    X_train, X_val, y_train, y_val = train_test_split(X_train, y_train, test_size=0.2, random_state=seed, stratify=y_train)
    return {"x": X_train, "y": y_train, "x_val": X_val, "y_val": y_val, "x_test": X_test, "y_test": y_test, "side": 8}


def mlp(n_inputs: int, hidden: int) -> keras.Model:
    """The MLP n_inputs-hidden-10 (ReLU), logits out (Keras' default initialisation)."""
    return keras.Sequential([keras.Input((n_inputs,)), keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(10)])


def digits_bnn(model: keras.Model | None = None) -> Any:
    """The digits network as ``sgmcmc.keras.from_model`` sees it in ``bnn_keras.py``: the
    categorical likelihood and the prior N(0, ``DIGITS["prior_scale"]``²) on every weight.

    Parameters
    ----------
    model : keras.Model, optional
        A freshly built ``mlp(64, DIGITS["hidden"])`` (default: a new one).

    Returns
    -------
    sgmcmc.keras.BayesianNetwork
    """
    import sgmcmc.keras

    model = mlp(64, DIGITS["hidden"]) if model is None else model
    return sgmcmc.keras.from_model(model, "categorical", prior_scale=DIGITS["prior_scale"])


def fingerprint(data: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """What a cached reference must have been computed for: the rows of each split, a SHA-256 of
    the training and test arrays (inputs as float32, labels as int64), the network's hidden
    width and parameter count, and the prior scale.

    Parameters
    ----------
    data : dict, optional
        ``load_digits_split()`` (default: loaded here).

    Returns
    -------
    dict
        ``n_train``, ``n_test``, ``split_sha256``, ``hidden``, ``n_params``, ``prior_scale``.
    """
    data = load_digits_split() if data is None else data
    digest = hashlib.sha256()
    for key, dtype in (("x", np.float32), ("y", np.int64), ("x_test", np.float32), ("y_test", np.int64)):
        digest.update(np.ascontiguousarray(data[key], dtype=dtype).tobytes())
    hidden = DIGITS["hidden"]
    return {"n_train": len(data["y"]), "n_test": len(data["y_test"]), "split_sha256": digest.hexdigest(),
            "hidden": hidden, "n_params": 64 * hidden + hidden + hidden * 10 + 10,
            "prior_scale": float(DIGITS["prior_scale"])}


def load_hmc_reference(path: Path | str = REFERENCE, check: bool = True) -> dict[str, Any]:
    """The full-batch HMC reference's test-set posterior predictive, from its cache.

    Two independent HMC runs of the digits network (each its own chains, starts and adapted
    stepsizes): ``probs_a`` and ``probs_b``, float32 (n_test, 10), each the mean over its draws of
    the class probabilities, and ``probs``, their average (the reference to measure against; the
    distance between ``probs_a`` and ``probs_b``, ``floor_agreement`` and ``floor_tv``, is what
    the reference cannot resolve).

    Parameters
    ----------
    path : path, optional
        The cache (default :data:`REFERENCE`).
    check : bool
        Refuse a cache whose :func:`fingerprint` differs from the current split and network's.

    Returns
    -------
    dict
        ``probs``, ``probs_a``, ``probs_b``, ``y_test``; ``fingerprint``, ``settings``,
        ``diagnostics``, ``metrics`` (dicts); ``floor_agreement``, ``floor_tv`` (floats).

    Raises
    ------
    FileNotFoundError
        No cache: run ``python vignettes/_hmc_reference.py``.
    ValueError
        ``check`` and the cache was made for another split or network (run the script again).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no HMC reference at {path}: make it with `python {REFERENCE_SCRIPT}` "
                                f"(about half an hour on 2 cores; --quick for a small one, not a reference)")
    with np.load(path) as stored:
        out = {key: stored[key] for key in ("probs_a", "probs_b", "y_test")}
        meta = json.loads(str(stored["meta"]))
    out["probs"] = (0.5 * (out["probs_a"].astype(np.float64) + out["probs_b"])).astype(np.float32)
    out.update(meta)
    if check:
        now = fingerprint()
        if meta["fingerprint"] != now:
            changed = sorted(k for k in now if meta["fingerprint"].get(k) != now[k])
            raise ValueError(f"the HMC reference at {path} was made for another split or network ({', '.join(changed)} "
                             f"differ): make it again with `python {REFERENCE_SCRIPT}`")
    return out
