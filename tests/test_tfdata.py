"""``dataset=`` a ``tf.data.Dataset`` of minibatch dicts with ``n_rows=N`` (issue 46.3,
``sgmcmc/data/stream.py``): element j of the repeated pipeline is minibatch d of chain k at
iteration t, j = ((t − 1)·D + d)·K + k.

Exact answers: a pipeline yielding the array path's own minibatches gives its chain bit for bit
(both APIs); on a conjugate Gaussian a shuffled pipeline gives SGLD's exact stationary law (mean,
variance with the minibatch noise, the chains' correlation); a map adding a constant to x moves
the posterior mean as predicted; the stepsize check measures the exact curvature from the
pipeline's rows; every refusal names its fix.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import sgmcmc
from sgmcmc.data.minibatch import CHAIN_STREAM, MinibatchIndices

#: The Gaussian: N rows x_i ~ N(0, 1), θ ~ N(0, 5²); minibatches of n; K = N/n chains, so chain
#: k takes the k-th batch of every epoch: i.i.d. uniform n-subsets, the batches of one iteration
#: disjoint (their noises sum to zero).
N, n, PRIOR_SD = 100, 10, 5.0
K = N // n
X = np.random.default_rng(20180601).normal(size=N).astype(np.float32)
PRECISION = N + 1 / PRIOR_SD**2


def log_lik(params, dataset):
    return -0.5 * tf.reduce_sum(tf.square(dataset["x"] - params["theta"]))


def log_prior(params):
    return -0.5 * tf.square(params["theta"] / PRIOR_SD)


def shuffled(seed: int, offset: float = 0.0) -> tf.data.Dataset:
    """The Keras idiom: the rows shuffled every epoch (seeded), batched, the last batch dropped."""
    pipeline = tf.data.Dataset.from_tensor_slices({"x": X}).shuffle(N, seed=seed).batch(n, drop_remainder=True)
    return pipeline.map(lambda batch: {"x": batch["x"] + offset}) if offset else pipeline


def sgld_law(stepsize: float, offset: float = 0.0) -> tuple[float, float, float]:
    """SGLD's exact stationary mean, variance and correlation of two chains at one iteration:
    u' = (1 − ελ/2)u + (ε/2)η + ξ, η the minibatch noise of variance V = f·N²/n·Var(x)
    (f = (N − n)/(N − 1)), whose K draws of an iteration sum to zero (covariance −V/(K − 1))."""
    x = X.astype(np.float64) + offset
    noise = stepsize / 4 * (N - n) / (N - 1) * N**2 / n * x.var()
    variance = (1 + noise) / (PRECISION * (1 - stepsize * PRECISION / 4))
    return x.sum() / PRECISION, variance, -noise / (K - 1) / (1 + noise)


def test_a_pipeline_of_the_array_paths_minibatches_gives_its_chain_bit_for_bit():
    """SGHMC, L = 2 minibatches an iteration, 2 chains: the pipeline yields, in the order (t, d, k),
    the rows of the indices the array path draws; the draws, log posteriors and stored gradients
    are the array run's exactly, and so are the step API's states (init_sess starts the pipeline
    again). Fails with every chain of an iteration on the same batch, and with N/n wrong."""
    seed, chains, iters, thin = 3, 2, 30, 3
    x = np.random.default_rng(1).normal(1.0, 1.0, size=(N, 2)).astype(np.float32)
    rows = MinibatchIndices(N, n, False, 2).draw(seed, CHAIN_STREAM, np.arange(chains), 0, iters + thin)
    pipeline = tf.data.Dataset.from_tensor_slices({"x": x[rows.reshape(-1, n)]})  # iterations + the stored estimate's
    args = dict(log_prior=lambda p: -0.005 * tf.reduce_sum(tf.square(p["theta"])), alpha=0.1, L=2, seed=seed, n_chains=chains)
    start = {"theta": np.zeros(2, np.float32)}
    whole = sgmcmc.sghmc(log_lik, {"x": x}, start, 1e-4, minibatch_size=n, n_iters=iters, thin=thin,
                         store_gradients=True, verbose=False, **args)
    sampler = sgmcmc.sghmc_setup(log_lik, pipeline, start, 1e-4, n_rows=N, **args)
    streamed = sgmcmc.sample_chain(sampler, iters, False, thin=thin, store_gradients=True)
    np.testing.assert_array_equal(streamed["theta"], whole["theta"])
    np.testing.assert_array_equal(streamed.log_posterior, whole.log_posterior)
    np.testing.assert_array_equal(streamed.gradients["theta"], whole.gradients["theta"])
    sess = sgmcmc.init_sess(sampler)
    for t in range(1, iters + 1):
        sgmcmc.sgmcmc_step(sampler, sess)
        if t % thin == 0:
            np.testing.assert_array_equal(sgmcmc.get_params(sampler, sess)["theta"], whole["theta"][:, t // thin - 1])


def test_sgld_on_a_shuffled_pipeline_has_the_exact_stationary_law():
    """10 chains × 1,500 draws (the first 100 dropped) of SGLD at ε = 0.005 (μ = ελ = 0.5: the
    minibatch noise makes the variance 2.63× the posterior's). Seeds 1–6 (pipeline and sampler):
    mean error −0.019 … +0.020 posterior sds, variance over the exact 0.986–1.069, mean pairwise
    correlation −0.067 … −0.061 (exact −0.0628). Fails with N/n wrong (N taken as the 20 rows
    of the pipeline's first two elements: variance ratio 2.23) and with every chain of an
    iteration on the same batch (correlation +0.58)."""
    stepsize, drop = 0.005, 100
    out = sgmcmc.sgld(log_lik, shuffled(seed=1), {"theta": 0.0}, stepsize, log_prior, n_rows=N, n_iters=1_500 + drop,
                      n_chains=K, seed=1, verbose=False, check_stepsize=False)
    draws = out["theta"][:, drop:].astype(np.float64)
    mean, variance, correlation = sgld_law(stepsize)
    assert abs(draws.mean() - mean) * np.sqrt(PRECISION) < 0.1
    assert 0.9 < draws.var() / variance < 1.12
    assert abs(np.corrcoef(draws)[np.triu_indices(K, 1)].mean() - correlation) < 0.02


def test_an_augmenting_map_moves_the_posterior_as_predicted():
    """``.map`` adding 1 to x: the chains sample the posterior of x + 1, whose mean is N/λ ≈ 1.0
    (10 posterior sds) from the data's. 10 chains × 300 draws; seeds 1–6: mean error −0.066 …
    +0.010 posterior sds (with N taken as 20: +0.32)."""
    stepsize, drop = 0.005, 50
    out = sgmcmc.sgld(log_lik, shuffled(seed=2, offset=1.0), {"theta": 1.0}, stepsize, log_prior, n_rows=N,
                      n_iters=300 + drop, n_chains=K, seed=2, verbose=False, check_stepsize=False)
    draws = out["theta"][:, drop:].astype(np.float64)
    assert abs(draws.mean() - sgld_law(stepsize, offset=1.0)[0]) * np.sqrt(PRECISION) < 0.3
    assert abs(draws.mean() - sgld_law(stepsize)[0]) * np.sqrt(PRECISION) > 9


def test_the_checks_read_the_pipeline():
    """The stepsize check before sampling takes its rows from the pipeline (here its first 10
    elements: one epoch, every row once), scaled by N/m: the exact curvature N + 1/25; and the trial
    evaluation's additivity check runs on the pipeline's first elements."""
    sampler = sgmcmc.sgld_setup(log_lik, shuffled(seed=3), {"theta": 0.0}, 0.05, log_prior, n_rows=N)
    with pytest.raises(sgmcmc.StepsizeError) as refused:
        sgmcmc.init_sess(sampler)
    assert refused.value.check.curvature == pytest.approx(PRECISION, rel=1e-5)
    with pytest.raises(ValueError, match="not additive over rows"):
        sgmcmc.sgld_setup(lambda p, d: -0.5 * tf.reduce_mean(tf.square(d["x"] - p["theta"])), shuffled(seed=3),
                          {"theta": 0.0}, 1e-3, n_rows=N)


def _sgld(dataset=None, **kwargs):
    args = dict(n_rows=N)
    args.update(kwargs)
    return sgmcmc.sgld_setup(log_lik, shuffled(seed=0) if dataset is None else dataset, {"theta": 0.0}, 1e-3, **args)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: sgmcmc.sgldcv_setup(log_lik, shuffled(0), {"theta": 0.0}, 1e-3, verbose=False), ValueError,
         "sgldcv needs full-data passes .* use the gradient samplers without a control variate"),
        (lambda: _sgld(estimator="svrg"), ValueError, "estimator='svrg' needs full-data passes"),
        (lambda: _sgld(estimator="saga"), ValueError, "estimator='saga' needs the rows by index"),
        (lambda: _sgld(estimator="cv"), ValueError, "estimator='cv' needs full-data passes"),
        (lambda: _sgld(n_rows=None), ValueError, r"give n_rows=N"),
        (lambda: _sgld(dataset={"x": X}), ValueError, "n_rows=100 is given with a dataset of arrays.*remove n_rows"),
        (lambda: _sgld(n_rows=5), ValueError, "n_rows=5 is smaller than the 10 rows of each element"),
        (lambda: _sgld(dataset=tf.data.Dataset.from_tensor_slices(X).batch(n, drop_remainder=True)), TypeError,
         r"not dicts.*\.map\(lambda x, y: \{'x': x, 'y': y\}\)"),
        (lambda: _sgld(dataset=tf.data.Dataset.from_tensor_slices({"x": X}).batch(n)), ValueError,
         r"no fixed batch size.*\.batch\(n, drop_remainder=True\)"),
        (lambda: _sgld(minibatch_size=20), ValueError, "elements hold n=10 rows.*leave minibatch_size at its default or give 10"),
        (lambda: _sgld(minibatch_replace=True), ValueError, "minibatch_replace=True does not apply"),
        (lambda: _sgld(strategy=tf.distribute.MirroredStrategy(["/cpu:0"])), ValueError, "cannot be used with strategy="),
        (lambda: sgmcmc.sgld(log_lik, shuffled(0), {"theta": 0.0}, 1e-3, n_rows=N, checkpoint_dir="unused"), ValueError,
         "checkpoint_dir is not supported with a tf.data.Dataset.*sampler.save / sampler.restore"),
        (lambda: sgmcmc.scir(lambda p, m, s: p, shuffled(0), {"w": np.full(2, 0.5)}, 0.1, 1.0), ValueError,
         "scir does not take a tf.data.Dataset"),
        (lambda: sgmcmc.sample(log_lik, shuffled(0), {"theta": 0.0}), ValueError,
         "sample does not take a tf.data.Dataset.*n_rows=N"),
        (lambda: sgmcmc.tune_stepsize("sgld", log_lik, shuffled(0), {"theta": 0.0}), ValueError,
         "tune_stepsize does not take a tf.data.Dataset"),
        (lambda: sgmcmc.check_stepsize(log_lik, shuffled(0), {"theta": 0.0}, 1e-3), TypeError,
         "dataset is a tf.data.Dataset, but this function reads rows by index"),
    ],
)
def test_what_a_pipeline_cannot_serve_is_refused_before_any_work(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_minibatch_size_may_name_the_elements_n():
    assert _sgld(minibatch_size=n).batch_size == n
    assert _sgld(minibatch_size=n / N).batch_size == n
