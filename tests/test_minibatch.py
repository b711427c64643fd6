"""The minibatch indices (sgmcmc.data.minibatch) are exact uniform subsets without replacement — first
distinct of i.i.d. draws; top keys for n > N/2 — and a function of (seed, stream, chain,
iteration) alone: chunking, the number of chains beside a chain, and the other streams change
nothing."""

import itertools

import numpy as np
import pytest
from scipy import stats

import sgmcmc.data.minibatch
from sgmcmc.data.minibatch import CHAIN_STREAM, STORAGE_STREAM, MinibatchIndices, draws_for_distinct


def draws(n_rows: int, batch_size: int, n_draws: int, seed: int = 0, n_chains: int = 1, per_iteration: int = 1) -> np.ndarray:
    """``[n_draws, n_chains, batch_size]`` (``[n_draws, batch_size]`` for one chain), one
    minibatch per iteration (or ``per_iteration``, flattened into the draws)."""
    sampler = MinibatchIndices(n_rows, batch_size, per_iteration=per_iteration)
    out = sampler.draw(seed, CHAIN_STREAM, np.arange(n_chains), 0, n_draws // per_iteration)
    out = out.reshape(-1, n_chains, batch_size)
    return out[:, 0] if n_chains == 1 else out


def _uniform_over_subsets(out: np.ndarray, n_rows: int, batch_size: int) -> float:
    """Chi-square p-value of the sorted rows against all C(n_rows, batch_size) subsets."""
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n_rows), batch_size))}
    counts = np.bincount([subsets[tuple(sorted(row))] for row in out], minlength=len(subsets))
    return stats.chisquare(counts).pvalue


@pytest.mark.parametrize("n_rows, batch_size", [(12, 3), (12, 9)], ids=["first-distinct", "top-keys"])
def test_subsets_are_distinct_and_uniform(n_rows, batch_size):
    out = draws(n_rows, batch_size, 4000)
    assert out.min() >= 0 and out.max() < n_rows
    assert all(len(set(row)) == batch_size for row in out)
    # Every one of the C(12, k) = 220 subsets equally likely (18 draws a cell): chi-square.
    assert _uniform_over_subsets(out, n_rows, batch_size) > 1e-4


def test_positions_are_uniform_and_pairwise_independent():
    """Per position j of the minibatch, the row is uniform on [0, 6) (chi-square); positions 0
    and 1 jointly uniform over the 30 ordered pairs of distinct rows (sequential sampling with
    repeats rejected: ordered tuples uniform)."""
    out = draws(6, 3, 6000, seed=4)
    for j in range(3):
        assert stats.chisquare(np.bincount(out[:, j], minlength=6)).pvalue > 1e-4
    pairs = out[:, 0] * 6 + out[:, 1]
    counts = np.bincount(pairs, minlength=36).reshape(6, 6)
    assert np.all(np.diag(counts) == 0)
    assert stats.chisquare(counts[~np.eye(6, dtype=bool)]).pvalue > 1e-4


def test_first_distinct_redraws_exactly(monkeypatch):
    """With M = n + 1 draws (fewer than n distinct in 14 % of them at N = 12, n = 4, so the redraw
    runs often) the subsets are still uniform: the redraw keeps the sampler exact. Fails on
    patched copies: the n smallest distinct values instead of the first n (p ≈ 1e-130); a short
    row padded with its last value instead of redrawn (repeats)."""
    monkeypatch.setattr(sgmcmc.data.minibatch, "draws_for_distinct", lambda n_rows, batch_size: batch_size + 1)
    out = draws(12, 4, 6000, seed=1)
    assert all(len(set(row)) == 4 for row in out)
    assert _uniform_over_subsets(out, 12, 4) > 1e-4  # 495 subsets, 12 draws a cell


def test_chains_are_independent_uniform_subsets():
    """Three chains: each chain's subset is uniform, and chains 0 and 1 jointly uniform over the
    15 × 15 pairs of 2-subsets of 6 rows (independent)."""
    out = draws(6, 2, 4500, seed=2, n_chains=3)
    assert out.shape == (4500, 3, 2) and out.min() >= 0 and out.max() < 6
    for k in range(3):
        assert _uniform_over_subsets(out[:, k], 6, 2) > 1e-4
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(6), 2))}
    pair = [subsets[tuple(sorted(a))] * 15 + subsets[tuple(sorted(b))] for a, b in zip(out[:, 0], out[:, 1])]
    assert stats.chisquare(np.bincount(pair, minlength=225)).pvalue > 1e-4


@pytest.mark.parametrize("replace", [False, True], ids=["subsets", "replace"])
def test_a_minibatch_depends_on_seed_stream_chain_and_iteration_alone(replace):
    """Drawing iterations 1–300 in one go equals drawing them in uneven chunks; chain 2 of 5
    equals chain 2 drawn alone; the storage stream and another seed differ. Fails on a patched
    copy whose counter starts at t0 instead of t0·B (chunks overlap)."""
    sampler = MinibatchIndices(10_000, 50, replace=replace, per_iteration=2)
    whole = sampler.draw(7, CHAIN_STREAM, np.arange(5), 0, 300)
    cuts = [0, 1, 37, 38, 200, 300]
    pieces = np.concatenate([sampler.draw(7, CHAIN_STREAM, np.arange(5), a, b - a) for a, b in zip(cuts, cuts[1:])])
    np.testing.assert_array_equal(whole, pieces)
    np.testing.assert_array_equal(whole[:, :, 2], sampler.draw(7, CHAIN_STREAM, [2], 0, 300)[:, :, 0])
    assert not np.array_equal(whole, sampler.draw(7, STORAGE_STREAM, np.arange(5), 0, 300))
    assert not np.array_equal(whole, sampler.draw(8, CHAIN_STREAM, np.arange(5), 0, 300))
    assert not np.array_equal(whole[:, 0], whole[:, 1])  # the two draws of an iteration differ


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


@pytest.mark.parametrize("n_rows", [581_012, 55_000])
def test_large_dataset_marginals(n_rows):
    """n = 500 of N = 581,012 (covertype) and 55,000 (MNIST, where repeats among the first n
    draws are common: the one-by-one path): distinct indices, every decile of the index range and
    every residue mod 7 equally often."""
    out = draws(n_rows, 500, 300)
    assert out.min() >= 0 and out.max() < n_rows
    assert all(len(set(row)) == 500 for row in out)
    assert stats.chisquare(np.bincount(out.ravel() * 10 // n_rows, minlength=10)).pvalue > 1e-4
    assert stats.chisquare(np.bincount(out.ravel() % 7, minlength=7)).pvalue > 1e-4


def test_every_row_is_every_row():
    out = draws(40, 40, 3, n_chains=2)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(40), (3, 2, 40)))


def test_vectorised_first_distinct_equals_the_one_by_one_rule():
    """first_distinct on 2,000 rows of 12 draws from 10 values equals, row by row, the first n
    distinct values in draw order found with a Python set (and flags the rows with fewer).
    Fails on a patched copy that takes the n smallest distinct values."""
    rng = np.random.default_rng(9)
    values = rng.integers(0, 10, size=(2_000, 12))
    got, enough = sgmcmc.data.minibatch.first_distinct(values, 6)
    for row, out, ok in zip(values, got, enough):
        seen = list(dict.fromkeys(row.tolist()))
        assert ok == (len(seen) >= 6)
        if ok:
            assert out.tolist() == seen[:6]


@pytest.mark.parametrize("n_rows, batch_size", [(3_000, 500), (12, 6), (40, 20)])
def test_the_all_rows_path_equals_the_look_for_repeat_free_rows(n_rows, batch_size, monkeypatch):
    """Where a repeat in the first n draws is likely (prod(1 - i/N) < 1/2), ``_choose`` sends
    every row to first_distinct without first looking for repeat-free ones; the minibatches are
    the same bits either way, the redraw of short rows included (N = 12, n = 6 with M = n + 1
    redraws often; 3 chains, L = 2, 400 iterations). Fails on a patched copy whose all-rows path
    keeps the n smallest distinct values, or skips the redraw."""
    monkeypatch.setattr(sgmcmc.data.minibatch, "draws_for_distinct",
                        lambda n, b: b + 1 if n == 12 else draws_for_distinct(n, b))  # the module's own
    fast = MinibatchIndices(n_rows, batch_size, per_iteration=2)
    checked = MinibatchIndices(n_rows, batch_size, per_iteration=2)
    checked.p_no_repeat = 1.0  # force the look for repeat-free rows
    assert fast.p_no_repeat < 0.5
    np.testing.assert_array_equal(fast.draw(3, CHAIN_STREAM, np.arange(3), 17, 400),
                                  checked.draw(3, CHAIN_STREAM, np.arange(3), 17, 400))
