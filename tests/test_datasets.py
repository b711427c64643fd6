"""Tests for sgmcmc.datasets. No network: tiny upstream-format files served from 127.0.0.1."""

import bz2
import gzip
import json
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pooch
import pytest
from datasets_fixtures import (
    COVERTYPE_FILE,
    MNIST_FILES,
    Covertype,
    FileServer,
    Mnist,
    covertype_entry,
    dead_mirror,
    idx_gz,
    libsvm_bz2,
    md5,
    mnist_entry,
)

from sgmcmc.datasets import (
    DatasetCorruptError,
    DatasetUnavailableError,
    cache_dir,
    gaussian_mixture_data,
    get_dataset,
    synthetic_covertype,
)

N_COVERTYPE = 7
N_TRAIN, N_TEST, TRAIN_SPLIT = 5, 3, 3
COVERTYPE = Covertype.make(N_COVERTYPE)
MNIST = Mnist.make(N_TRAIN, N_TEST)
MNIST_MD5 = {key: md5(MNIST.files[name]) for key, name in MNIST_FILES.items()}


def covertype_registry(mirrors: list[str], md5: str | None = None, n_rows: int = N_COVERTYPE) -> dict:
    return {"covertype": covertype_entry(mirrors, n_rows, md5)}


def mnist_registry(mirrors: list[str], md5s: dict | None = None) -> dict:
    md5s = MNIST_MD5 if md5s is None else md5s
    return {"mnist": mnist_entry(mirrors, md5s, N_TRAIN, N_TEST, TRAIN_SPLIT)}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache directory, never the user's."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("SGMCMC_DATA", str(directory))
    return directory


@pytest.fixture
def server():
    s = FileServer({COVERTYPE_FILE: COVERTYPE.data, **MNIST.files})
    yield s
    s.close()


def place(directory: Path, name: str, data: bytes) -> Path:
    """Put a file into the cache by hand, as an offline user would."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(data)
    return path


# --- download, parse, cache ------------------------------------------------------------


def test_covertype_download_with_mirror_fallback(server, data_dir):
    data = get_dataset("covertype", registry=covertype_registry([dead_mirror(), server.mirror()]))
    assert data.dtype == np.float32
    assert data.shape == (N_COVERTYPE, 55)
    np.testing.assert_array_equal(data, COVERTYPE.expected)
    assert set(np.unique(data[:, 0])) == {0.0, 1.0}  # LIBSVM labels 1/2 -> 0/1
    assert (data_dir / COVERTYPE_FILE).read_bytes() == COVERTYPE.data
    assert (data_dir / "covertype.npz").exists()
    assert server.requests == {f"/ok/{COVERTYPE_FILE}": 1}


def test_mnist_parsed_split_and_one_hot(server, data_dir):
    out = get_dataset("mnist", registry=mnist_registry([dead_mirror(), server.mirror()]))
    assert set(out) == {"train", "test"}
    train, test = out["train"], out["test"]
    assert train["images"].shape == (TRAIN_SPLIT, 784) and test["images"].shape == (N_TEST, 784)
    assert train["labels"].shape == (TRAIN_SPLIT, 10) and test["labels"].shape == (N_TEST, 10)
    assert train["images"].dtype == np.float32 and train["labels"].dtype == np.float32
    # train is the LAST `train_split` images of the official training set
    np.testing.assert_allclose(train["images"], MNIST.train_images[-TRAIN_SPLIT:].reshape(-1, 784) / 255, rtol=1e-6)
    np.testing.assert_allclose(test["images"], MNIST.test_images.reshape(-1, 784) / 255, rtol=1e-6)
    assert train["images"].min() >= 0 and train["images"].max() <= 1
    np.testing.assert_array_equal(train["labels"], np.eye(10)[MNIST.train_labels[-TRAIN_SPLIT:]])
    np.testing.assert_array_equal(test["labels"], np.eye(10)[MNIST.test_labels])
    assert {name: (data_dir / name).read_bytes() for name in MNIST_FILES.values()} == MNIST.files
    assert sum(server.requests.values()) == 4


def test_second_call_uses_cache_without_network(server, data_dir):
    registry = mnist_registry([server.mirror()])
    first = get_dataset("mnist", registry=registry)
    requests = sum(server.requests.values())
    second = get_dataset("mnist", registry=registry)
    assert sum(server.requests.values()) == requests
    np.testing.assert_array_equal(first["train"]["images"], second["train"]["images"])
    # Without the .npz the upstream files are parsed again, still without the network.
    (data_dir / "mnist.npz").unlink()
    third = get_dataset("mnist", registry=registry)
    assert sum(server.requests.values()) == requests
    np.testing.assert_array_equal(first["test"]["labels"], third["test"]["labels"])


def test_hand_placed_files_are_used_offline(data_dir):
    for name, data in MNIST.files.items():
        place(data_dir, name, data)
    place(data_dir, COVERTYPE_FILE, COVERTYPE.data)
    out = get_dataset("mnist", registry=mnist_registry([dead_mirror()]))
    assert out["test"]["images"].shape == (N_TEST, 784)
    data = get_dataset("covertype", registry=covertype_registry([dead_mirror()]))
    np.testing.assert_array_equal(data, COVERTYPE.expected)


def test_only_missing_files_are_downloaded(server, data_dir):
    placed = MNIST_FILES["train_images"]
    place(data_dir, placed, MNIST.files[placed])
    get_dataset("mnist", registry=mnist_registry([server.mirror()]))
    assert f"/ok/{placed}" not in server.requests
    assert sum(server.requests.values()) == 3


def test_npz_is_rebuilt_when_upstream_file_changes(data_dir):
    registry = covertype_registry([dead_mirror()])
    path = place(data_dir, COVERTYPE_FILE, COVERTYPE.data)
    np.testing.assert_array_equal(get_dataset("covertype", registry=registry), COVERTYPE.expected)
    other = Covertype.make(N_COVERTYPE, seed=1)
    path.write_bytes(other.data)
    np.testing.assert_array_equal(get_dataset("covertype", registry=registry), other.expected)


def test_damaged_npz_is_rebuilt(data_dir):
    registry = covertype_registry([dead_mirror()])
    place(data_dir, COVERTYPE_FILE, COVERTYPE.data)
    get_dataset("covertype", registry=registry)
    (data_dir / "covertype.npz").write_bytes(b"not a zip file")
    np.testing.assert_array_equal(get_dataset("covertype", registry=registry), COVERTYPE.expected)


def test_unwritable_npz_warns_and_still_returns_data(data_dir):
    place(data_dir, COVERTYPE_FILE, COVERTYPE.data)
    (data_dir / "covertype.npz").mkdir()  # cannot be replaced by a file
    with pytest.warns(RuntimeWarning, match="parsed again"):
        data = get_dataset("covertype", registry=covertype_registry([dead_mirror()]))
    np.testing.assert_array_equal(data, COVERTYPE.expected)
    assert {p.name for p in data_dir.iterdir()} == {COVERTYPE_FILE, "covertype.npz"}  # no temporary left


def test_cache_dir_is_read_at_call_time(server, tmp_path, monkeypatch):
    registry = covertype_registry([server.mirror()])
    for i, sub in enumerate(["a", "b"], start=1):
        monkeypatch.setenv("SGMCMC_DATA", str(tmp_path / sub))
        assert cache_dir() == tmp_path / sub
        get_dataset("covertype", registry=registry)
        assert (tmp_path / sub / COVERTYPE_FILE).exists()
        assert server.requests[f"/ok/{COVERTYPE_FILE}"] == i
    monkeypatch.delenv("SGMCMC_DATA")
    assert cache_dir() == Path(pooch.os_cache("sgmcmc"))


# --- failures ----------------------------------------------------------------------------


def test_interrupted_download_leaves_no_file(server, data_dir):
    with pytest.raises(DatasetUnavailableError):
        get_dataset("covertype", registry=covertype_registry([server.mirror("cut")]))
    with pytest.raises(DatasetUnavailableError):
        get_dataset("mnist", registry=mnist_registry([server.mirror("cut")]))
    assert server.requests[f"/cut/{COVERTYPE_FILE}"] == 1
    assert not data_dir.exists() or list(data_dir.iterdir()) == []
    # and the next attempt starts cleanly
    np.testing.assert_array_equal(
        get_dataset("covertype", registry=covertype_registry([server.mirror()])), COVERTYPE.expected
    )


def test_download_failing_checksum_falls_back_to_next_mirror(server, data_dir):
    get_dataset("mnist", registry=mnist_registry([server.mirror("bad"), server.mirror()]))
    assert sum(n for path, n in server.requests.items() if path.startswith("/bad/")) == 4
    assert {name: (data_dir / name).read_bytes() for name in MNIST_FILES.values()} == MNIST.files


def test_corrupt_download_without_checksum_is_deleted(server, data_dir):
    with pytest.raises(DatasetCorruptError, match="is corrupt") as info:
        get_dataset("covertype", registry=covertype_registry([server.mirror("bad")]))
    assert "deleted" in str(info.value)
    assert not (data_dir / COVERTYPE_FILE).exists()


def test_checksum_mismatch_names_file_and_never_overwrites(server, data_dir):
    name = MNIST_FILES["train_labels"]
    wrong = idx_gz(np.zeros(N_TRAIN, dtype=np.uint8))
    path = place(data_dir, name, wrong)
    with pytest.raises(DatasetCorruptError) as info:
        get_dataset("mnist", registry=mnist_registry([server.mirror()]))
    message = str(info.value)
    assert str(path) in message and "is corrupt" in message and "delete or replace" in message
    assert md5(wrong) in message and MNIST_MD5["train_labels"] in message
    assert path.read_bytes() == wrong
    assert sum(server.requests.values()) == 0


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    "content, problem",
    [
        (libsvm_bz2(np.array([1, 2]), np.full((2, 54), 0.5)), "2 rows, expected 7"),
        (libsvm_bz2(np.resize([1, 3], N_COVERTYPE), np.zeros((N_COVERTYPE, 54))), "label 3"),
        (libsvm_bz2(np.ones(N_COVERTYPE), np.full((N_COVERTYPE, 54), 1.5)), "outside [0, 1]"),
        (bz2.compress(b"1 55:1\n" * N_COVERTYPE), "feature index 55"),
        (bz2.compress(b"1 3:1 2:1\n" * N_COVERTYPE), "not increasing"),
        (bz2.compress(b"1 3:x\n" * N_COVERTYPE), "non-numeric"),
        (bz2.compress(b"1 3:0.5 0.25\n" * N_COVERTYPE), "malformed"),
        (_truncated(COVERTYPE.data), "cannot decompress"),
        (b"1 3:0.5\n" * N_COVERTYPE, "cannot decompress"),
    ],
    ids=["rows", "label", "value", "index", "order", "text", "pairs", "truncated-bz2", "not-bz2"],
)
def test_covertype_structure_failure(data_dir, content, problem):
    path = place(data_dir, COVERTYPE_FILE, content)
    with pytest.raises(DatasetCorruptError) as info:
        get_dataset("covertype", registry=covertype_registry([dead_mirror()]))
    message = str(info.value)
    assert message.startswith(f"{path} is corrupt (md5 {md5(content)}; ")
    assert problem in message and "delete or replace" in message
    assert path.read_bytes() == content
    assert not (data_dir / "covertype.npz").exists()


@pytest.mark.parametrize(
    "key, content, problem",
    [
        ("train_images", idx_gz(MNIST.train_images, magic=2049), "magic number 2049, expected 2051"),
        ("train_images", idx_gz(MNIST.train_images[:, :27]), "dimensions [5, 27, 28]"),
        ("test_labels", gzip.compress(gzip.decompress(MNIST.files[MNIST_FILES["test_labels"]])[:-1]), "2 data bytes"),
        ("test_labels", idx_gz(np.full(N_TEST, 10)), "label 10"),
        ("test_images", _truncated(MNIST.files[MNIST_FILES["test_images"]]), "cannot decompress"),
        ("test_labels", b"\x00" * 3, "cannot decompress"),
    ],
    ids=["magic", "dims", "short", "label", "truncated-gz", "not-gz"],
)
def test_mnist_structure_failure(data_dir, key, content, problem):
    for name, data in MNIST.files.items():
        place(data_dir, name, data)
    path = place(data_dir, MNIST_FILES[key], content)
    no_checksums = dict.fromkeys(MNIST_FILES)
    with pytest.raises(DatasetCorruptError) as info:
        get_dataset("mnist", registry=mnist_registry([dead_mirror()], no_checksums))
    message = str(info.value)
    assert message.startswith(f"{path} is corrupt (md5 {md5(content)}; ")
    assert problem in message and "delete or replace" in message


def test_offline_without_cache_fails_fast_and_says_what_to_do(data_dir):
    mirrors = [dead_mirror(), dead_mirror()]
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError) as info:
        get_dataset("mnist", registry=mnist_registry(mirrors))
    assert time.monotonic() - start < 5
    assert isinstance(info.value, OSError) and isinstance(info.value, RuntimeError)
    message = str(info.value)
    assert str(data_dir) in message and "SGMCMC_DATA" in message
    for key, name in MNIST_FILES.items():
        assert name in message and MNIST_MD5[key] in message
        assert all(mirror + name in message for mirror in mirrors)


def test_unknown_name_lists_available_names():
    with pytest.raises(ValueError, match="'covertype', 'mnist'"):
        get_dataset("cifar")
    with pytest.raises(ValueError, match="available are 'mnist'"):
        get_dataset("covertype", registry=mnist_registry([dead_mirror()]))


def test_shipped_registry():
    registry = json.loads(resources.files("sgmcmc.datasets").joinpath("registry.json").read_text())
    covertype, mnist = registry["covertype"], registry["mnist"]
    assert covertype["mirrors"][0] + covertype["files"]["data"]["name"] == (
        "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/covtype.libsvm.binary.scale.bz2"
    )
    assert covertype["expect"] == {"rows": 581012, "features": 54, "labels": [1, 2]}
    assert {key: spec["name"] for key, spec in mnist["files"].items()} == MNIST_FILES
    assert mnist["files"]["train_images"]["md5"] == "f68b3c2dcbeaaa9fbdd348bbdeb94873"
    assert mnist["files"]["test_labels"]["md5"] == "ec29112dd5afa0611ce80d1b7f02629c"
    assert mnist["expect"]["train_split"] == 55000 and len(mnist["mirrors"]) == 3


# --- generated data --------------------------------------------------------------------


def test_gaussian_mixture_data():
    x = gaussian_mixture_data()
    assert x.shape == (1000, 2) and x.dtype == np.float32
    np.testing.assert_array_equal(x, gaussian_mixture_data(1000, seed=2))
    assert not np.array_equal(x, gaussian_mixture_data(1000, seed=3))
    big = gaussian_mixture_data(200_000, seed=0)
    np.testing.assert_allclose(big.mean(axis=0), [0.05, 0.05], atol=0.01)
    np.testing.assert_allclose(np.var(big, axis=0), 1 + 0.05**2, atol=0.02)


def test_synthetic_covertype():
    start = time.process_time()  # CPU time: robust to a busy machine
    data, coef = synthetic_covertype(return_coef=True)
    assert time.process_time() - start < 2
    assert data.shape == (581_012, 55) and data.dtype == np.float32 and coef.shape == (55,)
    assert set(np.unique(data[:, 0])) == {0.0, 1.0}
    features = data[:, 1:]
    assert features.min() >= 0 and features.max() <= 1
    assert (features[:, 10:14].sum(axis=1) == 1).all() and (features[:, 14:].sum(axis=1) == 1).all()
    # labels follow the stated logistic model
    p = 1 / (1 + np.exp(-(coef[0] + features @ coef[1:].astype(np.float32))))
    assert abs(data[:, 0].mean() - p.mean()) < 0.005
    small, small_coef = synthetic_covertype(1000, seed=0, return_coef=True)
    np.testing.assert_array_equal(small, synthetic_covertype(1000, seed=0))
    np.testing.assert_array_equal(small_coef, coef)
    assert not np.array_equal(small, synthetic_covertype(1000, seed=1))
