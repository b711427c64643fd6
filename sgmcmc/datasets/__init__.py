"""Example data sets for sgmcmc.

``get_dataset("covertype")`` and ``get_dataset("mnist")`` download the public
upstream files once into :func:`cache_dir` (``$SGMCMC_DATA`` when set),
verify them, parse them and cache the result; see ``docs/DATASETS.md``.
``gaussian_mixture_data`` and ``synthetic_covertype`` generate data offline.
``write_npy`` converts a DataFrame, Parquet, CSV or dict of arrays into a directory of ``.npy``
files in bounded memory, and ``open_npy`` opens one as memmaps for any sampler (SPEC §11).
"""

from .dataset import get_dataset
from .errors import DatasetCorruptError, DatasetUnavailableError
from .fetch import cache_dir
from .npy import open_npy, write_npy
from .synthetic import gaussian_mixture_data, synthetic_covertype

__all__ = [
    "DatasetCorruptError",
    "DatasetUnavailableError",
    "cache_dir",
    "gaussian_mixture_data",
    "get_dataset",
    "open_npy",
    "synthetic_covertype",
    "write_npy",
]
