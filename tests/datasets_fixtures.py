"""Tiny data files in the exact upstream formats, and a local HTTP server for them.

Used by ``test_datasets.py``; nothing here touches the network beyond 127.0.0.1.
"""

import bz2
import gzip
import hashlib
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

COVERTYPE_FILE = "covtype.libsvm.binary.scale.bz2"
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def libsvm_bz2(labels: np.ndarray, features: np.ndarray) -> bytes:
    """LIBSVM text ("label idx:val ...", 1-based, zeros omitted), bz2-compressed."""
    lines = []
    for label, row in zip(labels, features):
        pairs = [f"{j + 1}:{value:.6g}" for j, value in enumerate(row) if value != 0]
        lines.append(" ".join([f"{label:g}", *pairs]))
    return bz2.compress(("\n".join(lines) + "\n").encode())


def idx_gz(array: np.ndarray, magic: int | None = None) -> bytes:
    """An IDX file of unsigned bytes (magic 2049 for 1-d, 2051 for 3-d), gzip-compressed."""
    magic = 0x0800 + array.ndim if magic is None else magic
    header = struct.pack(f">{1 + array.ndim}I", magic, *array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


@dataclass
class Covertype:
    """A small covertype file and the array `get_dataset` must return for it."""

    data: bytes
    expected: np.ndarray

    @classmethod
    def make(cls, n_rows: int = 7, seed: int = 0) -> "Covertype":
        rng = np.random.default_rng(seed)
        features = np.zeros((n_rows, 54))
        # Six significant digits, as in the real file, so the text round-trips exactly.
        features[:, :10] = [[float(f"{v:.6g}") for v in row] for row in rng.random((n_rows, 10))]
        features[:, 3] = 0  # a continuous feature that is sometimes 0 and then omitted
        features[np.arange(n_rows), 10 + rng.integers(0, 4, n_rows)] = 1
        features[np.arange(n_rows), 14 + rng.integers(0, 40, n_rows)] = 1
        labels = np.resize([1, 2, 2], n_rows)
        expected = np.column_stack([labels == 2, features]).astype(np.float32)
        return cls(libsvm_bz2(labels, features), expected)


@dataclass
class Mnist:
    """Small IDX files and the raw arrays they hold."""

    files: dict[str, bytes]
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray

    @classmethod
    def make(cls, n_train: int = 5, n_test: int = 3, seed: int = 0) -> "Mnist":
        rng = np.random.default_rng(seed)
        arrays = {
            "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
            "train_labels": rng.integers(0, 10, n_train, dtype=np.uint8),
            "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
            "test_labels": rng.integers(0, 10, n_test, dtype=np.uint8),
        }
        files = {MNIST_FILES[key]: idx_gz(array) for key, array in arrays.items()}
        return cls(files, **arrays)


def covertype_entry(mirrors: list[str], n_rows: int, md5: str | None = None) -> dict[str, Any]:
    return {
        "format": "libsvm",
        "mirrors": mirrors,
        "files": {"data": {"name": COVERTYPE_FILE, "md5": md5}},
        "expect": {"rows": n_rows, "features": 54, "labels": [1, 2]},
    }


def mnist_entry(
    mirrors: list[str], md5s: dict[str, str | None], n_train: int, n_test: int, train_split: int
) -> dict[str, Any]:
    return {
        "format": "idx",
        "mirrors": mirrors,
        "files": {key: {"name": name, "md5": md5s[key]} for key, name in MNIST_FILES.items()},
        "expect": {
            "train_rows": n_train,
            "test_rows": n_test,
            "image_shape": [28, 28],
            "classes": 10,
            "train_split": train_split,
        },
    }


def dead_mirror() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


class FileServer:
    """Serves files from memory on 127.0.0.1 in a background thread, counting requests.

    The first path component chooses the behaviour, so one server provides
    several mirrors: ``/ok/<name>`` serves the file, ``/bad/<name>`` the file
    with one byte changed, ``/cut/<name>`` announces the full Content-Length,
    sends half of the bytes and closes the connection.

    Parameters
    ----------
    files : dict of str to bytes
        File name to content.
    """

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.requests: Counter[str] = Counter()  # "/mode/name" -> count
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def mirror(self, mode: str = "ok") -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/{mode}/"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        owner: FileServer = self.server.owner  # type: ignore[attr-defined]
        owner.requests[self.path] += 1
        _, mode, name = self.path.split("/", 2)
        body = owner.files.get(name)
        if body is None or mode not in ("ok", "bad", "cut"):
            self.send_error(404)
            return
        if mode == "bad":
            middle = len(body) // 2
            body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "cut":
            self.close_connection = True
            body = body[: len(body) // 2]
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
