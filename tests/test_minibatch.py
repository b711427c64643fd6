"""The in-graph minibatch samplers draw uniform subsets without replacement: graph mode's
(first distinct of i.i.d. draws; top keys for n > N/2) and XLA mode's (rejection; Feistel
permutation)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import sgmcmc.minibatch
from sgmcmc.minibatch import MAX_EXPECTED_COLLISIONS, draws_for_distinct, sample_indices


def draws(n_rows: int, batch_size: int, n_draws: int, seed: int = 0, xla: bool = False, n_chains: int = 1) -> np.ndarray:
    """``[n_draws, n_chains, batch_size]`` (``[n_draws, batch_size]`` for one chain)."""
    generator = tf.random.Generator.from_seed(seed)

    @tf.function
    def many():
        out = tf.TensorArray(tf.int64, size=n_draws)
        for i in tf.range(n_draws):
            out = out.write(i, sample_indices(generator, n_rows, batch_size, n_chains, xla=xla))
        return out.stack()

    out = many().numpy()
    return out[:, 0] if n_chains == 1 else out


def _uniform_over_subsets(out: np.ndarray, n_rows: int, batch_size: int) -> float:
    """Chi-square p-value of the sorted rows against all C(n_rows, batch_size) subsets."""
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n_rows), batch_size))}
    counts = np.bincount([subsets[tuple(sorted(row))] for row in out], minlength=len(subsets))
    return stats.chisquare(counts).pvalue


@pytest.mark.parametrize(
    "n_rows, batch_size, xla",
    [(12, 3, False), (12, 9, False), (12, 3, True), (12, 9, True)],
    # graph: first distinct of M = 8 draws; top keys (9 > 12/2). XLA: 3·2/24 ≤ 1: rejection;
    # 9·8/24 = 3 > 1: permutation.
    ids=["first-distinct", "top-keys", "xla-rejection", "xla-permutation"],
)
def test_subsets_are_distinct_and_uniform(n_rows, batch_size, xla):
    if xla:
        assert (batch_size * (batch_size - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS) == (batch_size == 3)
    out = draws(n_rows, batch_size, 4000, xla=xla)
    assert out.min() >= 0 and out.max() < n_rows
    assert all(len(set(row)) == batch_size for row in out)
    # Every one of the C(12, k) = 220 subsets equally likely (18 draws a cell): chi-square.
    assert _uniform_over_subsets(out, n_rows, batch_size) > 1e-4


def test_first_distinct_redraws_exactly(monkeypatch):
    """With M = n + 1 draws (fewer than n distinct in 14 % of them at N = 12, n = 4, so the redraw
    loop runs often) the subsets are still uniform: the redraw keeps the sampler exact. Fails on
    patched copies: the n smallest distinct values instead of the first n (p ≈ 1e-130); no
    redraw, a short row padded with its last value (repeats)."""
    monkeypatch.setattr(sgmcmc.minibatch, "draws_for_distinct", lambda n_rows, batch_size: batch_size + 1)
    out = draws(12, 4, 6000, seed=1)
    assert all(len(set(row)) == 4 for row in out)
    assert _uniform_over_subsets(out, 12, 4) > 1e-4  # 495 subsets, 12 draws a cell


def test_chains_are_independent_uniform_subsets():
    """Three chains drawn together (the offsets that keep their values apart in one
    ``tf.unique``): each chain's subset is uniform, and chains 0 and 1 jointly uniform over the
    15 × 15 pairs of 2-subsets of 6 rows (independent)."""
    out = draws(6, 2, 4500, seed=2, n_chains=3)
    assert out.shape == (4500, 3, 2) and out.min() >= 0 and out.max() < 6
    for k in range(3):
        assert _uniform_over_subsets(out[:, k], 6, 2) > 1e-4
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(6), 2))}
    pair = [subsets[tuple(sorted(a))] * 15 + subsets[tuple(sorted(b))] for a, b in zip(out[:, 0], out[:, 1])]
    assert stats.chisquare(np.bincount(pair, minlength=225)).pvalue > 1e-4


def test_draws_for_distinct_rarely_falls_short():
    """M covers the number of draws needed to collect n distinct values in at least 99.99 % of
    cases (numpy simulation of that number, 20,000 runs each)."""
    rng = np.random.default_rng(0)
    for n_rows, batch_size in ((10_000, 500), (1_000, 400), (581_012, 500)):
        m = draws_for_distinct(n_rows, batch_size)
        p = (n_rows - np.arange(batch_size)) / n_rows
        needed = rng.geometric(p, size=(20_000, batch_size)).sum(axis=1)
        assert np.mean(needed > m) < 1e-3
        assert m < 1.2 * needed.mean() + 10


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_large_dataset_marginals(xla):
    out = draws(581_012, 500, 200, xla=xla)
    assert all(len(set(row)) == 500 for row in out)
    # Inclusion of each decile of the index range: 10 equal cells.
    counts = np.bincount(out.ravel() * 10 // 581_012, minlength=10)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_permutation_path_large_dataset_marginals(xla):
    """The BNN's regime (n = 500 of N = 55,000: n(n-1)/2N = 2.3, XLA's Feistel path): distinct
    indices, every decile of the index range and every residue mod 7 equally often."""
    assert 500 * 499 / (2 * 55_000) > MAX_EXPECTED_COLLISIONS
    out = draws(55_000, 500, 200, xla=xla)
    assert out.min() >= 0 and out.max() < 55_000
    assert all(len(set(row)) == 500 for row in out)
    assert stats.chisquare(np.bincount(out.ravel() * 10 // 55_000, minlength=10)).pvalue > 1e-4
    assert stats.chisquare(np.bincount(out.ravel() % 7, minlength=7)).pvalue > 1e-4


def test_samplers_run_eagerly_too():
    """Outside tf.function (eager while_loop): every exact sampler gives distinct in-range rows
    (this raised a loop-structure error before)."""
    generator = tf.random.Generator.from_seed(3)
    for xla in (False, True):
        for n_rows, batch in ((100_000, 50), (60, 40)):  # first distinct / rejection; top keys / permutation
            rows = sample_indices(generator, n_rows, batch, n_chains=3, xla=xla).numpy()
            assert rows.shape == (3, batch) and rows.min() >= 0 and rows.max() < n_rows
            assert all(len(set(r)) == batch for r in rows)
