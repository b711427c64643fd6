"""The table of public samplers: each name, its dynamics, its default estimator, its model.

This is the one place a sampler's name meets its kernel. What a method needs elsewhere
(arguments and their checks, gradient evaluations per iteration, XLA, estimators it takes,
whether rows can be sharded) is read from its dynamics class (:class:`sgmcmc.step.dynamics.base.Dynamics`).
Adding a sampler is a kernel and one row here (with its import); its public pair is generated
from the row (``python -m sgmcmc.api.generate``; docs/DESIGN.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamics.base import Dynamics, KernelContext
from .dynamics.baoab import BAOAB
from .dynamics.cir import SCIR, SGRLD
from .dynamics.cyclical import CSGHMC, CSGLD
from .dynamics.hamcmc import HAMCMC
from .dynamics.osgld import OSGLD
from .dynamics.psgld import PSGLD
from .dynamics.sghmc import SGHMC
from .dynamics.sgld import SGLD
from .dynamics.sgnht import SGNHT


@dataclass(frozen=True)
class Method:
    """A public sampler.

    Attributes
    ----------
    name
        The public name (``sgld``; ``sgld_setup`` is its step-by-step set-up).
    dynamics
        The kernel class.
    control_variate
        The R package's ``*cv`` samplers: the control-variate estimator by default, with
        ``opt_stepsize`` and ``n_iters_opt`` as arguments of their own.
    model
        ``"log_lik"``: the user gives ``log_lik``/``log_prior``; ``"counts"``: ``counts`` and a
        Dirichlet ``alpha`` (simplex samplers, SPEC §9).
    supports_constraints
        False where the parameters already live on their support (``constraints`` refused).
    """

    name: str
    dynamics: type[Dynamics]
    control_variate: bool = False
    model: str = "log_lik"
    supports_constraints: bool = True

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        return self.dynamics.hyperparameters

    def make_kernel(self, arguments: dict[str, Any], context: KernelContext) -> Dynamics:
        """The kernel from the public function's own arguments, checked by the dynamics (which
        also refuses an estimator outside :attr:`Dynamics.estimators`, saying why)."""
        return self.dynamics.from_arguments(arguments, context)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("sgld", SGLD),
        Method("sghmc", SGHMC),
        Method("sgnht", SGNHT),
        Method("sgldcv", SGLD, control_variate=True),
        Method("sghmccv", SGHMC, control_variate=True),
        Method("sgnhtcv", SGNHT, control_variate=True),
        Method("psgld", PSGLD),
        Method("hamcmc", HAMCMC),
        Method("osgld", OSGLD),
        Method("baoab", BAOAB),
        Method("csgld", CSGLD),
        Method("csghmc", CSGHMC),
        Method("scir", SCIR, model="counts", supports_constraints=False),
        Method("sgrld", SGRLD, model="counts", supports_constraints=False),
    )
}
