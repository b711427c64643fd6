"""The step-by-step API (R's ``initSess`` / ``sgmcmcStep`` / ``getParams``).

TensorFlow 2 has no sessions; :class:`Session` keeps the name and role for R users: it is
the handle ``init_sess`` returns, proof that the sampler was prepared.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..run.chain import before_sampling
from ..run.mode_search import find_mode_and_anchor
from ..run.sampler import Sampler
from ..stability.check import check_before_sampling


@dataclass(frozen=True)
class Session:
    """Handle returned by :func:`init_sess`; pass it to :func:`sgmcmc_step` and :func:`get_params`."""

    sampler: Sampler


def init_sess(sampler: Sampler, verbose: bool | None = None) -> Session:
    """Prepare ``sampler`` to run: reset it to its starting values and seed, and for the
    control-variate samplers run the mode search and the full-data gradient, leaving the chains
    at the mode (or at their own starts when a list was given). Then the stepsize is checked
    against the curvature where sampling starts (unless ``check_stepsize=False`` was given):
    :class:`~sgmcmc.StepsizeError` when unstable, :class:`~sgmcmc.StepsizeWarning` when it
    distorts the sd by more than 10 % (:mod:`sgmcmc.stability.check`). ``verbose`` governs the mode
    search's progress; None takes the ``verbose`` given to the CV ``*_setup`` (R). Calling it
    again restarts the chain."""
    if not isinstance(sampler, Sampler):
        raise TypeError(f"init_sess needs a sampler made by a *_setup function, got {type(sampler).__name__}")
    sampler.initialised = False
    sampler.reset()
    if sampler.control_variate is not None:  # checks the stepsize at the mode it finds
        find_mode_and_anchor(sampler, sampler.control_variate.verbose if verbose is None else bool(verbose))
    else:  # its Hessian-vector products all-reduce when rows are sharded: a dead peer is a SamplingError
        before_sampling(check_before_sampling)(sampler)
    sampler.init_aux()
    sampler.initialised = True
    return Session(sampler)


def _check(sampler: Sampler, sess: Session) -> None:
    if not isinstance(sampler, Sampler):
        raise TypeError(f"expected a sampler made by a *_setup function, got {type(sampler).__name__}")
    sampler.require_initialised()
    if not isinstance(sess, Session) or sess.sampler is not sampler:
        raise ValueError("sess does not belong to this sampler: pass the handle init_sess(sampler) returned")


def sgmcmc_step(sampler: Sampler, sess: Session) -> None:
    """One iteration of the chain (for SGHMC: one iteration of ``L`` inner steps), as one
    compiled call. Raises :class:`~sgmcmc.DivergenceError` if the state becomes NaN/Inf."""
    _check(sampler, sess)
    sampler.step()


def get_params(sampler: Sampler, sess: Session) -> dict[str, np.ndarray]:
    """The current state: name -> numpy array of the parameter's shape (with a leading chain
    axis when ``n_chains > 1``)."""
    _check(sampler, sess)
    return sampler.get_params()


def get_log_posterior(sampler: Sampler, sess: Session):
    """The minibatch log-posterior estimate of the last step, at the state that step started
    from (a float; an array ``(n_chains,)`` for several chains)."""
    _check(sampler, sess)
    return sampler.log_posterior
