"""``sgmcmc.datasets.write_npy`` / ``open_npy``: round trips from every kind of source, column
selection and stacking, dtype rules, refusals that name the block and the column, a failed
write leaving nothing ``open_npy`` accepts, and bounded memory while writing.

Block sizes are chosen so that ``block_rows`` never divides N and Parquet row groups and files
do not line up with blocks: an off-by-one in a block loop loses, repeats or shifts rows, and the
exact comparisons below see it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sgmcmc.datasets import npy as npy_module
from sgmcmc.datasets import open_npy, write_npy


def frame(n: int = 1003, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "f64": rng.standard_normal(n),
        "f32": rng.standard_normal(n).astype(np.float32),
        "i64": rng.integers(-5, 5, n),
        "flag": rng.random(n) < 0.3,
        "g1": rng.standard_normal(n),
        "g2": np.arange(n, dtype=np.float64),  # the row number: shifted or repeated rows show
    })


def assert_no_leftovers(parent: Path, name: str) -> None:
    """Neither the output directory nor a temporary one beside it exists."""
    assert not (parent / name).exists()
    assert not [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


# == round trips ================================================================================

def test_dataframe_round_trip_dtypes_and_values(tmp_path):
    df = frame()
    out = write_npy(df, tmp_path / "d", block_rows=100, verbose=False)
    assert list(out) == sorted(df.columns)  # one entry per column, sorted by name
    assert all(isinstance(a, np.memmap) and len(a) == len(df) for a in out.values())
    # floats -> float32 (default dtype), ints kept, bools -> int32
    assert {k: a.dtype for k, a in out.items()} == {
        "f32": np.float32, "f64": np.float32, "flag": np.int32, "g1": np.float32, "g2": np.float32, "i64": np.int64}
    np.testing.assert_array_equal(out["f64"], df["f64"].to_numpy().astype(np.float32))
    np.testing.assert_array_equal(out["f32"], df["f32"].to_numpy())
    np.testing.assert_array_equal(out["i64"], df["i64"].to_numpy())
    np.testing.assert_array_equal(out["flag"], df["flag"].to_numpy().astype(np.int32))
    np.testing.assert_array_equal(out["g2"], np.arange(len(df)))

    kept = write_npy(df, tmp_path / "kept", dtype=None, block_rows=333, verbose=False)
    assert kept["f64"].dtype == np.float64 and kept["f32"].dtype == np.float32
    np.testing.assert_array_equal(kept["f64"], df["f64"].to_numpy())  # bit for bit
    wide = write_npy(df, tmp_path / "wide", columns=["f32"], dtype="float64", verbose=False)
    assert wide["f32"].dtype == np.float64
    # the files are ordinary .npy files whose rows start on a 64-byte boundary
    whole = np.load(tmp_path / "d" / "f64.npy")
    np.testing.assert_array_equal(whole, out["f64"])
    assert out["f64"].offset % 64 == 0


def test_nullable_pandas_columns(tmp_path):
    df = pd.DataFrame({"i": pd.array([1, 2, 3, 4], dtype="Int64"), "b": pd.array([True, False, True, True])})
    out = write_npy(df, tmp_path / "d", block_rows=3, verbose=False)
    assert out["i"].dtype == np.int64 and out["b"].dtype == np.int32
    np.testing.assert_array_equal(out["i"], [1, 2, 3, 4])
    np.testing.assert_array_equal(out["b"], [1, 0, 1, 1])
    with pytest.raises(ValueError, match=r"column 'i' is an integer column, but in the block of rows 3-4 row 4"):
        write_npy(pd.DataFrame({"i": pd.array([1, 2, 3, 4, None], dtype="Int64")}), tmp_path / "e", block_rows=3,
                  verbose=False)
    assert_no_leftovers(tmp_path, "e")


def test_parquet_file_of_several_row_groups(tmp_path, monkeypatch):
    df = frame(1000)
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=70)
    assert pq.ParquetFile(path).metadata.num_row_groups == 15

    def whole(*args, **kwargs):
        raise AssertionError("write_npy read a whole Parquet file")

    monkeypatch.setattr(pq, "read_table", whole)
    monkeypatch.setattr(pq.ParquetFile, "read", whole)
    out = write_npy(path, tmp_path / "d", columns={"X": ["g1", "g2", "f32"], "y": "i64"}, block_rows=64,
                    verbose=False)
    assert list(out) == ["X", "y"] and out["X"].shape == (1000, 3) and out["X"].dtype == np.float32
    expected = df[["g1", "g2", "f32"]].to_numpy().astype(np.float32)
    np.testing.assert_array_equal(out["X"], expected)
    np.testing.assert_array_equal(out["y"], df["i64"].to_numpy())


def test_parquet_directory_of_several_files(tmp_path):
    df = frame(408)
    parts = tmp_path / "parts"
    parts.mkdir()
    # written out of name order, of unequal sizes; files are read in name order
    for name, (a, b) in {"part-2.parquet": (358, 408), "part-0.parquet": (0, 101), "part-1.parquet": (101, 358)}.items():
        pq.write_table(pa.Table.from_pandas(df.iloc[a:b], preserve_index=False), parts / name, row_group_size=60)
    (parts / "_SUCCESS").write_text("")  # other files are ignored
    out = write_npy(parts, tmp_path / "d", columns=["g2", "flag"], block_rows=37, dtype=None, verbose=False)
    assert list(out) == ["flag", "g2"]
    np.testing.assert_array_equal(out["g2"], np.arange(408.0))
    np.testing.assert_array_equal(out["flag"], df["flag"].to_numpy().astype(np.int32))


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    n = 250
    df = pd.DataFrame({"x": rng.integers(-800, 800, n) / 8, "k": rng.integers(0, 9, n), "r": rng.standard_normal(n)})
    df.to_csv(tmp_path / "d.csv", index=False)
    out = write_npy(tmp_path / "d.csv", tmp_path / "d", block_rows=33, columns={"X": ["x", "k"], "k": "k", "r": "r"},
                    dtype=None, verbose=False)
    np.testing.assert_array_equal(out["X"], df[["x", "k"]].to_numpy(np.float64))
    np.testing.assert_array_equal(out["k"], df["k"].to_numpy())
    np.testing.assert_allclose(out["r"], df["r"].to_numpy(), rtol=1e-15)  # text round trip of float64
    # other separators through csv_options; the dtype of a column can be forced there too
    df.to_csv(tmp_path / "d.tsv", index=False, sep="\t")
    tsv = write_npy(tmp_path / "d.tsv", tmp_path / "t", csv_options={"sep": "\t", "dtype": {"k": "float64"}},
                    block_rows=64, verbose=False)
    assert tsv["k"].dtype == np.float32
    np.testing.assert_array_equal(tsv["x"], df["x"].to_numpy(np.float32))


def test_dict_of_arrays_and_memmaps(tmp_path):
    rng = np.random.default_rng(4)
    n = 517
    a = rng.standard_normal(n)
    m = rng.standard_normal((n, 3))
    np.save(tmp_path / "m.npy", m)
    cube = rng.integers(0, 7, (n, 2, 2)).astype(np.int16)
    source = {"a": a, "m": np.load(tmp_path / "m.npy", mmap_mode="r"), "cube": cube, "big_endian": a.astype(">f8")}
    out = write_npy(source, tmp_path / "d", block_rows=50, dtype=None, verbose=False)
    assert out["cube"].shape == (n, 2, 2) and out["cube"].dtype == np.int16
    np.testing.assert_array_equal(out["cube"], cube)
    np.testing.assert_array_equal(out["m"], m)
    assert out["big_endian"].dtype == np.dtype("=f8")  # native byte order on disk
    np.testing.assert_array_equal(out["big_endian"], a)
    # stacking a 1-D and an (N, 3) entry gives (N, 4); a list of one column gives (N, 1)
    st = write_npy(source, tmp_path / "s", columns={"X": ["m", "a"], "a1": ["a"]}, block_rows=64, verbose=False)
    np.testing.assert_array_equal(st["X"], np.column_stack([m, a]).astype(np.float32))
    assert st["a1"].shape == (n, 1)
    with pytest.raises(ValueError, match=r"the dict of arrays has no rows"):
        write_npy({"a": np.zeros((0, 2))}, tmp_path / "empty", verbose=False)
    assert_no_leftovers(tmp_path, "empty")
    with pytest.raises(ValueError, match=r"entry 'X' stacks column 'cube' of row shape \(2, 2\)"):
        write_npy(source, tmp_path / "bad", columns={"X": ["a", "cube"]}, verbose=False)


def test_h5py_dataset_and_file(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((301, 4)), rng.integers(0, 2, 301).astype(np.int8)
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["x"], f["y"] = x, y
        f.create_group("meta")  # groups in a file are skipped
    with h5py.File(tmp_path / "d.h5", "r") as f:
        out = write_npy({"x": f["x"], "y": f["y"]}, tmp_path / "a", block_rows=40, verbose=False)
        np.testing.assert_array_equal(out["x"], x.astype(np.float32))
        np.testing.assert_array_equal(out["y"], y)
        whole = write_npy(f, tmp_path / "b", block_rows=299, dtype=None, verbose=False)  # the file as a mapping
        assert list(whole) == ["x", "y"]
        np.testing.assert_array_equal(whole["x"], x)


def test_zarr_array(tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr is optional (pip install zarr)")
    data = np.arange(600.0).reshape(200, 3)
    z = zarr.array(data, chunks=(64, 3))
    out = write_npy({"z": z}, tmp_path / "d", block_rows=45, dtype=None, verbose=False)
    np.testing.assert_array_equal(out["z"], data)


def test_overwrite_and_progress(tmp_path, capsys):
    first = write_npy({"a": np.arange(5.0)}, tmp_path / "d", verbose=False)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_npy({"b": np.arange(3.0)}, tmp_path / "d", verbose=False)
    np.testing.assert_array_equal(first["a"], np.arange(5.0))
    again = write_npy({"b": np.arange(3.0)}, tmp_path / "d", overwrite=True, verbose=True)
    assert list(again) == ["b"]  # the old entries are gone, not mixed in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert "3.00/3.00" in capsys.readouterr().err  # tqdm's bar counted the rows


# == refusals ===================================================================================

def test_open_npy_refusals(tmp_path):
    with pytest.raises(FileNotFoundError, match="no directory .*write_npy"):
        open_npy(tmp_path / "nowhere")
    (tmp_path / "file.npy").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="is a file"):
        open_npy(tmp_path / "file.npy")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.parquet").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"no \.npy files .*x\.parquet.*write_npy"):
        open_npy(empty)
    odd = tmp_path / "odd"
    odd.mkdir()
    np.save(odd / "X.npy", np.zeros((10, 2)))
    np.save(odd / "y.npy", np.zeros(9))
    with pytest.raises(ValueError, match=r"different first-axis lengths \{'X': 10, 'y': 9\}"):
        open_npy(odd)
    objects = tmp_path / "objects"
    objects.mkdir()
    np.save(objects / "s.npy", np.array(["a", None], dtype=object), allow_pickle=True)
    with pytest.raises(TypeError, match=r"s\.npy holds Python objects"):
        open_npy(objects)
    scalar = tmp_path / "scalar"
    scalar.mkdir()
    np.save(scalar / "c.npy", np.float64(1.0))
    with pytest.raises(ValueError, match=r"c\.npy is a scalar"):
        open_npy(scalar)


@pytest.mark.parametrize("case", ["missing file", "no parquet in dir", "unknown suffix", "missing column",
                                  "lengths", "string column", "category column", "datetime column", "bad name"])
def test_bad_sources_refused_up_front(tmp_path, case):
    df = frame(20)
    expected = {
        "missing file": (FileNotFoundError, r"no file or directory '.*nothere\.parquet'"),
        "no parquet in dir": (FileNotFoundError, r"holds no \*\.parquet file"),
        "unknown suffix": (ValueError, r"cannot tell the format of '.*data\.bin'"),
        "missing column": (KeyError, r"has no column\(s\) \['nope'\]; it has \['f64', 'f32'"),
        "lengths": (ValueError, r"different first-axis lengths \{'a': 5, 'b': 4\}"),
        "string column": (TypeError, r"column 'name' of the DataFrame is not numeric \(dtype (object|str)\).*cat\.codes"),
        "category column": (TypeError, r"column 'kind' of the Parquet file .* is not numeric \(dtype dictionary.*codes"),
        "datetime column": (TypeError, r"column 'when' of the DataFrame is not numeric \(dtype datetime64.*epoch"),
        "bad name": (ValueError, r"entry name '\.hidden' cannot be a file name"),
    }[case]
    if case == "missing file":
        source, kwargs = tmp_path / "nothere.parquet", {}
    elif case == "no parquet in dir":
        (tmp_path / "parts").mkdir()
        source, kwargs = tmp_path / "parts", {}
    elif case == "unknown suffix":
        (tmp_path / "data.bin").write_bytes(b"1,2")
        source, kwargs = tmp_path / "data.bin", {}
    elif case == "missing column":
        source, kwargs = df, {"columns": {"X": ["f64", "nope"]}}
    elif case == "lengths":
        source, kwargs = {"a": np.zeros(5), "b": np.zeros(4)}, {}
    elif case == "string column":
        source, kwargs = df.assign(name=["x"] * 20), {}
    elif case == "category column":
        path = tmp_path / "c.parquet"
        pq.write_table(pa.Table.from_pandas(df.assign(kind=pd.Categorical(["a", "b"] * 10)), preserve_index=False),
                       path)
        source, kwargs = path, {}
    elif case == "datetime column":
        source, kwargs = df.assign(when=pd.date_range("2020-01-01", periods=20)), {}
    else:
        source, kwargs = df, {"columns": {".hidden": "f64"}}
    error, pattern = expected
    with pytest.raises(error, match=pattern):
        write_npy(source, tmp_path / "out", verbose=False, **kwargs)
    assert_no_leftovers(tmp_path, "out")


def test_nan_and_inf_named_by_row_block_and_column(tmp_path):
    df = frame(500)
    df.loc[317, "g1"] = np.nan
    with pytest.raises(ValueError, match=r"column 'g1' holds nan at row 317 \(block of rows 300-399\).*allow_nan=True"):
        write_npy(df, tmp_path / "out", columns={"X": ["f64", "g1"]}, block_rows=100, verbose=False)
    assert_no_leftovers(tmp_path, "out")
    out = write_npy(df, tmp_path / "nan", columns=["g1"], allow_nan=True, block_rows=100, verbose=False)
    assert np.isnan(out["g1"][317]) and np.isfinite(np.delete(np.asarray(out["g1"]), 317)).all()

    big = {"v": np.r_[np.zeros(40), 1e39, np.zeros(9)]}  # finite in float64, Inf in float32
    with pytest.raises(ValueError, match=r"column 'v' holds 1e\+39 at row 40 \(block of rows 40-49\) \(Inf after "
                                         r"the cast to float32\)"):
        write_npy(big, tmp_path / "inf", block_rows=10, verbose=False)
    assert_no_leftovers(tmp_path, "inf")
    np.testing.assert_array_equal(write_npy(big, tmp_path / "f64", dtype=None, verbose=False)["v"], big["v"])


def test_parquet_nulls_and_schema_clash(tmp_path):
    table = pa.table({"i": pa.array([1, 2, None, 4, 5], pa.int64()), "f": pa.array([0.5, None, 1.0, 2.0, 3.0])})
    pq.write_table(table, tmp_path / "n.parquet", row_group_size=2)
    with pytest.raises(ValueError, match=r"column 'i' has a missing value \(null\) at row 2 \(file n\.parquet, block "
                                         r"of rows 2-3\)"):
        write_npy(tmp_path / "n.parquet", tmp_path / "out", columns=["i"], block_rows=2, verbose=False)
    with pytest.raises(ValueError, match=r"column 'f' holds nan at row 1 \(block of rows 0-1\)"):
        write_npy(tmp_path / "n.parquet", tmp_path / "out", columns=["f"], block_rows=2, verbose=False)
    assert_no_leftovers(tmp_path, "out")

    parts = tmp_path / "parts"
    parts.mkdir()
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": [1, 2]}), parts / "0.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": [1.5, 2.5]}), parts / "1.parquet")
    with pytest.raises(ValueError, match=r"1\.parquet has columns \[a: double, b: double\], but 0\.parquet has "
                                         r"\[a: double, b: int64\]"):
        write_npy(parts, tmp_path / "out", verbose=False)
    assert_no_leftovers(tmp_path, "out")


def test_csv_later_block_that_does_not_fit(tmp_path):
    lines = ["a,k"] + [f"{i / 4},{i % 3}" for i in range(1200)]
    text = tmp_path / "text.csv"
    text.write_text("\n".join(lines[:1101] + ["oops,1"] + lines[1102:]) + "\n")  # data row 1100
    with pytest.raises(TypeError, match=r"column 'a' is not numeric in the block of rows 1100-1199 \(dtype object, "
                                        r"e\.g\. 'oops'\)"):
        write_npy(text, tmp_path / "out", block_rows=100, verbose=False)
    assert_no_leftovers(tmp_path, "out")

    decimal = tmp_path / "decimal.csv"
    decimal.write_text("\n".join(lines[:1051] + ["1.0,2.5"] + lines[1052:]) + "\n")  # k is integer in the head
    with pytest.raises(ValueError, match=r"column 'k' is an integer column, but in the block of rows 1000-1099 row "
                                         r"1050 holds 2\.5 \(missing or not an integer\).*csv_options=\{'dtype': \{'k': 'float64'\}\}"):
        write_npy(decimal, tmp_path / "out", block_rows=100, verbose=False)
    assert_no_leftovers(tmp_path, "out")
    fixed = write_npy(decimal, tmp_path / "out", block_rows=100, csv_options={"dtype": {"k": "float64"}},
                      verbose=False)
    assert fixed["k"][1050] == 2.5 and fixed["k"].dtype == np.float32 and len(fixed["k"]) == 1200


# == interrupted writes =========================================================================

class FailingArray:
    """An array-like whose reads fail from row ``fail_at`` on (a disk error, a Ctrl-C)."""

    def __init__(self, data: np.ndarray, fail_at: int, error: BaseException) -> None:
        self.data, self.fail_at, self.error = data, fail_at, error
        self.shape, self.dtype = data.shape, data.dtype

    def __getitem__(self, index: slice) -> np.ndarray:
        if index.stop > self.fail_at:
            raise self.error
        return self.data[index]


@pytest.mark.parametrize("error", [OSError("disk went away"), KeyboardInterrupt()])
def test_failed_write_leaves_nothing(tmp_path, error):
    data = np.arange(1000.0)
    source = {"ok": data, "x": FailingArray(data, 650, error)}
    with pytest.raises(type(error)):
        write_npy(source, tmp_path / "out", block_rows=100, verbose=False)
    assert_no_leftovers(tmp_path, "out")
    # replacing an existing directory: the old one survives a failed write untouched
    write_npy({"ok": data}, tmp_path / "out", verbose=False)
    with pytest.raises(type(error)):
        write_npy(source, tmp_path / "out", block_rows=100, overwrite=True, verbose=False)
    assert list(open_npy(tmp_path / "out")) == ["ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_killed_write_leaves_a_directory_open_npy_refuses(tmp_path, monkeypatch):
    """A kill gives no chance to clean up: simulated by skipping the clean-up."""
    monkeypatch.setattr(npy_module, "_discard", lambda tmp: None)
    data = np.arange(1000.0)
    with pytest.raises(OSError):
        write_npy({"a": data, "x": FailingArray(data, 650, OSError("killed"))}, tmp_path / "out", block_rows=100,
                  verbose=False)
    assert not (tmp_path / "out").exists()
    (partial,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial-")]
    assert sorted(p.name for p in partial.iterdir()) == ["a.npy", "x.npy"]
    assert (partial / "a.npy").stat().st_size == 128 + 600 * 4  # 6 blocks of float32 were written
    with pytest.raises(ValueError, match=r"a\.npy is not a complete \.npy file"):
        open_npy(partial)


# == memory =====================================================================================

class LazyArray:
    """A float64 array-like of ``shape`` whose rows are made when read: the source takes no memory."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape, self.dtype = shape, np.dtype(np.float64)

    def __getitem__(self, index: slice) -> np.ndarray:
        start, stop, _ = index.indices(self.shape[0])
        rows = np.arange(start, stop, dtype=np.float64)[:, None]
        return rows + np.arange(self.shape[1], dtype=np.float64) / 64


def rss_anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise RuntimeError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_memory_stays_bounded(tmp_path):
    n, width = 1_000_000, 25  # 200 MB of float64 read, 100 MB of float32 written
    block_rows = 20_000  # 4 MB of float64 per block
    base = rss_anon_kib()
    peak, stop = [base], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_anon_kib())
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        out = write_npy({"X": LazyArray((n, width))}, tmp_path / "d", block_rows=block_rows, verbose=False)
    finally:
        stop.set()
        thread.join()
    extra_mb = (peak[0] - base) / 1024
    source_mb = n * width * 8 / 1e6
    assert extra_mb < 40, f"write_npy used {extra_mb:.0f} MB above its start for a {source_mb:.0f} MB source"
    assert out["X"].shape == (n, width)
    np.testing.assert_array_equal(out["X"][[0, 19_999, 20_000, n - 1], 3], np.float32(np.array([0, 19_999, 20_000, n - 1]) + 3 / 64))
