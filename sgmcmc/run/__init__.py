"""How a chain runs: the chain program (:mod:`~sgmcmc.run.program`: pure loops of the step over
an explicit ``ChainState``), the :class:`~sgmcmc.run.sampler.Sampler` (state in variables, the
one step, its compiled calls of the program), the chunk loops (:mod:`~sgmcmc.run.chain`), the
control variate's mode search (:mod:`~sgmcmc.run.mode_search`), checkpoints, and the output
(:mod:`~sgmcmc.analysis.samples`)."""
