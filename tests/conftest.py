"""Shared fixtures: conjugate models with exact posteriors, and the R package's test settings.

Every model here is Gaussian with a Gaussian prior, so the posterior is known in closed form
and the tests can compare sample statistics against exact answers.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from dataclasses import dataclass, field  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_probability as tfp  # noqa: E402

import sgmcmc  # noqa: E402

tf.get_logger().setLevel("ERROR")  # silence "N out of the last M calls triggered retracing"

tfd = tfp.distributions

#: The R package's tests (tests/testthat): stepsizes and tuning constants per sampler.
R_SETTINGS = {
    "sgld": dict(stepsize=1e-4),
    "sghmc": dict(stepsize=1e-5, alpha=0.1, L=3),
    "sgnht": dict(stepsize=5e-6),
    "sgldcv": dict(stepsize=1e-4, opt_stepsize=1e-5, n_iters_opt=1000),
    "sghmccv": dict(stepsize=5e-5, alpha=0.1, L=3, opt_stepsize=1e-5, n_iters_opt=1000),
    "sgnhtcv": dict(stepsize=1e-4, opt_stepsize=1e-5, n_iters_opt=1000),
}

PRIOR_SD = 5.0


@dataclass
class Model:
    """A model with its exact Gaussian posterior (``mean``, ``cov``; ``sd`` = sqrt diag);
    ``extra["sigma"]`` is the known observation covariance of the Gaussian models."""

    log_lik: Callable
    log_prior: Callable | None
    dataset: dict
    params: dict
    mean: np.ndarray
    cov: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(np.diag(np.atleast_2d(self.cov)))

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.dataset.values())))


def gaussian_1d(dtype=tf.float32, n_rows: int = 10_000, seed: int = 20180601) -> Model:
    """x_i ~ N(0, 1), log_lik = sum N(x_i | theta, 1), prior theta ~ N(0, 5^2).

    Posterior: precision N + 1/25, mean sum(x) / precision."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n_rows)
    start = float(rng.normal())
    np_dtype = dtype.as_numpy_dtype
    one = tf.constant(1.0, dtype)
    zero = tf.constant(0.0, dtype)
    prior_sd = tf.constant(PRIOR_SD, dtype)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.Normal(params["theta"], one).log_prob(dataset["x"]))

    def log_prior(params):
        return tfd.Normal(zero, prior_sd).log_prob(params["theta"])

    x_model = x.astype(np_dtype).astype(np.float64)  # what the sampler sees
    precision = n_rows + 1.0 / PRIOR_SD**2
    mean = np.array([x_model.sum() / precision])
    cov = np.array([[1.0 / precision]])
    return Model(log_lik, log_prior, {"x": x.astype(np_dtype)}, {"theta": start}, mean, cov, {"sigma": np.eye(1)})


SIGMA_3D = np.array([[1.0, 0.3, 0.5], [0.3, 1.0, 0.2], [0.5, 0.2, 1.0]])


def gaussian_3d(n_rows: int = 10_000, seed: int = 20180602) -> Model:
    """x_i ~ N(0, Sigma) with Sigma known, log_lik = sum MVN(x_i | theta, Sigma), prior
    theta_j ~ N(0, 5^2). Posterior precision N Sigma^-1 + I/25, mean cov Sigma^-1 sum x_i."""
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal(np.zeros(3), SIGMA_3D, size=n_rows).astype(np.float32)
    start = rng.normal(size=3)
    chol = tf.constant(np.linalg.cholesky(SIGMA_3D), tf.float32)

    def log_lik(params, dataset):
        return tf.reduce_sum(tfd.MultivariateNormalTriL(params["theta"], scale_tril=chol).log_prob(dataset["x"]))

    def log_prior(params):
        return tf.reduce_sum(tfd.Normal(0.0, PRIOR_SD).log_prob(params["theta"]))

    sigma_inv = np.linalg.inv(SIGMA_3D)
    precision = n_rows * sigma_inv + np.eye(3) / PRIOR_SD**2
    cov = np.linalg.inv(precision)
    mean = cov @ sigma_inv @ x.astype(np.float64).sum(axis=0)
    return Model(log_lik, log_prior, {"x": x}, {"theta": start}, mean, cov, {"sigma": SIGMA_3D})


@pytest.fixture(scope="session")
def r_settings():
    """Per-sampler keyword arguments of the R package's tests (copy before changing)."""
    return {k: dict(v) for k, v in R_SETTINGS.items()}


@pytest.fixture(scope="session")
def make_gaussian_1d():
    """The 1-d model builder, for variants (other N, dtype)."""
    return gaussian_1d


@pytest.fixture(scope="session")
def gauss1d() -> Model:
    return gaussian_1d()


@pytest.fixture(scope="session")
def gauss1d_f64() -> Model:
    return gaussian_1d(tf.float64)


@pytest.fixture(scope="session")
def gauss3d() -> Model:
    return gaussian_3d()


@pytest.fixture(scope="session")
def small_gauss() -> Model:
    """A 1-d Gaussian with N = 1,000 for quick runs (step API, validation)."""
    return gaussian_1d(n_rows=1_000, seed=7)


def _model_args(model: Model, args: dict) -> tuple:
    """log_lik, dataset, params of ``model``, each overridable by a key of ``args`` (removed)."""
    return (args.pop("log_lik", model.log_lik), args.pop("dataset", model.dataset), args.pop("params", model.params))


@pytest.fixture(scope="session")
def run():
    """``run(name, model, **kwargs)``: the whole-chain sampler ``name`` on ``model``, with the
    R settings for ``name`` (overridable, as are ``log_lik``, ``dataset`` and ``params``),
    n = 100, verbose=False."""

    def _run(name, model, **kwargs):
        args = dict(R_SETTINGS[name])
        args.update(log_prior=model.log_prior, minibatch_size=100, verbose=False)
        args.update(kwargs)
        log_lik, dataset, params = _model_args(model, args)
        return getattr(sgmcmc, name)(log_lik, dataset, params, **args)

    return _run


@pytest.fixture(scope="session")
def setup():
    """``setup(name, model, **kwargs)``: ``sgmcmc.<name>_setup`` with the same defaults as
    ``run`` (without ``n_iters``)."""

    def _setup(name, model, **kwargs):
        args = dict(R_SETTINGS[name])
        args.update(log_prior=model.log_prior, minibatch_size=100)
        if name.endswith("cv"):
            args["verbose"] = False
        args.update(kwargs)
        log_lik, dataset, params = _model_args(model, args)
        return getattr(sgmcmc, f"{name}_setup")(log_lik, dataset, params, **args)

    return _setup


# -- the order the two workers take the files in --------------------------------------------------

#: Seconds each file took in the suite at 6fccc9e (per-file sums of the JUnit report's test
#: times, setup included, both workers; files not named here took < 15 s). Only an ordering hint:
#: ``tasks.py test`` hands out whole files (``--dist loadfile``) and xdist's default order is by
#: *number of tests*, which put the two-test vignette files (~370 s together) last, so one worker
#: ran them alone while the other sat idle. Longest first (the LPT rule) ends the two workers' queues close together.
FILE_SECONDS = {
    "test_distribute.py": 169, "test_vignettes_bnn.py": 152, "test_vignettes.py": 143,
    "test_readme_blocks.py": 91, "test_sample.py": 76, "test_vignettes_ill.py": 75,
    "test_tuning.py": 57, "test_osgld.py": 52, "test_constraints.py": 49, "test_step_api.py": 46,
    "test_launcher.py": 46, "test_main_job.py": 45, "test_shapes_sparse_seeds.py": 42,
    "test_checkpoints.py": 41, "test_compile_reuse.py": 41, "test_keras.py": 39,
    "test_posteriors.py": 38, "test_distribute_checkpoints.py": 37, "test_chains.py": 34,
    "test_estimators.py": 30, "test_auto_tuning.py": 27, "test_preconditioned.py": 25,
    "test_autograph.py": 24, "test_chain_noise.py": 23, "test_xla.py": 21,
    "test_interruption.py": 20, "test_simplex_samplers.py": 19, "test_validation.py": 18,
    "test_cyclical.py": 17, "test_data_path.py": 17, "test_temperature.py": 16,
    "test_inner_steps.py": 16,
}


def pytest_collection_modifyitems(config, items):
    """Files longest first (:data:`FILE_SECONDS`), each file's tests in their own order; with
    ``--no-loadscope-reorder`` (``tasks.py test``) xdist hands the files out in this order."""
    order = {name: -seconds for name, seconds in FILE_SECONDS.items()}
    items.sort(key=lambda item: order.get(item.path.name, 0))  # stable: within a file, as written
