"""The output of a whole-chain sampler: :class:`Samples`, a dict of numpy arrays (SPEC §7).

Layout per parameter: ``(n_kept, *shape)`` for one chain, ``(n_chains, n_kept, *shape)`` for
several (ArviZ's chain, draw order), so R-style code such as ``out["beta"][500:].mean(0)``
keeps working on one chain. Gradients (when stored) and the unconstrained values share the
layout; the log-posterior estimates are ``(n_kept,)`` or ``(n_chains, n_kept)``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from . import arviz_io

Arrays = dict[str, np.ndarray]


def _as_arrays(values: Mapping[str, Any] | None) -> Arrays | None:
    if values is None:
        return None
    return {name: np.asarray(v) for name, v in values.items()}


class Samples(dict):
    """Samples of every parameter, name -> numpy array, plus what produced them.

    Parameters
    ----------
    draws
        Name -> array ``(n_kept, *shape)`` if ``n_chains == 1``, else ``(n_chains, n_kept, *shape)``.
    n_chains
        Number of chains (the leading axis when > 1).
    gradients
        Name -> the gradient estimate of the log posterior at every kept sample, same layout
        as ``draws`` (with respect to the unconstrained values), or None.
    log_posterior
        The (minibatch) log-posterior estimate at every kept sample, ``(n_kept,)`` or
        ``(n_chains, n_kept)``, or None.
    method, seed, settings
        The sampler's name, its seed and the settings it ran with.
    unconstrained
        Name -> unconstrained values, same layout as ``draws``; None means "same as draws"
        (no constraints). The analysis functions (ksd, zv, stein_thin, full_gradients) work
        on these, since gradients are taken there.
    burn_in_found
        An iteration an automatic burn-in detector found, if any (informational).
    cycle
        Integers ``(n_kept,)``: the cycle (0-based) each kept draw comes from, for samplers whose
        whole-chain run keeps draws by cycles (cyclical SG-MCMC: ``csgld``, ``csghmc``); None
        otherwise. The same for every chain.

    Notes
    -----
    A plain dict of arrays is accepted wherever a ``Samples`` is, as one chain with the draws
    on the leading axis (:func:`as_samples`).
    """

    def __init__(
        self,
        draws: dict[str, np.ndarray],
        *,
        n_chains: int = 1,
        gradients: dict | None = None,
        log_posterior: np.ndarray | None = None,
        method: str | None = None,
        seed: int | None = None,
        settings: dict | None = None,
        unconstrained: dict | None = None,
        burn_in_found: int | None = None,
        cycle: np.ndarray | None = None,
    ):
        super().__init__(_as_arrays(draws))
        if int(n_chains) < 1:
            raise ValueError(f"n_chains must be >= 1, got {n_chains}")
        self.n_chains = int(n_chains)
        self.gradients = _as_arrays(gradients)
        self.log_posterior = None if log_posterior is None else np.asarray(log_posterior)
        self.method = method
        self.seed = seed
        self.settings = dict(settings) if settings else {}
        self._unconstrained = _as_arrays(unconstrained)
        self.burn_in_found = burn_in_found
        self.cycle = None if cycle is None else np.asarray(cycle, dtype=np.int64)
        self._check_layout()

    def _lead(self) -> tuple[int, ...]:
        return () if self.n_chains == 1 else (self.n_chains,)

    def _check_layout(self) -> None:
        lead = self._lead()
        n_lead = len(lead) + 1
        expected = None
        for name, value in self.items():
            if value.ndim < n_lead or value.shape[: len(lead)] != lead:
                raise ValueError(
                    f"draws[{name!r}] has shape {value.shape}; expected a leading "
                    f"{'(n_kept,)' if self.n_chains == 1 else f'({self.n_chains}, n_kept)'} axis"
                )
            expected = value.shape[:n_lead] if expected is None else expected
            if value.shape[:n_lead] != expected:
                raise ValueError(f"draws[{name!r}] has {value.shape[:n_lead]} leading axes, others {expected}")
        for label, other in (("gradients", self.gradients), ("unconstrained", self._unconstrained)):
            if other is None:
                continue
            if set(other) != set(self):
                raise ValueError(f"{label} names {sorted(other)} differ from the draws' {sorted(self)}")
            for name, value in other.items():
                if value.shape[:n_lead] != self[name].shape[:n_lead]:
                    raise ValueError(f"{label}[{name!r}] has shape {value.shape}, draws {self[name].shape}")
        if self.log_posterior is not None and expected is not None and self.log_posterior.shape != expected:
            raise ValueError(f"log_posterior has shape {self.log_posterior.shape}, expected {expected}")
        if self.cycle is not None and self.cycle.shape != (self.n_kept,):
            raise ValueError(f"cycle has shape {self.cycle.shape}, expected ({self.n_kept},): one per kept draw")

    @property
    def unconstrained(self) -> Arrays:
        """Unconstrained values (the draws themselves when the run had no constraints)."""
        return dict(self) if self._unconstrained is None else self._unconstrained

    @unconstrained.setter
    def unconstrained(self, value: dict | None) -> None:
        self._unconstrained = _as_arrays(value)

    @property
    def n_kept(self) -> int:
        """Kept samples per chain."""
        if not self:
            return 0
        return int(next(iter(self.values())).shape[0 if self.n_chains == 1 else 1])

    def _select(self, what: str) -> Arrays:
        if what == "draws":
            return dict(self)
        if what == "gradients":
            if self.gradients is None:
                raise ValueError("no gradients stored: run the sampler with store_gradients=True")
            return self.gradients
        if what == "unconstrained":
            return self.unconstrained
        raise ValueError(f"what must be 'draws', 'gradients' or 'unconstrained', got {what!r}")

    def by_chain(self, what: str = "draws") -> Arrays:
        """Name -> array ``(n_chains, n_kept, *shape)`` (also for one chain).

        ``what`` is ``"draws"``, ``"gradients"`` or ``"unconstrained"``."""
        arrays = self._select(what)
        return arrays if self.n_chains > 1 else {k: v[np.newaxis] for k, v in arrays.items()}

    def pooled(self, what: str = "draws") -> Arrays:
        """Name -> array ``(n_chains * n_kept, *shape)``, chain after chain."""
        return {k: v.reshape((-1,) + v.shape[2:]) for k, v in self.by_chain(what).items()}

    def log_posterior_by_chain(self) -> np.ndarray | None:
        """The log-posterior estimates as ``(n_chains, n_kept)``, or None."""
        lp = self.log_posterior
        return None if lp is None else (lp if self.n_chains > 1 else lp[np.newaxis])

    def to_inference_data(self):
        """An ArviZ ``InferenceData``; see :func:`sgmcmc.analysis.to_inference_data`."""
        stats: dict[str, np.ndarray] = {}
        lp = self.log_posterior_by_chain()
        if lp is not None:
            stats["lp"] = lp
        if self.gradients is not None:
            stats.update({f"grad_{name}": g for name, g in self.by_chain("gradients").items()})
        return arviz_io.inference_data(self.by_chain(), stats)

    def summary(self):
        """:func:`sgmcmc.analysis.summary` of these samples."""
        return arviz_io.summary_table(self.by_chain())

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self.items())
        extras = []
        if self.gradients is not None:
            extras.append("gradients")
        if self.log_posterior is not None:
            extras.append("log_posterior")
        if self._unconstrained is not None:
            extras.append("unconstrained")
        if self.cycle is not None:
            extras.append(f"cycle (0-{self.cycle.max()})" if self.cycle.size else "cycle")
        return (
            f"Samples(method={self.method!r}, n_chains={self.n_chains}, n_kept={self.n_kept}, "
            f"{{{shapes}}}" + (f", with {'+'.join(extras)}" if extras else "") + ")"
        )

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items()}
        return (_rebuild, (dict(self), state))


def _rebuild(draws: Arrays, state: dict) -> Samples:
    out = Samples.__new__(Samples)
    dict.update(out, draws)
    out.__dict__.update({"cycle": None, **state})  # pickled before Samples had a cycle: None
    return out


def concatenate_draws(parts: Sequence[Samples], cycle: np.ndarray | None = None, **metadata) -> Samples:
    """Kept draws of runs of one chain after another (its segments) as one :class:`Samples`,
    joined on the draw axis; the first part's method, seed and settings unless ``metadata``
    gives others, and ``cycle`` (one per kept draw of the whole)."""
    first = parts[0]
    axis = 0 if first.n_chains == 1 else 1

    def join(get):
        arrays = [get(p) for p in parts]
        if arrays[0] is None:
            return None
        if isinstance(arrays[0], dict):
            return {name: np.concatenate([a[name] for a in arrays], axis=axis) for name in arrays[0]}
        return np.concatenate(arrays, axis=axis)

    fields = dict(
        n_chains=first.n_chains, gradients=join(lambda p: p.gradients), log_posterior=join(lambda p: p.log_posterior),
        method=first.method, seed=first.seed, settings=first.settings, unconstrained=join(lambda p: p._unconstrained),
        burn_in_found=first.burn_in_found, cycle=cycle,
    )
    fields.update(metadata)
    return Samples(join(dict), **fields)


def as_samples(samples: Mapping[str, Any], gradients: Mapping[str, Any] | None = None) -> Samples:
    """``samples`` as :class:`Samples`; a plain dict is one chain, draws on the leading axis.

    ``gradients``, when given, replaces the stored gradients (same layout as the samples).
    """
    if not isinstance(samples, Samples):
        samples = Samples(dict(samples))
    if gradients is not None:
        grads = _as_arrays(gradients)
        lead = samples.n_chains > 1
        for name in samples:
            if name not in grads:
                raise ValueError(f"gradients has no entry for parameter {name!r}")
            if grads[name].shape != samples.unconstrained[name].shape:
                raise ValueError(
                    f"gradients[{name!r}] has shape {grads[name].shape}, samples "
                    f"{samples.unconstrained[name].shape}" + (" (chains first)" if lead else "")
                )
        new = Samples.__new__(Samples)
        dict.update(new, samples)
        new.__dict__.update(samples.__dict__)
        new.gradients = {name: grads[name] for name in samples}
        samples = new
    return samples
