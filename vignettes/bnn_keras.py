"""Bayesian deep learning with a Keras network: a posterior ensemble against one trained network.

The data need no download: scikit-learn's bundled 8 × 8 digits (1,797 images, 10 classes,
pixels scaled to [0, 1]), split once (stratified, seed 0) into 962 training, 241 validation and
594 test images. The network, the same for every method, is a Keras MLP 64-100-10 (ReLU):

- **Adam** with early stopping: one network, trained on the training images with the
  validation loss watched (patience 20 epochs, best weights restored);
- **SGHMC**: ``sgmcmc.keras.from_model(model, "categorical", prior_scale=...)`` gives the
  network's ``log_lik``, ``log_prior`` and starting values; 4 chains from dispersed starts (fresh
  Keras initialisations), the kept draws of all chains pooled into a posterior ensemble whose
  prediction is the average of the draws' class probabilities (``bnn.predict``). The stepsize
  is one ``sgmcmc.check_stepsize`` accepts at Adam's weights (a mode estimate);
- **cSGHMC** (cyclical SGHMC, Zhang et al. 2020; issue 32.2): the same network, prior, starts,
  friction and iteration budget as SGHMC, in 4 cycles; each cycle's stepsize falls from
  SGHMC's stepsize (the same check's) along a cosine, its first 80 % is momentum SGD without
  noise (exploration) and its last 20 % SGHMC (sampling). Only sampling-stage iterations are
  kept, ``burn_in`` and ``thin`` counting within each cycle's sampling stage, so cSGHMC has its
  own: no burn-in, and a thinning that keeps about as many draws as SGHMC's. (Skipped with a
  message by a version of sgmcmc without ``sgmcmc.csghmc``.)

Scores on the test images (``sgmcmc.keras.evaluate``): accuracy, NLL (mean negative log
predictive probability), ECE (15 equal-width confidence bins) and Brier score; reliability
diagrams (``plot_calibration``); and the predictive entropy on out-of-distribution inputs — the
test digits rotated by 90° and uniform-noise images — against the in-distribution test digits.
The full version also samples the posterior for several prior scales, which is what decides
whether the ensemble beats Adam on NLL and ECE here (see vignettes/README.md for the table).

MNIST (55,000 training images, the same MLP on 784 inputs and a small CNN) runs too when its
files are already in sgmcmc's data cache (``--mnist auto``, the default: never downloads;
``--mnist yes`` downloads them if needed; ``--mnist no`` skips it).

``--quick`` runs a small version in about a minute and a half (fewer epochs and iterations, 2
chains; cSGHMC half SGHMC's iterations, in 2 cycles of the same length). ``--seed`` (default 1)
seeds Adam's initialisation and the samplers' starts and draws (the data split stays fixed).
"""

from __future__ import annotations

from _common import parse_args, savefig, timed  # first: selects the Agg backend
from _digits_bnn import DIGITS, load_digits_split, mlp  # the network, split and prior (one definition)

import math
import time

import keras
import matplotlib.pyplot as plt
import numpy as np

import sgmcmc

def mnist_cached() -> bool:
    """Are MNIST's files already in the cache (so ``get_dataset`` will not download)?"""
    from sgmcmc.datasets import cache_dir
    from sgmcmc.datasets.registry import lookup

    return all((cache_dir() / spec["name"]).exists() for spec in lookup("mnist")["files"].values())


def load_mnist_split() -> dict[str, np.ndarray]:
    """MNIST as sgmcmc ships it (55,000 train, 10,000 test), the last 5,000 training images
    held out for Adam's early stopping."""
    mnist = sgmcmc.get_dataset("mnist")
    X, y = mnist["train"]["images"].astype(np.float32), mnist["train"]["labels"].argmax(1)
    return {"x": X[:-5_000], "y": y[:-5_000], "x_val": X[-5_000:], "y_val": y[-5_000:],
            "x_test": mnist["test"]["images"].astype(np.float32), "y_test": mnist["test"]["labels"].argmax(1), "side": 28}


def cnn(side: int) -> keras.Model:
    """A small CNN on flat images (reshaped inside, so the data stay (n, side²))."""
    return keras.Sequential([
        keras.Input((side * side,)), keras.layers.Reshape((side, side, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dense(10),
    ])


def out_of_distribution(data: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs unlike the training images: the test digits rotated by 90°, and uniform noise."""
    side = data["side"]
    images = data["x_test"].reshape(-1, side, side)
    rng = np.random.default_rng(seed)
    return {"rotated": np.rot90(images, k=1, axes=(1, 2)).reshape(len(images), -1).copy(),
            "noise": rng.uniform(0, 1, data["x_test"].shape).astype(np.float32)}


def entropy(probs: np.ndarray) -> np.ndarray:
    """Predictive entropy per row, in nats (log 10 = 2.30 for a uniform guess)."""
    return -np.sum(probs * np.log(np.maximum(probs, 1e-12)), axis=1)


def train_adam(make_model, data: dict, max_epochs: int, patience: int, seed: int = 1) -> tuple[keras.Model, int]:
    """One network trained by Adam (learning rate 1e-3, batches of 64) with early stopping on
    the validation loss; returns it and the number of epochs run."""
    keras.utils.set_random_seed(seed)
    model = make_model()
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(data["x"], data["y"], batch_size=64, epochs=max_epochs, verbose=0,
                        validation_data=(data["x_val"], data["y_val"]),
                        callbacks=[keras.callbacks.EarlyStopping(patience=patience, restore_best_weights=True)])
    return model, len(history.history["loss"])


def dispersed_starts(bnn, make_model, n_chains: int) -> list[dict[str, np.ndarray]]:
    """Fresh Keras initialisations of the same architecture as starting values: a new model has
    its weights in the same order as ``bnn.names`` (its own names differ)."""
    return [dict(zip(bnn.names, (v.numpy() for v in make_model().trainable_variables))) for _ in range(n_chains)]


def sample_ensemble(method: str, make_model, data: dict, mode: keras.Model, settings: dict, n_chains: int,
                    n_iters: int, burn_in: int, thin: int, seed: int = 1, check_iters: int = 100,
                    check=None, **cyclical) -> tuple:
    """Posterior draws of the network by ``sgmcmc.<method>`` (sghmc or csghmc) from dispersed
    starts; returns the Bayesian network, the samples, the stepsize check and the stepsize.

    The stepsize is ``settings["stepsize"]`` or 0.9 × the safe stepsize of ``check_stepsize``
    at Adam's weights, whichever is smaller; ``check`` reuses a check already made with the same
    settings (cSGHMC's largest stepsize is SGHMC's). ``cyclical``: csghmc's ``n_cycles`` and
    ``exploration``; its ``burn_in`` and ``thin`` count within each cycle's sampling stage."""
    keras.utils.set_random_seed(seed)
    bnn = sgmcmc.keras.from_model(make_model(), "categorical", prior_scale=settings["prior_scale"])
    train = {"x": data["x"], "y": data["y"]}
    if check is None:  # the stepsize must suit the curvature at a mode: check it at Adam's weights
        at_mode = dict(zip(bnn.names, (v.numpy() for v in mode.trainable_variables)))
        check = sgmcmc.check_stepsize(bnn.log_lik, train, at_mode, settings["stepsize"], log_prior=bnn.log_prior,
                                      method="sghmc", alpha=settings["alpha"], L=settings["L"], per_parameter=False,
                                      warn=False, max_iters=check_iters)
    stepsize = min(settings["stepsize"], 0.9 * check.safe_stepsize)
    starts = dispersed_starts(bnn, make_model, n_chains)
    common = dict(log_prior=bnn.log_prior, minibatch_size=settings["minibatch_size"], alpha=settings["alpha"],
                  L=settings["L"], n_iters=n_iters, burn_in=burn_in, thin=thin, n_chains=n_chains, verbose=False, seed=seed)
    samples = getattr(sgmcmc, method)(bnn.log_lik, train, starts, stepsize, **common, **cyclical)
    return bnn, samples, check, stepsize


def compare(name: str, data: dict, make_model, settings: dict, args, budget: dict) -> dict:
    """Adam, SGHMC (and cSGHMC when available) on one data set: scores, entropies, figures."""
    ood = out_of_distribution(data)
    rows, probs = {}, {}

    with timed(f"{name}: Adam"):
        start = time.perf_counter()
        adam, epochs = train_adam(make_model, data, budget["max_epochs"], budget["patience"], seed=args.seed)
        seconds = time.perf_counter() - start
    softmax = lambda logits: np.exp(logits - logits.max(1, keepdims=True)) / np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)
    predict_adam = lambda x: softmax(adam.predict(x, batch_size=1024, verbose=0).astype(np.float64))
    probs["Adam"] = {"test": predict_adam(data["x_test"]), **{k: predict_adam(v) for k, v in ood.items()}}
    rows["Adam"] = {"epochs": epochs, "seconds": seconds}
    print(f"  Adam: {epochs} epochs (early stopping, best weights restored)")

    methods = ["sghmc"] + (["csghmc"] if hasattr(sgmcmc, "csghmc") else [])
    if not hasattr(sgmcmc, "csghmc"):
        print(f"  {name}: cSGHMC skipped: this version of sgmcmc has no csghmc (issue 32.2)")
    check = None
    for method in methods:
        label = {"sghmc": "SGHMC", "csghmc": "cSGHMC"}[method]
        chains = budget["chains"] if method == "sghmc" else budget["cyclical"]
        with timed(f"{name}: {label}"):
            start = time.perf_counter()
            bnn, samples, check, stepsize = sample_ensemble(method, make_model, data, adam, settings, **chains,
                                                            seed=args.seed, check=check,
                                                            check_iters=budget.get("check_iters", 100))
            seconds = time.perf_counter() - start
        n_draws = samples[bnn.names[0]].shape[0] * samples[bnn.names[0]].shape[1]
        print(f"  {label}: stepsize {stepsize:.2e} (check at Adam's weights: curvature {check.curvature:.0f}, "
              f"safe stepsize {check.safe_stepsize:.2e}), {chains['n_iters']} iterations, "
              f"{n_draws} draws pooled from {chains['n_chains']} chains"
              + (f" ({n_draws // chains['n_chains'] // chains['n_cycles']} per cycle, {chains['n_cycles']} cycles)"
                 if method == "csghmc" else ""))
        probs[label] = {"test": bnn.predict(samples, data["x_test"]),
                        **{k: bnn.predict(samples, v) for k, v in ood.items()}}
        rows[label] = {"seconds": seconds, "stepsize": stepsize, "draws": n_draws}

    for label, p in probs.items():
        rows[label].update(sgmcmc.keras.evaluate(p["test"], data["y_test"]))
        rows[label].update({f"entropy_{k}": float(entropy(v).mean()) for k, v in p.items()})
    print_table(name, rows)
    figures = [plot_reliability(name, probs, data["y_test"], args), plot_entropy(name, probs, args)]
    return {"table": rows, "figures": figures, "adam": adam}


def prior_sweep(data: dict, make_model, adam: keras.Model, settings: dict, budget: dict, scales: list[float],
                seed: int = 1) -> dict:
    """The SGHMC ensemble's test scores for several prior scales (everything else fixed)."""
    sweep = {}
    for scale in scales:
        bnn, samples, _, _ = sample_ensemble("sghmc", make_model, data, adam, settings | {"prior_scale": scale},
                                             **budget["chains"], seed=seed)
        sweep[scale] = sgmcmc.keras.evaluate(bnn.predict(samples, data["x_test"]), data["y_test"])
        print(f"  prior_scale {scale:>4}: " + "  ".join(f"{k} {v:.4f}" for k, v in sweep[scale].items()))
    return sweep


def print_table(name: str, rows: dict) -> None:
    print(f"\n{name}: test scores (lower is better except accuracy) and mean predictive entropy (nats)")
    print(f"{'method':>8} {'accuracy':>9} {'NLL':>7} {'ECE':>7} {'Brier':>7} {'H test':>7} {'H rot.':>7} {'H noise':>8} {'time s':>7}")
    for label, r in rows.items():
        print(f"{label:>8} {r['accuracy']:9.4f} {r['nll']:7.4f} {r['ece']:7.4f} {r['brier']:7.4f} "
              f"{r['entropy_test']:7.3f} {r['entropy_rotated']:7.3f} {r['entropy_noise']:8.3f} {r['seconds']:7.1f}")


def plot_reliability(name: str, probs: dict, y: np.ndarray, args):
    fig, axes = plt.subplots(1, len(probs), figsize=(4.2 * len(probs), 4.2), squeeze=False)
    for ax, (label, p) in zip(axes[0], probs.items()):
        ax.plot([0, 1], [0, 1], ":", color="grey", lw=1)
        sgmcmc.keras.plot_calibration(p["test"], y, ax=ax, label=label)
        ax.set_title(f"{name}: {label}")
    return savefig(fig, args.out / f"bnn_keras_{name}_calibration.png")


def plot_entropy(name: str, probs: dict, args):
    fig, axes = plt.subplots(1, len(probs), figsize=(4.2 * len(probs), 3.4), squeeze=False, sharey=True)
    bins = np.linspace(0, math.log(10), 31)
    for ax, (label, p) in zip(axes[0], probs.items()):
        for key, colour in (("test", "C0"), ("rotated", "C1"), ("noise", "C3")):
            ax.hist(entropy(p[key]), bins=bins, histtype="step", density=True, color=colour, lw=1.5,
                    label={"test": "test digits", "rotated": "rotated 90°", "noise": "uniform noise"}[key])
        ax.set(title=f"{name}: {label}", xlabel="predictive entropy (nats)")
    axes[0, 0].set_ylabel("density")
    axes[0, 0].legend(fontsize="small")
    return savefig(fig, args.out / f"bnn_keras_{name}_entropy.png")


def add_options(parser) -> None:
    parser.add_argument("--mnist", choices=["auto", "yes", "no"], default="auto",
                        help="MNIST too: auto = only when already cached")
    parser.add_argument("--seed", type=int, default=1, help="seeds Adam and the samplers (the data split is fixed)")


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its tables."""
    args = parse_args("bnn_keras", __doc__.splitlines()[0], argv,
                      extra=add_options)
    # cSGHMC: the same chains and iterations as SGHMC (quick: half, in 2 cycles of the same 150
    # iterations, to keep the test short); 80 % of each cycle explores, burn_in 0 and thin
    # within each sampling stage: full 4 × 25 = 100 draws a chain as SGHMC's 1,000 / 10, quick
    # 2 × 15 = 30 as SGHMC's 300 / 10
    if args.quick:
        budget = dict(max_epochs=60, patience=5, chains=dict(n_chains=2, n_iters=600, burn_in=300, thin=10),
                      cyclical=dict(n_chains=2, n_iters=300, n_cycles=2, exploration=0.8, burn_in=0, thin=2))
    else:
        budget = dict(max_epochs=1_000, patience=20, chains=dict(n_chains=4, n_iters=2_000, burn_in=1_000, thin=10),
                      cyclical=dict(n_chains=4, n_iters=2_000, n_cycles=4, exploration=0.8, burn_in=0, thin=4))
    data = load_digits_split()
    print(f"digits: {len(data['y'])} training, {len(data['y_val'])} validation, {len(data['y_test'])} test images")
    make = lambda: mlp(64, DIGITS["hidden"])
    results = {"digits": compare("digits", data, make, DIGITS, args, budget)}
    figures = list(results["digits"]["figures"])
    if not args.quick:
        print("\ndigits: the SGHMC ensemble for several prior scales")
        results["prior_sweep"] = prior_sweep(data, make, results["digits"]["adam"], DIGITS, budget, [0.5, 1.0, 2.0, 5.0],
                                             seed=args.seed)

    use_mnist = args.mnist == "yes" or (args.mnist == "auto" and mnist_cached())
    if use_mnist:
        # Not run in the round that wrote this (MNIST was not cached). The CNN costs ~0.4 s per
        # gradient of 500 images on a 2-core machine, so it gets 2 chains of 1,000 iterations
        # on minibatches of 100, and its stepsize check at most 20 full-data Hessian products.
        mnist = load_mnist_split()
        mnist_settings = dict(DIGITS, minibatch_size=500, stepsize=DIGITS["stepsize"] / 10)
        results["mnist_mlp"] = compare("mnist_mlp", mnist, lambda: mlp(784, 100), mnist_settings, args, budget)
        cnn_budget = budget | dict(chains=dict(n_chains=2, n_iters=1_000, burn_in=500, thin=5), check_iters=20,
                                   cyclical=dict(n_chains=2, n_iters=1_000, n_cycles=4, exploration=0.8, burn_in=0, thin=2))
        if args.quick:
            cnn_budget |= dict(chains=budget["chains"], cyclical=budget["cyclical"])
        results["mnist_cnn"] = compare("mnist_cnn", mnist, lambda: cnn(28), mnist_settings | dict(minibatch_size=100),
                                       args, cnn_budget)
        figures += results["mnist_mlp"]["figures"] + results["mnist_cnn"]["figures"]
    else:
        print("\nMNIST skipped: " + ("--mnist no" if args.mnist == "no" else
                                     "its files are not in sgmcmc's data cache (--mnist yes downloads them)"))
    return {**results, "figures": figures}


if __name__ == "__main__":
    main()
