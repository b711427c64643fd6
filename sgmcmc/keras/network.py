"""A built Keras model as a Bayesian neural network: parameters, log-likelihood, prior and
posterior-predictive ensemble for the samplers (SPEC §13).

The network is evaluated statelessly: the sampler's parameter tensors are mapped onto the
model's variables with ``keras.StatelessScope`` and the model is called with
``training=False``, so nothing is assigned, batch normalisation uses its moving statistics and
dropout is off. This is what ``model.stateless_call`` does, through ``model(x, training=False)``
so that subclassed models whose ``call`` takes no ``training`` argument work too. Being pure
tensor code, it runs under ``tf.function``, XLA, ``tf.vectorized_map`` (the samplers' chains)
and ``tf.distribute``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from .likelihoods import (
    LOG_SQRT_2PI,
    NOISE_LOG_SCALE,
    NOISE_LOG_SCALE_PRIOR_SD,
    Likelihood,
    make_likelihood,
    positive_number,
    rows_shape,
)

#: Default number of rows per batch in ``predict``.
PREDICT_BATCH_SIZE = 1_024

#: At most this many bytes of parameter draws are passed to one compiled ``predict`` call.
PREDICT_DRAW_BYTES = 64 * 2**20


def _unique_names(paths: Sequence[str]) -> list[str]:
    """The variables' paths, with ``_1``, ``_2``, … appended to repeats (two weights a custom layer
    created under one name), in the model's variable order: stable for the same model."""
    names: list[str] = []
    taken = set()
    for path in paths:
        name, k = path, 0
        while name in taken:
            k += 1
            name = f"{path}_{k}"
        taken.add(name)
        names.append(name)
    return names


def _fan_in(shape: tuple[int, ...]) -> int:
    """Keras' fan-in of a kernel: all axes but the last (units) multiplied (a conv kernel
    (h, w, c_in, c_out): h·w·c_in)."""
    return int(np.prod(shape[:-1]))


class BayesianNetwork:
    r"""A built Keras model with a likelihood and a Normal prior on its weights.

    Made by :func:`from_model`; see it for the parameters. Attributes: ``model`` (the Keras
    model), ``likelihood`` (the form's name), ``names`` (the sampled parameters in order),
    ``prior_sd`` (dict name -> the prior sd of each parameter's elements), ``x``/``y`` (the
    dataset entries read).
    """

    def __init__(
        self,
        model: keras.Model,
        likelihood: str | Callable,
        prior_scale: float | str | Mapping[str, float] = 1.0,
        x: str | Sequence[str] = "x",
        y: str = "y",
        noise_scale: float | str | None = None,
    ):
        _check_model(model)
        self.model = model
        self._likelihood: Likelihood = make_likelihood(likelihood, noise_scale)
        self.likelihood = self._likelihood.name
        if not isinstance(y, str):
            raise TypeError(f"y must be the name of the dataset entry holding the targets; got {y!r}")
        if isinstance(x, str):
            self.x: str | tuple[str, ...] = x
        elif isinstance(x, Sequence) and x and all(isinstance(k, str) for k in x):
            self.x = tuple(x)  # a model with several inputs
        else:
            raise TypeError(f"x must be the name of the dataset entry holding the inputs (or a list of names); got {x!r}")
        self.y = y
        self._trainable = list(model.trainable_variables)
        self._non_trainable = list(model.non_trainable_variables)
        self._non_trainable_values = [np.array(v.numpy()) for v in self._non_trainable]
        self._weight_names = _unique_names([v.path for v in self._trainable])
        extra = self._likelihood.extra_params()
        for name in extra:
            if name in self._weight_names:
                raise ValueError(f"the model has a weight named {name!r}, the name of the likelihood's own parameter")
        self.names = [*self._weight_names, *extra]
        self._starts = {name: np.array(v.numpy()) for name, v in zip(self._weight_names, self._trainable)}
        self._starts.update({name: np.asarray(start, dtype=self._trainable[0].dtype) for name, start in extra.items()})
        self.prior_sd = self._prior_sds(prior_scale)
        per_row = rows_shape(_output_shape(model))
        if per_row is not None:
            self._likelihood.check_outputs(per_row)

    # -- what the samplers take ------------------------------------------------------------

    @property
    def params(self) -> dict[str, np.ndarray]:
        """The starting values: dict name -> a copy of the model's current weights (and the
        likelihood's own parameter, ``noise_log_scale``, at 0)."""
        return {name: value.copy() for name, value in self._starts.items()}

    def forward(self, params: Mapping[str, Any], x: Any) -> tf.Tensor:
        """The network's outputs at ``params`` (dict name -> tensor or array) for inputs ``x``,
        computed statelessly in inference mode (the model's variables are not touched).

        Parameters
        ----------
        params : dict
            Every weight name of ``names`` (other entries are ignored).
        x : array or tensor (or a list of them for a model with several inputs)
            The inputs, rows on the first axis.

        Returns
        -------
        tf.Tensor
            The model's output for the rows of ``x``.
        """
        mapping = []
        for name, variable in zip(self._weight_names, self._trainable):
            if name not in params:
                raise KeyError(f"params has no entry {name!r} (the model's weights: {self._weight_names})")
            value = params[name]
            if tf.is_tensor(value) or isinstance(value, tf.Variable):
                value = tf.convert_to_tensor(value)
                if value.dtype != variable.dtype:
                    raise TypeError(
                        f"parameter {name!r} is {value.dtype.name} but the Keras model computes in "
                        f"{variable.dtype}: run the sampler with dtype=tf.{variable.dtype} (float32 is its default), "
                        f"or build the model in {value.dtype.name} (e.g. keras.config.set_floatx('{value.dtype.name}') "
                        f"before building it, or dtype='{value.dtype.name}' on its layers)"
                    )
            mapping.append((variable, value))
        mapping += [(v, tf.constant(value)) for v, value in zip(self._non_trainable, self._non_trainable_values)]
        with keras.StatelessScope(state_mapping=mapping):
            return self.model(x, training=False)

    def log_lik(self, params: Mapping[str, Any], dataset: Mapping[str, Any]) -> tf.Tensor:
        r"""The log-likelihood SUMMED over the rows of ``dataset``:
        :math:`\sum_i \log p(y_i | f_\theta(x_i))`, f the network at ``params``.

        Parameters
        ----------
        params : dict
            Name -> tensor or array, the names of ``names``.
        dataset : dict
            Holds the entries ``x`` and ``y`` named in :func:`from_model`, rows on the first axis.

        Returns
        -------
        tf.Tensor
            A scalar.
        """
        x, y = self._entries(dataset)
        outputs = self.forward(params, x)
        if not tf.is_tensor(outputs):
            raise TypeError(f"the model returned {type(outputs).__name__}; sgmcmc.keras needs a model with one output tensor")
        per_row = rows_shape(outputs.shape)
        self._likelihood.check_outputs(per_row)
        y = tf.convert_to_tensor(y)
        if y.shape.rank == 0 or (y.shape[0] is not None and outputs.shape[0] is not None and y.shape[0] != outputs.shape[0]):
            raise ValueError(
                f"dataset[{self.y!r}] has shape {y.shape} but the model gave {outputs.shape[0]} rows of outputs: "
                "x and y must have the same rows"
            )
        return tf.reduce_sum(self._likelihood.log_prob(y, outputs, params))

    def log_prior(self, params: Mapping[str, Any]) -> tf.Tensor:
        r"""Independent Normal priors, :math:`\sum_j \log N(\theta_j | 0, s_j^2)` over every weight
        (and ``noise_log_scale``), s from ``prior_scale``.

        Parameters
        ----------
        params : dict
            Name -> tensor or array, the names of ``names``.

        Returns
        -------
        tf.Tensor
            A scalar.
        """
        total = 0.0
        for name in self.names:
            value = tf.convert_to_tensor(params[name])
            if not value.dtype.is_floating:
                value = tf.cast(value, keras.config.floatx())
            sd = tf.constant(self.prior_sd[name], value.dtype)
            z = value / sd
            log_density = -0.5 * z * z - tf.math.log(sd) - tf.constant(LOG_SQRT_2PI, value.dtype)
            total += tf.reduce_sum(log_density)
        return total

    # -- what to do with the samples -------------------------------------------------------

    def predict(
        self,
        samples: Mapping[str, np.ndarray],
        x: Any,
        batch_size: int | None = None,
        draws: int | None = None,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        r"""The posterior-predictive distribution at the rows of ``x``, averaged over the kept
        draws :math:`\theta^{(1)}, …, \theta^{(D)}`:

        - ``"categorical"``: :math:`\bar p_{ik} = \frac1D\sum_d \mathrm{softmax}(f_{\theta^{(d)}}(x_i))_k`,
          shape (n, K) — probabilities are averaged, never logits;
        - ``"bernoulli"``: the same with the two classes, shape (n, 2), column 1 P(y = 1);
        - ``"normal"``: the predictive mean :math:`\frac1D\sum_d μ_d` and sd
          :math:`\sqrt{\frac1D\sum_d(σ_d^2 + μ_d^2) - \bar μ^2}` (noise plus the spread of the
          means), each of shape (n, *output shape), a single output squeezed to (n,).

        Memory is bounded: ``x`` is streamed in batches of ``batch_size`` rows and the draws in
        groups of at most 64 MB, each group summed inside one compiled call.

        Parameters
        ----------
        samples : dict or sgmcmc.Samples
            Name -> draws, shape (n_kept, *shape) for one chain or (n_chains, n_kept, *shape);
            chains are pooled (chain 0's draws, then chain 1's, …).
        x : array (or a list of arrays for a model with several inputs)
            Inputs, rows on the first axis.
        batch_size : int, optional
            Rows per batch (default 1,024).
        draws : int, optional
            Use D equally spaced draws of the pooled T: indices ⌊(j + 1)T/D⌋ − 1, j = 0…D−1
            (ending at the last draw, like ``thin``). Default: all.

        Returns
        -------
        numpy.ndarray, or (mean, sd) for ``"normal"``
        """
        pooled = self._pooled_draws(samples, draws)
        xs = list(x) if isinstance(self.x, tuple) else [x]
        xs = [np.asarray(a) for a in xs]
        n_rows = len(xs[0])
        if any(len(a) != n_rows for a in xs):
            raise ValueError(f"the inputs have different numbers of rows: {[len(a) for a in xs]}")
        batch_size = PREDICT_BATCH_SIZE if batch_size is None else int(batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {batch_size}")
        n_draws = len(next(iter(pooled.values())))
        bytes_per_draw = sum(v[0].nbytes for v in pooled.values())
        group = max(1, min(n_draws, PREDICT_DRAW_BYTES // max(bytes_per_draw, 1)))
        summed = self._summed_terms_function(pooled, xs)
        totals = None
        for start in range(0, n_draws, group):
            stack = {k: v[start:start + group] for k, v in pooled.items()}
            parts = []
            for lo in range(0, n_rows, batch_size):
                batch = [a[lo:lo + batch_size] for a in xs]
                parts.append([t.numpy().astype(np.float64) for t in summed(stack, batch)])
            terms = [np.concatenate(p) for p in zip(*parts)]
            totals = terms if totals is None else [a + b for a, b in zip(totals, terms)]
        return self._likelihood.predictive(tuple(t / n_draws for t in totals))

    def _summed_terms_function(self, pooled: dict[str, np.ndarray], xs: list[np.ndarray]) -> Callable:
        """A compiled ``(stack of draws, batch of rows) -> per-row sums over the draws`` of the
        likelihood's predictive terms; leading axes left free so one trace serves every group and
        batch, and kept per input signature so later ``predict`` calls reuse it."""
        draw_spec = {k: tf.TensorSpec((None, *v.shape[1:]), tf.as_dtype(self._dtype_of(k))) for k, v in pooled.items()}
        floatx = self._trainable[0].dtype
        x_spec = [tf.TensorSpec((None, *a.shape[1:]), floatx if np.issubdtype(a.dtype, np.floating) else a.dtype) for a in xs]
        key = (tuple(draw_spec.items()), tuple(x_spec))
        cache = self.__dict__.setdefault("_predict_functions", {})
        if key not in cache:
            cache[key] = tf.function(self._summed_terms, input_signature=[draw_spec, x_spec])
        summed = cache[key]

        def call(stack, batch):
            stack = {k: tf.convert_to_tensor(v, draw_spec[k].dtype) for k, v in stack.items()}
            batch = [tf.convert_to_tensor(b, s.dtype) for b, s in zip(batch, x_spec)]
            return summed(stack, batch)

        return call

    def _summed_terms(self, stack: dict[str, tf.Tensor], batch: list[tf.Tensor]) -> tuple[tf.Tensor, ...]:
        """The likelihood's predictive terms at the rows of ``batch`` summed over the draws of
        ``stack`` (a while loop: one draw's activations in memory at a time)."""

        def one_draw(i):
            params = {k: v[i] for k, v in stack.items()}
            outputs = self.forward(params, batch if isinstance(self.x, tuple) else batch[0])
            return self._likelihood.predictive_terms(outputs, params)

        n = tf.shape(next(iter(stack.values())))[0]

        def body(i, acc):
            return i + 1, tuple(a + t for a, t in zip(acc, one_draw(i)))

        _, acc = tf.while_loop(lambda i, acc: i < n, body, (tf.constant(1), one_draw(0)))
        return acc

    def _dtype_of(self, name: str) -> Any:
        """The dtype the model computes a parameter in (the likelihood's own: the model's)."""
        if name in self._weight_names:
            return self._trainable[self._weight_names.index(name)].dtype
        return self._trainable[0].dtype

    def _pooled_draws(self, samples: Mapping[str, np.ndarray], draws: int | None) -> dict[str, np.ndarray]:
        """Every parameter's draws with chains pooled, (T, *shape), then ``draws`` equally spaced."""
        missing = [name for name in self.names if name not in samples]
        if missing:
            raise KeyError(f"samples has no draws of {missing}; it must hold every parameter of bnn.names")
        pooled, lengths = {}, set()
        for name in self.names:
            value = np.asarray(samples[name])
            rank = np.ndim(self._starts[name])
            if value.ndim == rank + 1:
                draws_ = value
            elif value.ndim == rank + 2:
                draws_ = value.reshape(-1, *value.shape[2:])  # (n_chains, n_kept, ...) pooled chain by chain
            else:
                raise ValueError(
                    f"samples[{name!r}] has shape {value.shape}; expected (n_kept, *{self._starts[name].shape}) or "
                    f"(n_chains, n_kept, *{self._starts[name].shape})"
                )
            if draws_.shape[1:] != self._starts[name].shape:
                raise ValueError(f"samples[{name!r}] draws have shape {draws_.shape[1:]}, the weight {self._starts[name].shape}")
            pooled[name] = draws_
            lengths.add(len(draws_))
        if len(lengths) != 1:
            raise ValueError(f"the parameters have different numbers of draws: {sorted(lengths)}")
        total = lengths.pop()
        if total == 0:
            raise ValueError("samples holds no draws")
        if draws is not None:
            if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or not 1 <= draws <= total:
                raise ValueError(f"draws must be an integer from 1 to the number of pooled draws, {total}; got {draws!r}")
            index = (np.arange(1, draws + 1) * total) // draws - 1
            pooled = {k: v[index] for k, v in pooled.items()}
        return pooled

    # -- helpers -------------------------------------------------------------------------------

    def _entries(self, dataset: Mapping[str, Any]) -> tuple[Any, Any]:
        """The inputs and targets from ``dataset``, or an error naming its entries."""
        if not isinstance(dataset, Mapping):
            raise TypeError(f"dataset must be a dict of arrays holding {self.x!r} and {self.y!r}; got {type(dataset).__name__}")
        wanted = [*(self.x if isinstance(self.x, tuple) else (self.x,)), self.y]
        missing = [k for k in wanted if k not in dataset]
        if missing:
            raise KeyError(
                f"the dataset has no entr{'y' if len(missing) == 1 else 'ies'} {', '.join(map(repr, missing))}; its entries "
                f"are {sorted(dataset)}. Name the inputs and targets with from_model(..., x=..., y=...)"
            )
        x = [dataset[k] for k in self.x] if isinstance(self.x, tuple) else dataset[self.x]
        return x, dataset[self.y]

    def _prior_sds(self, prior_scale: float | str | Mapping[str, float]) -> dict[str, Any]:
        """Each parameter's prior sd from ``prior_scale`` (number, dict or "he")."""
        sds: dict[str, Any] = {}
        if isinstance(prior_scale, str):
            if prior_scale != "he":
                raise ValueError(f"prior_scale must be a positive number, a dict name -> sd, or 'he'; got {prior_scale!r}")
            for name in self._weight_names:
                shape = self._starts[name].shape
                sds[name] = math.sqrt(2.0 / _fan_in(shape)) if len(shape) >= 2 else 1.0
            sds.update({name: NOISE_LOG_SCALE_PRIOR_SD for name in self.names if name not in sds})
            return sds
        if isinstance(prior_scale, Mapping):
            unknown = sorted(set(prior_scale) - set(self.names))
            missing = [name for name in self._weight_names if name not in prior_scale]
            if unknown or missing:
                raise ValueError(
                    "prior_scale as a dict needs one sd for every weight (the names of bnn.names"
                    + (f", {NOISE_LOG_SCALE!r} optional" if NOISE_LOG_SCALE in self.names else "") + ")"
                    + (f"; unknown names {unknown}" if unknown else "")
                    + (f"; missing {missing}" if missing else "")
                    + f". The model's weights: {self._weight_names}"
                )
            for name in self.names:
                sds[name] = positive_number(prior_scale.get(name, NOISE_LOG_SCALE_PRIOR_SD), f"prior_scale[{name!r}]", "a positive sd")
            return sds
        scale = positive_number(prior_scale, "prior_scale", "a positive number, a dict name -> sd, or 'he'")
        sds = {name: scale for name in self._weight_names}
        sds.update({name: NOISE_LOG_SCALE_PRIOR_SD for name in self.names if name not in sds})
        return sds


def _check_model(model: Any) -> None:
    """Refuse what is not a built Keras 3 model with trainable weights."""
    if not isinstance(model, keras.Model):
        kind = type(model).__module__ + "." + type(model).__name__
        hint = " (a tf_keras / Keras 2 model: build it with Keras 3, `import keras`)" if "tf_keras" in kind else ""
        raise TypeError(f"model must be a Keras 3 model (keras.Model, keras.Sequential); got {kind}{hint}")
    if not model.built:
        raise ValueError(
            f"the Keras model {model.name!r} is not built, so it has no weights yet: build it first with "
            "model.build(input_shape) (e.g. model.build((None, 784))), by calling it once on a batch, model(x[:1]), or "
            "by starting a Sequential model with keras.Input(shape)"
        )
    if not model.trainable_variables:
        raise ValueError(f"the Keras model {model.name!r} has no trainable weights: there is nothing to sample")


def _output_shape(model: keras.Model) -> tuple | None:
    """The model's output shape, or None when it cannot be seen without data (a subclassed model
    built on an input shape it did not record) or the model has several outputs."""
    try:
        shape = model.output_shape
    except (AttributeError, ValueError, RuntimeError):
        shape = None
    if shape is None:
        input_shape = getattr(model, "_build_shapes_dict", None) or {}
        if len(input_shape) != 1:
            return None
        (shape_in,) = input_shape.values()
        try:  # a symbolic call: no computation
            spec = model.compute_output_spec(keras.KerasTensor((None, *tuple(shape_in)[1:])))
        except Exception:  # noqa: BLE001 - a model Keras cannot trace symbolically is checked at trace time
            return None
        shape = getattr(spec, "shape", None)
    if isinstance(shape, list) or (isinstance(shape, tuple) and shape and isinstance(shape[0], tuple)):
        return None  # several outputs: refused when log_lik is traced
    return tuple(shape) if shape is not None else None


def from_model(
    model: keras.Model,
    likelihood: str | Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    prior_scale: float | str | Mapping[str, float] = 1.0,
    x: str | Sequence[str] = "x",
    y: str = "y",
    noise_scale: float | str | None = None,
) -> BayesianNetwork:
    r"""A Bayesian neural network from a built Keras 3 model (SPEC §13).

    The model's output parameterises the likelihood of each row's target; every trainable
    weight gets an independent Normal prior. The result's ``params``, ``log_lik`` and
    ``log_prior`` plug into every sampler unchanged::

        bnn = sgmcmc.keras.from_model(model, "categorical", prior_scale="he")
        out = sgmcmc.sghmc(bnn.log_lik, {"x": X, "y": Y}, bnn.params, 1e-5, log_prior=bnn.log_prior)
        probs = bnn.predict(out, X_test)

    Parameters
    ----------
    model : keras.Model
        A built Keras 3 model (functional, Sequential or subclassed) whose output is the
        likelihood's parameter; its current weights are the starting values. Not modified.
    likelihood : {"categorical", "bernoulli", "normal"} or callable
        ``"categorical"``: outputs are logits (n, K), y integer labels (n,) or one-hot (n, K);
        ``"bernoulli"``: one logit per row, y in {0, 1};
        ``"normal"``: outputs are the mean of y, with ``noise_scale``;
        a function ``(y, outputs) -> log-likelihood per row``, shape (n,) (not reduced: a scalar
        is refused, and so are Keras losses, which are negated and averaged).
    prior_scale : float, dict or "he"
        The prior sd s of each weight, :math:`\theta_j \sim N(0, s^2)`: one number; a dict with
        one sd for every weight name; or ``"he"``: :math:`s^2 = 2/\text{fan\_in}` for kernels
        (weights of two or more axes, fan-in the product of all axes but the last) and s = 1
        for the others (biases, batch-norm scales and offsets).
        ``noise_log_scale`` has prior N(0, 1) unless the dict names it.
    x : str or list of str
        The dataset entry holding the inputs (a list for a model with several inputs).
    y : str
        The dataset entry holding the targets.
    noise_scale : float or "learn", optional
        ``"normal"`` only: the noise sd σ, or ``"learn"`` to sample :math:`\log σ` as the
        parameter ``noise_log_scale`` (start 0).

    Returns
    -------
    BayesianNetwork
        With ``params`` (dict name -> numpy start; names are the variables' paths, e.g.
        ``"dense/kernel"``), ``log_lik(params, dataset)`` (the SUM over the rows),
        ``log_prior(params)``, ``predict(samples, x, batch_size=None, draws=None)`` and
        ``forward(params, x)``.

    Raises
    ------
    ValueError, TypeError
        An unbuilt model, a likelihood that does not fit the output shape (e.g.
        ``"bernoulli"`` with 10 outputs), an unknown likelihood, a Keras loss as likelihood, a
        bad ``prior_scale`` or ``noise_scale``.

    Notes
    -----
    The starting values are the model's weights as Keras initialised (or trained) them, and a
    sampler's ``seed=`` does not reach that initialisation: it seeds the minibatches and the
    injected noise only. Unseeded, every process starts from another network (and the stepsize
    check, made at the start, names other stepsizes). To reproduce a run, seed Keras before
    the model is built: ``keras.utils.set_random_seed(s)`` (Python's, numpy's and the backend's
    generators: the initializers and ``model.fit``'s shuffling), or give each layer a seeded
    initializer (``kernel_initializer=keras.initializers.GlorotUniform(seed=s)``)::

        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(100, activation="relu"),
                                  keras.layers.Dense(10)])
        bnn = sgmcmc.keras.from_model(model, "categorical")   # the same bnn.params in every process
    """
    return BayesianNetwork(model, likelihood, prior_scale, x, y, noise_scale)


def to_model(bnn: BayesianNetwork, draw: Mapping[str, Any]) -> keras.Model:
    """A Keras model holding one draw's weights: a clone of ``bnn.model`` (same architecture,
    batch-norm statistics as in ``bnn.model``), ready for ``predict`` or ``model.save``.

    Parameters
    ----------
    bnn : BayesianNetwork
        From :func:`from_model`.
    draw : dict
        Name -> array of one draw, every weight name of ``bnn.names`` (e.g.
        ``{k: v[-1] for k, v in samples.items()}``; ``noise_log_scale`` is ignored).

    Returns
    -------
    keras.Model
    """
    missing = [name for name in bnn._weight_names if name not in draw]
    if missing:
        raise KeyError(f"draw has no value for {missing}; it must hold every weight of bnn.names")
    try:
        clone = keras.models.clone_model(bnn.model)
    except Exception as error:  # noqa: BLE001 - subclassed models without a config
        raise TypeError(
            f"the model {bnn.model.name!r} cannot be cloned ({type(error).__name__}: {error}); a subclassed model needs "
            "get_config() returning its constructor's arguments"
        ) from error
    if not clone.built:
        shapes = getattr(bnn.model, "_build_shapes_dict", None) or {}
        if len(shapes) == 1:
            clone.build(*shapes.values())
    if len(clone.trainable_variables) != len(bnn._trainable) or len(clone.non_trainable_variables) != len(bnn._non_trainable):
        raise TypeError(f"the clone of {bnn.model.name!r} does not have the original's weights; it cannot hold a draw")
    for variable, name, original in zip(clone.trainable_variables, bnn._weight_names, bnn._trainable):
        value = np.asarray(draw[name])
        if tuple(value.shape) != tuple(original.shape):
            raise ValueError(f"draw[{name!r}] has shape {value.shape}; the weight has shape {tuple(original.shape)}")
        variable.assign(value.astype(variable.dtype))
    for variable, value in zip(clone.non_trainable_variables, bnn._non_trainable_values):
        variable.assign(value)
    return clone
