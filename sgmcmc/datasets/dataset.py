"""`get_dataset`: obtain, verify, parse (once) and return a registered data set."""

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import cache
from .errors import ParseError
from .fetch import LocalFile, cache_dir, obtain, reject
from .parse import read_idx, read_libsvm
from .registry import lookup

Arrays = dict[str, np.ndarray]


def _parse_libsvm(entry: dict[str, Any], files: dict[str, LocalFile]) -> Arrays:
    expect = entry["expect"]
    data = read_libsvm(
        files["data"].path, n_rows=expect["rows"], n_features=expect["features"], labels=expect["labels"]
    )
    return {"data": data}


def _assemble_libsvm(arrays: Arrays, entry: dict[str, Any]) -> np.ndarray:
    return arrays["data"]


def _parse_idx(entry: dict[str, Any], files: dict[str, LocalFile]) -> Arrays:
    expect = entry["expect"]
    arrays = {}
    for part, n_rows in (("train", expect["train_rows"]), ("test", expect["test_rows"])):
        images = read_idx(files[f"{part}_images"].path, shape=(n_rows, *expect["image_shape"]))
        labels_path = files[f"{part}_labels"].path
        labels = read_idx(labels_path, shape=(n_rows,))
        if labels.max(initial=0) >= expect["classes"]:
            raise ParseError(labels_path, f"label {labels.max()} outside 0..{expect['classes'] - 1}")
        arrays[f"{part}_images"] = images.reshape(n_rows, -1)
        arrays[f"{part}_labels"] = labels
    # The R package / TF tutorial split: the first 5,000 training images were validation.
    split = expect["train_split"]
    arrays["train_images"] = arrays["train_images"][-split:]
    arrays["train_labels"] = arrays["train_labels"][-split:]
    return arrays


def _assemble_idx(arrays: Arrays, entry: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    one_hot = np.eye(entry["expect"]["classes"], dtype=np.float32)
    return {
        part: {
            "images": arrays[f"{part}_images"].astype(np.float32) / np.float32(255),
            "labels": one_hot[arrays[f"{part}_labels"]],
        }
        for part in ("train", "test")
    }


_FORMATS: dict[str, tuple[Callable[..., Arrays], Callable[..., Any]]] = {
    "libsvm": (_parse_libsvm, _assemble_libsvm),
    "idx": (_parse_idx, _assemble_idx),
}


def get_dataset(name: str, *, registry: Mapping[str, Any] | None = None) -> Any:
    """Load an example data set, downloading and verifying it on first use.

    The upstream files live in :func:`cache_dir` (``$SGMCMC_DATA`` when set)
    under their upstream names. Files already there are verified (MD5 where
    published) and never overwritten; missing ones are downloaded from the
    registry's mirrors in order. The parsed arrays are cached next to them as
    ``<name>.npz``, which later calls load instead of parsing, for as long as
    the upstream files keep the same MD5.

    Parameters
    ----------
    name : {"covertype", "mnist"}
        The data set.
    registry : mapping, optional
        Replaces the shipped registry (``sgmcmc/datasets/registry.json``):
        name -> entry with ``format``, ``mirrors``, ``files`` and ``expect``
        as described in :mod:`sgmcmc.datasets.registry`. Meant for tests and
        private mirrors, e.g. tiny fixture files served from a local server.

    Returns
    -------
    numpy.ndarray or dict
        ``"covertype"``: float32 array of shape (581012, 55); column 0 is the
        label in {0, 1} (LIBSVM's 1 -> 0, 2 -> 1), columns 1-54 the scaled
        features in [0, 1].
        ``"mnist"``: ``{"train": {"images", "labels"}, "test": {...}}`` with
        float32 images in [0, 1] of shape (n, 784) and float32 one-hot labels
        of shape (n, 10); train is the last 55,000 of the official 60,000
        training images, test the official 10,000.

    Raises
    ------
    ValueError
        If `name` is unknown; the message lists the available names.
    DatasetCorruptError
        If a file fails its checksum or its structure check (wrong size,
        truncated, undecompressable); the message names the file and the fix.
    DatasetUnavailableError
        If files are missing and cannot be downloaded (e.g. offline); the
        message says which files to put in which directory and where to get
        them. Also an ``OSError``.
    """
    entry = lookup(name, registry)
    parse, assemble = _FORMATS[entry["format"]]
    directory = cache_dir()
    files = obtain(name, entry, directory)
    key = cache.fingerprint(entry, files)
    npz = directory / f"{name}.npz"
    arrays = cache.load(npz, key)
    if arrays is None:
        try:
            arrays = parse(entry, files)
        except ParseError as err:
            bad = next(file for file in files.values() if file.path == err.path)
            raise reject(bad, err.problem, entry) from err
        cache.save(npz, arrays, key)
    return assemble(arrays, entry)
