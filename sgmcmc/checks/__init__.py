"""Validation of what users pass, one module per concept, before anything is compiled; every
check raises with a message that names the problem and the fix (SPEC §4).

- :mod:`~sgmcmc.checks.arguments`: dtype, starting values, numbers and counts, per-parameter
  values, the one stepsize rule, the minibatch size;
- :mod:`~sgmcmc.checks.data`: datasets (entries kept where they are; how they are read is
  :mod:`sgmcmc.data.rows`), and ``tf.data`` pipelines of minibatches (:mod:`sgmcmc.data.stream`);
- :mod:`~sgmcmc.checks.model`: the trial evaluation of ``log_lik``/``log_prior``;
- :mod:`~sgmcmc.checks.storage`: will the kept samples fit;
- :mod:`~sgmcmc.checks.simplex`: the simplex samplers' starts, prior and ``counts``.

Callers use the package (``checks.check_dataset(...)``).
"""

from .arguments import (
    as_dtype,
    batch_size,
    check_count,
    check_nonnegative,
    check_params,
    check_positive,
    per_parameter,
)
from ..data.rows import as_tensor
from .data import BATCH_STREAM_SAMPLERS, check_batch_stream, check_dataset
from .model import ADDITIVITY_RTOL, TRIAL_ROWS, additivity_gaps, trial_evaluation
from .simplex import check_alpha, check_simplex_params, trial_counts
from .storage import available_memory, check_storage

__all__ = [
    "ADDITIVITY_RTOL", "BATCH_STREAM_SAMPLERS", "TRIAL_ROWS", "additivity_gaps", "as_dtype", "as_tensor", "available_memory",
    "batch_size", "check_alpha", "check_batch_stream", "check_count", "check_dataset", "check_nonnegative", "check_params",
    "check_positive", "check_simplex_params", "check_storage", "per_parameter", "trial_counts", "trial_evaluation",
]
