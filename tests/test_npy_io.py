"""write_npy / open_npy (SPEC §11): round trips from every kind of source, in blocks that do not
divide N; bad sources refused with the block and column named; nothing left behind on failure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sgmcmc.datasets import open_npy, write_npy

N = 1_003  # not a multiple of the block sizes below


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "a": rng.normal(size=N), "b": rng.normal(size=N), "label": rng.integers(0, 2, size=N), "flag": rng.random(N) < 0.5,
    })


def _check(out, frame, columns=("a", "b", "label", "flag")):
    for c in columns:
        want = frame[c].to_numpy()
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(out[c], want.astype(np.float32))
        else:
            np.testing.assert_array_equal(out[c], want.astype(out[c].dtype))
    assert all(isinstance(v, np.memmap) for v in out.values())


def test_dataframe_round_trip_and_stacked_columns(frame, tmp_path):
    """Blocks of 100 rows (N = 1,003: the last block has 3): every value back, floats as float32,
    booleans int32; a dict of columns stacks them into one 2-d entry. Fails on a patched block
    loop that drops the last partial block (N − 3 rows)."""
    out = write_npy(frame, tmp_path / "d", block_rows=100, verbose=False)
    assert sorted(out) == ["a", "b", "flag", "label"] and out["flag"].dtype == np.int32
    _check(out, frame)
    stacked = write_npy(frame, tmp_path / "s", columns={"X": ["a", "b"], "y": "label"}, block_rows=64, verbose=False)
    np.testing.assert_array_equal(stacked["X"], frame[["a", "b"]].to_numpy(np.float32))
    np.testing.assert_array_equal(stacked["y"], frame["label"].to_numpy())
    assert open_npy(tmp_path / "s").keys() == stacked.keys()


def test_parquet_file_and_directory_with_several_row_groups(frame, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, tmp_path / "one.parquet", row_group_size=97)
    assert pq.ParquetFile(tmp_path / "one.parquet").num_row_groups > 5
    _check(write_npy(tmp_path / "one.parquet", tmp_path / "p1", block_rows=50, verbose=False), frame)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, (a, b) in enumerate([(0, 400), (400, 401), (401, N)]):
        pq.write_table(table.slice(a, b - a), parts / f"part-{i}.parquet", row_group_size=70)
    _check(write_npy(parts, tmp_path / "p2", columns=["a", "label"], block_rows=33, verbose=False), frame, ("a", "label"))


def test_csv_and_dict_of_arrays_and_h5py(frame, tmp_path):
    frame.to_csv(tmp_path / "d.csv", index=False)
    _check(write_npy(tmp_path / "d.csv", tmp_path / "c", block_rows=128, verbose=False), frame)
    arrays = {"x": np.arange(N * 3, dtype=np.float64).reshape(N, 3), "g": np.arange(N)}
    out = write_npy(arrays, tmp_path / "a", block_rows=200, verbose=False)
    np.testing.assert_array_equal(out["x"], arrays["x"].astype(np.float32))
    np.testing.assert_array_equal(out["g"], arrays["g"])
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d.h5", "w") as handle:
        handle["x"] = arrays["x"]
        out = write_npy({"x": handle["x"]}, tmp_path / "h", block_rows=300, verbose=False, float_dtype=np.float64)
    np.testing.assert_array_equal(out["x"], arrays["x"])


def test_bad_sources_are_named_and_leave_nothing(frame, tmp_path):
    bad = frame.copy()
    bad.loc[517, "b"] = np.nan
    with pytest.raises(ValueError, match=r"column 'b'.*row 517.*rows 500–599"):
        write_npy(bad, tmp_path / "n", block_rows=100, verbose=False)
    assert not (tmp_path / "n").exists() and not list(tmp_path.glob(".n.partial*"))
    text = frame.assign(city=pd.Categorical(["x", "y"] * (N // 2) + ["x"]))
    with pytest.raises(TypeError, match=r"column 'city'.*categorical.*codes"):
        write_npy(text, tmp_path / "t", verbose=False)
    with pytest.raises(KeyError, match="'nope'"):
        write_npy(frame, tmp_path / "k", columns=["a", "nope"], verbose=False)
    with pytest.raises(ValueError, match="different first-axis lengths"):
        write_npy({"x": np.zeros(3), "y": np.zeros(4)}, tmp_path / "l", verbose=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_npy(tmp_path / "missing.parquet", tmp_path / "m", verbose=False)
    write_npy(frame, tmp_path / "e", verbose=False)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_npy(frame, tmp_path / "e", verbose=False)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        open_npy(tmp_path / "nothing")
    np.save(tmp_path / "e" / "short.npy", np.zeros(5))
    with pytest.raises(ValueError, match="different lengths"):
        open_npy(tmp_path / "e")
