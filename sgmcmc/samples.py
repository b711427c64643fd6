"""Placeholder for the Samples class (being written on the analysis branch)."""

from __future__ import annotations

import numpy as np


class Samples(dict):
    def __init__(self, draws, *, n_chains=1, gradients=None, log_posterior=None, method=None, seed=None,
                 settings=None, unconstrained=None, burn_in_found=None):
        super().__init__(draws)
        self.n_chains = n_chains
        self.gradients = gradients
        self.log_posterior = log_posterior
        self.method = method
        self.seed = seed
        self.settings = dict(settings or {})
        self.unconstrained = unconstrained
        self.burn_in_found = burn_in_found
