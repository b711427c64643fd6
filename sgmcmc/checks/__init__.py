"""Validation of what users pass, one rule per concept, before anything is compiled
(:mod:`~sgmcmc.checks.inputs`: arguments, datasets, the model's trial evaluation, storage)."""
