"""Parse speed of the covertype loader on a full-size synthetic LIBSVM file.

Writes a 581,012-row ``covtype.libsvm.binary.scale.bz2`` into a temporary
directory (data from ``synthetic_covertype``: about 12 non-zeros per row, values
with 6 decimal digits, labels 1/2, like the real file), then times:
  (a) bz2 decompression alone;
  (b) ``read_libsvm`` (decompression + parse + structure checks);
  (c) the first ``get_dataset("covertype")`` with that directory as the cache
      (MD5 + parse + writing the .npz);
  (d) a second ``get_dataset("covertype")`` (MD5 + loading the .npz).
Nothing touches the network: the registry's only mirror is a dead local port.

Usage: python benchmarks/bench_dataset_parse.py [--rows 581012]
"""

import argparse
import bz2
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgmcmc.datasets import get_dataset, synthetic_covertype  # noqa: E402
from sgmcmc.datasets.parse import read_libsvm  # noqa: E402

FILE_NAME = "covtype.libsvm.binary.scale.bz2"


def libsvm_text(data: np.ndarray) -> tuple[bytes, np.ndarray]:
    """LIBSVM text for `data` (label in column 0), and the array it parses to."""
    rounded = np.round(data.astype(np.float64), 6)
    columns = []
    for j in range(1, rounded.shape[1]):
        column = np.full(len(rounded), "", dtype=object)
        nonzero = rounded[:, j] != 0
        column[nonzero] = [f"{j}:{v:.6f}".rstrip("0").rstrip(".") for v in rounded[nonzero, j].tolist()]
        columns.append(column)
    labels = np.where(rounded[:, 0] == 1, "2", "1")
    lines = (" ".join(filter(None, parts)) for parts in zip(labels, *columns))
    expected = rounded.astype(np.float32)
    return ("\n".join(lines) + "\n").encode(), expected


class Timer:
    """Wall and CPU time of a block; CPU time is the steadier figure on a shared machine."""

    def __enter__(self) -> "Timer":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu

    def __str__(self) -> str:
        return f"{self.wall:6.2f} s wall ({self.cpu:5.2f} s CPU)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    args = parser.parse_args(argv)

    with Timer() as t_text:
        text, expected = libsvm_text(synthetic_covertype(args.rows, seed=0))
    with Timer() as t_compress:
        compressed = bz2.compress(text, 9)
    nnz = np.count_nonzero(expected[:, 1:]) / args.rows
    print(f"generated {args.rows:,} rows, {nnz:.1f} non-zeros/row: text {len(text) / 1e6:.1f} MB "
          f"({t_text.wall:.1f} s), bz2 {len(compressed) / 1e6:.1f} MB ({t_compress.wall:.1f} s)")

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / FILE_NAME
        path.write_bytes(compressed)
        os.environ["SGMCMC_DATA"] = directory
        registry = {
            "covertype": {
                "format": "libsvm",
                "mirrors": ["http://127.0.0.1:9/"],
                "files": {"data": {"name": FILE_NAME, "md5": None}},
                "expect": {"rows": args.rows, "features": 54, "labels": [1, 2]},
            }
        }
        with Timer() as t_decompress:
            bz2.decompress(compressed)
        with Timer() as t_parse:
            parsed = read_libsvm(path, n_rows=args.rows, n_features=54, labels=[1, 2])
        with Timer() as t_first:
            first = get_dataset("covertype", registry=registry)
        with Timer() as t_second:
            second = get_dataset("covertype", registry=registry)
        npz_mb = (Path(directory) / "covertype.npz").stat().st_size / 1e6

    assert np.array_equal(parsed, expected) and np.array_equal(first, expected)
    assert np.array_equal(second, expected)
    print(f"(a) bz2 decompression only:           {t_decompress}")
    print(f"(b) read_libsvm (decompress + parse): {t_parse}")
    print(f"(c) get_dataset, first call:          {t_first}, writes a {npz_mb:.0f} MB .npz")
    print(f"(d) get_dataset, cached call:         {t_second}")


if __name__ == "__main__":
    main()
