"""Example data sets for sgmcmc.

``get_dataset("covertype")`` and ``get_dataset("mnist")`` download the public
upstream files once into :func:`cache_dir` (``$SGMCMC_DATA`` when set),
verify them, parse them and cache the result; see ``docs/DATASETS.md``.
``gaussian_mixture_data`` and ``synthetic_covertype`` generate data offline.
"""

from .dataset import get_dataset
from .errors import DatasetCorruptError, DatasetUnavailableError
from .fetch import cache_dir
from .synthetic import gaussian_mixture_data, synthetic_covertype

__all__ = [
    "DatasetCorruptError",
    "DatasetUnavailableError",
    "cache_dir",
    "gaussian_mixture_data",
    "get_dataset",
    "synthetic_covertype",
]
