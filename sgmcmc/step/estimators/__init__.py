"""Gradient estimators: callables ``estimator(params, minibatch, rng, t) -> Estimate`` with one signature,
so every dynamics works with every estimator (SPEC §8). ``params`` carry the leading chain axis;
``rng`` is the chain's :class:`~sgmcmc.step.random.ChainRandom`; ``t`` the global iteration (for
estimators with a schedule of their own, e.g. SVRG's anchor refresh).

What users choose with ``estimator=`` is a spec (:mod:`sgmcmc.step.estimators.spec`); adding an
estimator is its module plus one line in :data:`ESTIMATORS`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .control_variate import ControlVariate, ControlVariateGradient
from .counts import CountsEstimate, MinibatchCounts
from .plain import FULL_GRADIENT_BATCH_ROWS, MinibatchGradient, Plain, value_and_grad
from .spec import EstimatorSpec
from .variance_reduced import SAGA, SVRG, SAGAGradient, SVRGGradient

#: Every estimator a sampler can use, by the name ``estimator=`` takes.
ESTIMATORS: dict[str, type[EstimatorSpec]] = {spec.name: spec for spec in (Plain, ControlVariate, SVRG, SAGA)}

#: The samplers' estimator keywords (SPEC §8) at their defaults, read from the specs' fields: a
#: keyword left here applies to no estimator in particular.
KEYWORD_DEFAULTS: dict[str, Any] = {
    keyword: {f.name: f.default for f in dataclasses.fields(spec)}[field]
    for spec in ESTIMATORS.values()
    for keyword, field in spec.keywords.items()
}


def resolve_estimator(estimator: str | EstimatorSpec, **keywords: Any) -> EstimatorSpec:
    """The spec that ``estimator`` (a name or a spec) and the samplers' estimator keywords
    (``opt_stepsize``, ``n_iters_opt``, ``svrg_period``, ``max_memory``) ask for.

    A spec object carries its own options (then the keywords must stay at their defaults).
    ``opt_stepsize`` with an estimator other than ``"cv"`` is refused (it would suggest a mode
    search that does not happen); the other keywords are ignored by the estimators they do not
    belong to (``svrg_period`` with ``"saga"``), as before the specs: harmless, and code that
    loops over estimators with one set of keywords keeps working.
    """
    changed = {k: v for k, v in keywords.items() if not _is_default(v, KEYWORD_DEFAULTS[k])}
    if isinstance(estimator, EstimatorSpec):
        if changed:
            raise ValueError(
                f"estimator={estimator!r} carries its own options; leave {', '.join(changed)} at the default "
                f"(or pass estimator={estimator.name!r} with the keywords)"
            )
        return estimator
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise ValueError(
            f"estimator must be one of {', '.join(map(repr, ESTIMATORS))}, got {estimator!r} (or a spec carrying "
            f"its options, such as sgmcmc.SVRG(period=50))"
        )
    spec = ESTIMATORS[estimator]
    if "opt_stepsize" in changed and "opt_stepsize" not in spec.keywords:
        raise ValueError(
            f"opt_stepsize is the stepsize of the control variate's mode search: it applies only with "
            f"estimator='cv', not {estimator!r}"
        )
    return spec(**{field: keywords[k] for k, field in spec.keywords.items() if k in keywords})


def _is_default(value: Any, default: Any) -> bool:
    try:
        return value is default or (default is not None and not isinstance(value, dict) and bool(value == default))
    except (TypeError, ValueError):
        return False


__all__ = [
    "ControlVariate", "ControlVariateGradient", "CountsEstimate", "ESTIMATORS", "EstimatorSpec", "MinibatchCounts",
    "FULL_GRADIENT_BATCH_ROWS", "MinibatchGradient", "Plain", "SAGA", "SAGAGradient", "SVRG", "SVRGGradient",
    "resolve_estimator", "value_and_grad",
]
