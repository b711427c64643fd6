"""Parsers for the upstream file formats: LIBSVM sparse text (``.bz2``) and IDX (``.gz``).

Both check the structure the registry promises and raise
:class:`~sgmcmc.datasets.errors.ParseError` on any deviation, so a truncated
or damaged file can never come back as a silently wrong array.
"""

import bz2
import gzip
import math
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .errors import ParseError


def _decompress(path: Path, decompress: Callable[[bytes], bytes]) -> bytes:
    raw = path.read_bytes()
    try:
        return decompress(raw)
    except (OSError, EOFError, ValueError, zlib.error) as err:
        raise ParseError(path, f"cannot decompress: {err}") from err


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def read_libsvm(path: Path, *, n_rows: int, n_features: int, labels: Sequence[int]) -> np.ndarray:
    """Read a bz2-compressed LIBSVM file into a dense ``[label, features]`` array.

    The format is one line per row, ``label index:value index:value ...``,
    with 1-based feature indices in increasing order and zeros omitted.

    Parameters
    ----------
    path : Path
        The ``.bz2`` file.
    n_rows, n_features : int
        The exact number of rows and the largest feature index allowed.
    labels : sequence of two ints
        The two label values in the file; the first becomes 0, the second 1.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``(n_rows, 1 + n_features)``: column 0 the
        label in {0, 1}, columns 1.. the features.

    Raises
    ------
    ParseError
        If the file cannot be decompressed, has the wrong number of rows, a
        malformed line, a label not in `labels`, a feature index outside
        ``1..n_features`` or not increasing, or a value outside [0, 1].
    """
    text = _decompress(path, bz2.decompress)
    buf = np.frombuffer(text, dtype=np.uint8)
    line_ends = np.flatnonzero(buf == ord("\n"))
    if buf.size and buf[-1] != ord("\n"):
        line_ends = np.append(line_ends, buf.size)
    if line_ends.size != n_rows:
        raise ParseError(path, f"{line_ends.size} rows, expected {n_rows}")
    # One "index:value" pair per colon; a line's tokens are its label plus two per pair.
    nnz = np.bincount(np.searchsorted(line_ends, np.flatnonzero(buf == ord(":"))), minlength=n_rows)
    try:
        tokens = np.fromstring(text.replace(b":", b" "), sep=" ")
    except ValueError as err:
        raise ParseError(path, "non-numeric text where 'label index:value ...' was expected") from err
    if tokens.size != n_rows + 2 * nnz.sum():
        raise ParseError(path, "malformed line: expected 'label index:value index:value ...'")

    row_starts = np.concatenate(([0], np.cumsum(1 + 2 * nnz)[:-1]))
    label = tokens[row_starts]
    is_label = np.zeros(tokens.size, dtype=bool)
    is_label[row_starts] = True
    index, value = tokens[~is_label].reshape(-1, 2).T
    row = np.repeat(np.arange(n_rows), nnz)

    bad = ~np.isin(label, labels)
    if bad.any():
        i = _first(bad)
        raise ParseError(path, f"line {i + 1}: label {label[i]:g}, expected one of {list(labels)}")
    bad = (index != np.round(index)) | (index < 1) | (index > n_features)
    if bad.any():
        i = _first(bad)
        raise ParseError(path, f"line {row[i] + 1}: feature index {index[i]:g} outside 1..{n_features}")
    bad = (np.diff(index) <= 0) & (np.diff(row) == 0)
    if bad.any():
        raise ParseError(path, f"line {row[_first(bad)] + 1}: feature indices not increasing")
    bad = ~((value >= 0) & (value <= 1))  # also catches NaN
    if bad.any():
        i = _first(bad)
        raise ParseError(path, f"line {row[i] + 1}: value {value[i]:g} outside [0, 1]")

    data = np.zeros((n_rows, 1 + n_features), dtype=np.float32)
    data[:, 0] = label == labels[1]
    data[row, index.astype(np.intp)] = value
    return data


def read_idx(path: Path, *, shape: Sequence[int]) -> np.ndarray:
    """Read a gzip-compressed IDX file of unsigned bytes (the MNIST format).

    The header is the magic number ``0x0800 + ndim`` (2049 for labels, 2051
    for images) and one big-endian uint32 per dimension, followed by the data.

    Parameters
    ----------
    path : Path
        The ``.gz`` file.
    shape : sequence of int
        The exact dimensions expected, e.g. ``(60000, 28, 28)`` or ``(60000,)``.

    Returns
    -------
    numpy.ndarray
        uint8 array of the given shape.

    Raises
    ------
    ParseError
        If the file cannot be decompressed or its magic number, dimensions or
        length differ from what `shape` implies.
    """
    data = _decompress(path, gzip.decompress)
    ndim = len(shape)
    magic = 0x0800 + ndim
    header = 4 * (1 + ndim)
    if len(data) < header:
        raise ParseError(path, f"{len(data)} bytes, too short for an IDX header")
    found_magic, *dims = (int(d) for d in np.frombuffer(data, dtype=">u4", count=1 + ndim))
    if found_magic != magic:
        raise ParseError(path, f"IDX magic number {found_magic}, expected {magic}")
    if dims != list(shape):
        raise ParseError(path, f"IDX dimensions {dims}, expected {list(shape)}")
    body = np.frombuffer(data, dtype=np.uint8, offset=header)
    if body.size != math.prod(shape):
        raise ParseError(path, f"{body.size} data bytes, expected {math.prod(shape)}")
    return body.reshape(shape)
