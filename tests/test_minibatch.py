"""The in-graph minibatch sampler draws uniform subsets without replacement (both paths)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from sgmcmc.minibatch import MAX_EXPECTED_COLLISIONS, sample_indices


def draws(n_rows: int, batch_size: int, n_draws: int, seed: int = 0) -> np.ndarray:
    generator = tf.random.Generator.from_seed(seed)

    @tf.function
    def many():
        out = tf.TensorArray(tf.int64, size=n_draws)
        for i in tf.range(n_draws):
            out = out.write(i, sample_indices(generator, n_rows, batch_size)[0])  # one chain
        return out.stack()

    return many().numpy()


@pytest.mark.parametrize(
    "n_rows, batch_size",
    [(12, 3), (12, 9)],  # 3·2/24 ≤ 1: rejection; 9·8/24 = 3 > 1: permutation
    ids=["rejection", "permutation"],
)
def test_subsets_are_distinct_and_uniform(n_rows, batch_size):
    assert (batch_size * (batch_size - 1) / (2 * n_rows) <= MAX_EXPECTED_COLLISIONS) == (batch_size == 3)
    out = draws(n_rows, batch_size, 4000)
    assert out.min() >= 0 and out.max() < n_rows
    assert all(len(set(row)) == batch_size for row in out)
    # Every one of the C(12, k) = 220 subsets equally likely (18 draws a cell): chi-square.
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n_rows), batch_size))}
    assert len(subsets) == 220
    counts = np.bincount([subsets[tuple(sorted(row))] for row in out], minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > 1e-4


def test_large_dataset_marginals():
    out = draws(581_012, 500, 200)
    assert all(len(set(row)) == 500 for row in out)
    # Inclusion of each decile of the index range: 10 equal cells.
    counts = np.bincount(out.ravel() * 10 // 581_012, minlength=10)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_permutation_path_large_dataset_marginals():
    """The BNN's regime (n = 500 of N = 55,000: n(n-1)/2N = 2.3, the Feistel path): distinct
    indices, every decile of the index range and every residue mod 7 equally often."""
    assert 500 * 499 / (2 * 55_000) > MAX_EXPECTED_COLLISIONS
    out = draws(55_000, 500, 200)
    assert out.min() >= 0 and out.max() < 55_000
    assert all(len(set(row)) == 500 for row in out)
    assert stats.chisquare(np.bincount(out.ravel() * 10 // 55_000, minlength=10)).pvalue > 1e-4
    assert stats.chisquare(np.bincount(out.ravel() % 7, minlength=7)).pvalue > 1e-4


def test_samplers_run_eagerly_too():
    """Outside tf.function (eager while_loop): both exact samplers give distinct in-range rows
    (this raised a loop-structure error before)."""
    from sgmcmc.minibatch import sample_indices

    generator = tf.random.Generator.from_seed(3)
    for n_rows, batch in ((100_000, 50), (60, 40)):  # rejection; permutation
        rows = sample_indices(generator, n_rows, batch, n_chains=3).numpy()
        assert rows.shape == (3, batch) and rows.min() >= 0 and rows.max() < n_rows
        assert all(len(set(r)) == batch for r in rows)
