"""sgmcmc: stochastic-gradient MCMC as compiled TensorFlow 2.

A Python port of the R package ``sgmcmc`` (Baker, Fearnhead, Fox & Nemeth 2018):
SGLD, SGHMC, SGNHT and their control-variate versions, with the R names in snake_case, and
pSGLD, HAMCMC, OSGLD, BAOAB, cyclical SGLD/SGHMC, SCIR and SGRLD;
several chains in one compiled loop, and the analysis of their output.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from ._quiet import import_tensorflow_quietly as _import_tensorflow_quietly
from ._xla_flags import set_package_flags as _set_xla_flags

_set_xla_flags()  # before the first XLA compilation: see sgmcmc/_xla_flags.py
_import_tensorflow_quietly()  # before anything imports TensorFlow: see sgmcmc/_quiet.py

from .analysis import full_gradients, ksd, plot_trace, stein_thin, summary, to_inference_data, zv
from . import schedules
from .datasets import get_dataset
from .errors import (
    BurnInNotFound,
    CompilationWarning,
    ConvergenceWarning,
    DivergenceError,
    ImproperPosteriorError,
    Interrupted,
    MixingWarning,
    ModeSearchError,
    NotInitialisedError,
    SamplingError,
    StepsizeError,
    StepsizeWarning,
)
from .run.sampler import Sampler
from .api import samplers as _samplers
from .api.samplers import *  # noqa: F403 -- the public pair of every row of the method table
from .api.runs import sample_chain
from .api.reuse import clear_compiled_cache
from .step.estimators import SAGA, SVRG, ControlVariate, Plain
from .analysis.samples import Samples
from .api.session import Session, get_log_posterior, get_params, init_sess, sgmcmc_step
from .stability import StepsizeCheck, check_stepsize
from .tuning import tune_stepsize
from .auto import sample

__all__ = [
    "BurnInNotFound",
    "ControlVariate",
    "Plain",
    "SAGA",
    "SVRG",
    "DivergenceError",
    "Interrupted",
    "NotInitialisedError",
    "Sampler",
    "SamplingError",
    "Samples",
    "Session",
    "StepsizeCheck",
    "StepsizeWarning",
    "StepsizeError",
    "ModeSearchError",
    "MixingWarning",
    "CompilationWarning",
    "ConvergenceWarning",
    "ImproperPosteriorError",
    "check_stepsize",
    "clear_compiled_cache",
    "full_gradients",
    "get_dataset",
    "ksd",
    "plot_trace",
    "stein_thin",
    "summary",
    "to_inference_data",
    "tune_stepsize",
    "zv",
    "get_log_posterior",
    "get_params",
    "init_sess",
    "sample",
    "sample_chain",
    "schedules",
    "sgmcmc_step",
]
__all__ += _samplers.__all__
try:
    __version__ = _version("sgmcmc")  # one source: pyproject.toml
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str):
    """``sgmcmc.keras`` (Keras models as Bayesian neural networks) is imported on first use, so
    ``import sgmcmc`` does not pay for it."""
    if name == "keras":
        from importlib import import_module

        return import_module(".keras", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
