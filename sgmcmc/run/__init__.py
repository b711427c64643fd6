"""How a chain runs: the :class:`~sgmcmc.run.sampler.Sampler` (state in variables, the one
compiled step and loops), the chunk loops (:mod:`~sgmcmc.run.chain`), the control variate's mode
search (:mod:`~sgmcmc.run.mode_search`), checkpoints, and the output (:mod:`~sgmcmc.analysis.samples`)."""
