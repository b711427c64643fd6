"""sgmcmc: stochastic-gradient MCMC as compiled TensorFlow 2.

A Python port of the R package ``sgmcmc`` (Baker, Fearnhead, Fox & Nemeth 2018):
SGLD, SGHMC, SGNHT and their control-variate versions, with the R names in snake_case, and
pSGLD, HAMCMC, OSGLD, BAOAB, cyclical SGLD/SGHMC, SCIR and SGRLD;
several chains in one compiled loop, and the analysis of their output.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from ._quiet import import_tensorflow_quietly as _import_tensorflow_quietly

_import_tensorflow_quietly()  # before anything imports TensorFlow: see sgmcmc/_quiet.py

from .analysis import full_gradients, ksd, plot_trace, stein_thin, summary, to_inference_data, zv
from . import schedules
from .datasets import get_dataset
from .errors import (
    BurnInNotFound,
    CompilationWarning,
    DivergenceError,
    Interrupted,
    MixingWarning,
    ModeSearchError,
    NotInitialisedError,
    SamplingError,
    StepsizeError,
    StepsizeWarning,
)
from .run.sampler import Sampler
from .api.cyclical import csghmc, csghmc_setup, csgld, csgld_setup
from .api.control_variate import sghmccv, sghmccv_setup, sgldcv, sgldcv_setup, sgnhtcv, sgnhtcv_setup
from .api.gradient import (
    baoab,
    baoab_setup,
    hamcmc,
    hamcmc_setup,
    osgld,
    osgld_setup,
    psgld,
    psgld_setup,
    sghmc,
    sghmc_setup,
    sgld,
    sgld_setup,
    sgnht,
    sgnht_setup,
)
from .api.runs import sample_chain
from .step.estimators import SAGA, SVRG, ControlVariate, Plain
from .api.simplex import scir, scir_setup, sgrld, sgrld_setup
from .analysis.samples import Samples
from .api.session import Session, get_log_posterior, get_params, init_sess, sgmcmc_step
from .stability import StepsizeCheck, check_stepsize
from .tuning import tune_stepsize

__all__ = [
    "BurnInNotFound",
    "ControlVariate",
    "Plain",
    "SAGA",
    "SVRG",
    "baoab",
    "baoab_setup",
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
    "check_stepsize",
    "csghmc",
    "csghmc_setup",
    "csgld",
    "csgld_setup",
    "full_gradients",
    "get_dataset",
    "ksd",
    "osgld",
    "osgld_setup",
    "plot_trace",
    "psgld",
    "psgld_setup",
    "stein_thin",
    "summary",
    "to_inference_data",
    "tune_stepsize",
    "zv",
    "get_log_posterior",
    "get_params",
    "hamcmc",
    "hamcmc_setup",
    "init_sess",
    "sample_chain",
    "schedules",
    "scir",
    "scir_setup",
    "sgrld",
    "sgrld_setup",
    "sghmc",
    "sghmc_setup",
    "sghmccv",
    "sghmccv_setup",
    "sgld",
    "sgld_setup",
    "sgldcv",
    "sgldcv_setup",
    "sgmcmc_step",
    "sgnht",
    "sgnht_setup",
    "sgnhtcv",
    "sgnhtcv_setup",
]
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
