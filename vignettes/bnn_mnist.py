"""Advanced example: a Bayesian neural network on MNIST, run step by step.

The model (Baker 2018, section 4.6.3; the R package's "nn" vignette): for an image x_i
(784 pixels in [0, 1]) and its digit y_i,

    y_i | theta, x_i ~ Categorical( beta(theta, x_i) ),
    beta(theta, x_i) = softmax( softmax(x_i B + b) A + a ),                  (thesis eq. 4.6.3)

with 100 hidden units (B: 784 x 100, b: 100, A: 100 x 10, a: 10), Normal priors whose
precisions have Gamma(1, 1) priors:

    B_jk ~ N(0, 1/lambda_B),  b_k ~ N(0, 1/lambda_b),  A_kl ~ N(0, 1/lambda_A),  a_l ~ N(0, 1/lambda_a),
    lambda_A, lambda_B, lambda_a, lambda_b ~ Gamma(1, 1).

The network is written in Keras (a softmax hidden layer, then logits) and handed to the samplers
by ``sgmcmc.keras.from_model``: ``bnn.log_lik`` is the categorical log-likelihood of the one-hot
labels summed over the images, computed by the Keras model itself. The hierarchical prior is not
one of the adapter's fixed Normal priors, so it is written here over the Keras weights' names,
and the four precisions are added to ``bnn.params`` as parameters of their own.

About 80,000 parameters: 10^4 stored samples would take 3 GB, so instead of the whole-chain
functions we use the step-by-step API and keep only what we need: the test log loss every
100 steps, a running posterior mean of the parameters, and a running mean of the predicted
class probabilities (the posterior predictive). Memory stays flat however long the chain.

The full version needs the real data (``sgmcmc.datasets.get_dataset("mnist")``, downloaded
once); if it cannot be had the script says so and exits with status 2. ``--quick`` runs a
small version on generated MNIST-shaped data. ``--methods sgld sgldcv`` runs a subset.

``--quick`` also runs each sampler in graph mode (``sampler.jit_compile = False``) instead of
the default XLA: for a few hundred steps the XLA compilation of the network's step costs more
than it saves (per sampler, CPU: sgld 16.3 → 12.4 s, sghmc 16.7 → 9.7 s, sgnht 16.7 → 11.1 s,
sgldcv 29.2 → 22.7 s; the accuracies the same to sampling noise: posterior predictive /
posterior-mean parameters 0.788 / 0.725 → 0.785 / 0.724 for sgld, 0.726 / 0.675 → 0.768 / 0.707
for sghmc, 0.803 / 0.803 both for sgnht, 0.782 / 0.767 → 0.785 / 0.778 for sgldcv). The stepsize
check of ``init_sess`` stays on (it is the step API's default path, and its warnings about the
thesis' stepsizes are part of the lesson). What was tried and not kept: a smaller quick problem
(2,000 training images, or 30 hidden units) learns too slowly in the quick run's steps with the
thesis' stepsizes (sgld and sghmc below 0.45 test accuracy, chance 0.1), so the quick data and
network stay as they are.
"""

from __future__ import annotations

from _common import load_dataset_or_exit, parse_args, savefig, timed  # first: selects the Agg backend

import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import sgmcmc

tfd = tfp.distributions

#: Thesis section 4.6.3 stepsizes; opt_stepsize 3e-5 for the control-variate samplers.
STEPSIZES = {"sgld": 1e-4, "sghmc": 1e-5, "sgnht": 5e-6, "sgldcv": 5e-5, "sghmccv": 1e-5, "sgnhtcv": 5e-7}

#: The thesis' weight names -> (Keras layer, weight), and each weight's precision parameter.
WEIGHTS = {"B": ("hidden", "kernel"), "b": ("hidden", "bias"), "A": ("output", "kernel"), "a": ("output", "bias")}
PRECISIONS = {"A": "lambdaA", "B": "lambdaB", "a": "lambdaa", "b": "lambdab"}


def thesis_network() -> "sgmcmc.keras.BayesianNetwork":
    """beta(theta, x) = softmax(softmax(x B + b) A + a) as a Keras model; the categorical
    likelihood takes its logits softmax(x B + b) A + a, y one-hot in the dataset entry "y"."""
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(100, activation="softmax", name="hidden"),
                              keras.layers.Dense(10, name="output")])
    return sgmcmc.keras.from_model(model, "categorical", x="X", y="y")


def weight_names(bnn) -> dict[str, str]:
    """The thesis' letters -> the Keras weights' parameter names (their variables' paths)."""
    return {letter: getattr(bnn.model.get_layer(layer), weight).path for letter, (layer, weight) in WEIGHTS.items()}


def make_log_prior(bnn):
    """Normal weights with Gamma(1, 1) precisions, over the Keras weights' names."""
    names = weight_names(bnn)
    gamma = tfd.Gamma(concentration=1.0, rate=1.0)

    def log_prior(params: dict[str, tf.Tensor]) -> tf.Tensor:
        total = 0.0
        for letter, precision in PRECISIONS.items():
            normal = tfd.Normal(0.0, tf.math.rsqrt(params[precision]))
            total += tf.reduce_sum(normal.log_prob(params[names[letter]])) + gamma.log_prob(params[precision])
        return total

    return log_prior


def synthetic_mnist(n_train: int = 10_000, n_test: int = 1_000, seed: int = 0) -> dict:
    """MNIST-shaped data for ``--quick``: 10 fixed random "digit" templates plus noise.

    Same layout as ``get_dataset("mnist")``: images (n, 784) in [0, 1], one-hot labels (n, 10).
    """
    rng = np.random.default_rng(seed)
    templates = (rng.random((10, 784)) < 0.2).astype(np.float32)  # a random 20% of pixels lit per class

    def draw(n: int) -> dict[str, np.ndarray]:
        digits = rng.integers(0, 10, n)
        images = np.clip(0.6 * templates[digits] + rng.normal(0.1, 0.3, (n, 784)), 0, 1)
        return {"images": images.astype(np.float32), "labels": np.eye(10, dtype=np.float32)[digits]}

    return {"train": draw(n_train), "test": draw(n_test)}


def main(argv: list[str] | None = None) -> dict:
    """Run the vignette; return its key numbers per method."""
    args = parse_args(
        "bnn_mnist", __doc__.splitlines()[0], argv,
        extra=lambda p: p.add_argument("--methods", nargs="+", choices=list(STEPSIZES), default=list(STEPSIZES)),
    )
    mnist = synthetic_mnist() if args.quick else load_dataset_or_exit("mnist")
    dataset = {"X": mnist["train"]["images"], "y": mnist["train"]["labels"]}
    test = {"X": tf.constant(mnist["test"]["images"]), "y": tf.constant(mnist["test"]["labels"])}
    test_digits = mnist["test"]["labels"].argmax(1)
    N, d = dataset["X"].shape
    print(f"{N} training images, {len(test_digits)} test images")

    # Thesis run lengths: 10^4 steps burn-in (the control-variate samplers: 10^4 mode-search
    # steps instead), then 10^4 steps; sghmc and sghmccv cost L = 5 gradients a step, so 2,000.
    n_steps, n_opt, every = (200, 200, 20) if args.quick else (10_000, 10_000, 100)

    # Starting values: weights ~ N(0, 1) as in the thesis; precisions 1, which those weights
    # imply. (The thesis drew them from Gamma(1, 1); a small draw makes the gradient
    # d/d lambda_B = 78,400 / (2 lambda_B) - ... so large that the first steps blow up.)
    bnn = thesis_network()
    log_prior, names = make_log_prior(bnn), weight_names(bnn)
    rng = np.random.default_rng(1)
    draws = {"A": rng.standard_normal((100, 10)), "B": rng.standard_normal((d, 100)),
             "a": rng.standard_normal(10), "b": rng.standard_normal(100)}
    params = {names[letter]: value for letter, value in draws.items()}  # the Keras weights' names
    params |= {"lambdaA": 1.0, "lambdaB": 1.0, "lambdaa": 1.0, "lambdab": 1.0}

    @tf.function
    def test_predictions(current: dict[str, tf.Variable]) -> tuple[tf.Tensor, tf.Tensor]:
        """The test log loss and the predicted class probabilities at the current state (the
        Keras network evaluated at the sampler's variables, statelessly)."""
        log_loss = -bnn.log_lik(current, test) / len(test_digits)
        return log_loss, tf.nn.softmax(bnn.forward(current, test["X"]))

    results = {}
    mode = None  # found by the first control-variate sampler's search, handed to the others
    for method in args.methods:
        print(f"\n== {method} ==")
        steps = n_steps // 5 if method.startswith("sghmc") else n_steps
        burn_in = 0 if method.endswith("cv") else steps  # the mode search replaces the burn-in
        setup = getattr(sgmcmc, f"{method}_setup")  # sgmcmc.sgld_setup, ...
        kwargs = dict(log_prior=log_prior, minibatch_size=500, seed=1)
        start = params
        if method.endswith("cv") and mode is None:
            kwargs |= dict(opt_stepsize=3e-5, n_iters_opt=n_opt)
        elif method.endswith("cv"):
            # The search (SGD from the same start with the same stepsize, minibatches and seed) is
            # the same for the three samplers and ends at the same point, bit for bit: R's package
            # ran it three times; here it runs once and the others are anchored at its mode.
            start, kwargs = mode, kwargs | dict(n_iters_opt=0)

        with timed(method):
            sampler = setup(bnn.log_lik, dataset, start, STEPSIZES[method], **kwargs)
            if args.quick:  # graph mode: XLA's compile costs more than it saves in 400 steps (docstring)
                sampler.jit_compile = False
            sess = sgmcmc.init_sess(sampler, verbose=False)  # for the first cv sampler: the mode search
            if method.endswith("cv") and mode is None:
                mode = sgmcmc.get_params(sampler, sess)  # the chain starts at the mode
            trace = []  # (step, test log loss)
            mean_params = {name: np.zeros(np.shape(value)) for name, value in params.items()}
            mean_probs, n_probs = np.zeros((len(test_digits), 10)), 0
            for i in range(1, burn_in + steps + 1):
                sgmcmc.sgmcmc_step(sampler, sess)
                if i > burn_in:  # running mean of the parameters over the kept steps
                    for name, value in sgmcmc.get_params(sampler, sess).items():
                        mean_params[name] += (value - mean_params[name]) / (i - burn_in)
                if i % every == 0:
                    log_loss, probs = test_predictions(sampler.params)
                    trace.append((i, float(log_loss)))
                    if i > burn_in:  # running mean of the predicted probabilities
                        n_probs += 1
                        mean_probs += (probs.numpy() - mean_probs) / n_probs
                if i % (10 * every) == 0:
                    print(f"  step {i:>6}{' (burn-in)' if i <= burn_in else ''}: test log loss {trace[-1][1]:.4f}")

        # Accuracy of the posterior predictive (the averaged probabilities), and of the network
        # with the posterior-mean parameters plugged in.
        accuracy = float(np.mean(mean_probs.argmax(1) == test_digits))
        plug_in_loss, plug_in_probs = test_predictions({k: tf.constant(v, tf.float32) for k, v in mean_params.items()})
        plug_in_accuracy = float(np.mean(plug_in_probs.numpy().argmax(1) == test_digits))
        print(f"  last test log loss {trace[-1][1]:.4f}; test accuracy: posterior predictive {accuracy:.3f}, "
              f"posterior-mean parameters {plug_in_accuracy:.3f}")
        results[method] = {"trace": np.array(trace), "burn_in": burn_in, "final_log_loss": trace[-1][1],
                           "accuracy": accuracy, "mean_params_accuracy": plug_in_accuracy,
                           "mean_params_log_loss": float(plug_in_loss)}

    # Thesis Fig. 4.6.3: the test log loss during sampling (burn-in dashed).
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, (method, res) in enumerate(results.items()):
        step, loss = res["trace"].T
        burning = step <= res["burn_in"]
        ax.plot(step[burning], loss[burning], ":", color=f"C{k}", lw=1)
        ax.plot(step[~burning], loss[~burning], "-", color=f"C{k}", lw=1, label=method)
    ax.set(xlabel="step", ylabel="log loss of test set", yscale="log",
           title="Bayesian neural network: test log loss (dotted: burn-in)")
    ax.legend(ncol=3)
    figure = savefig(fig, args.out / "bnn_mnist_log_loss.png")
    return {"methods": results, "figures": [figure]}


if __name__ == "__main__":
    main()
