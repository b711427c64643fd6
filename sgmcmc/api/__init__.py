"""What a user calls: the samplers by family, the step-by-step session, the options behind them.

- :mod:`~sgmcmc.api.gradient`, :mod:`~sgmcmc.api.control_variate`, :mod:`~sgmcmc.api.simplex`:
  the public samplers (a ``*_setup`` and a whole-chain function each);
- :mod:`~sgmcmc.api.runs`: whole-chain runs (``sample_chain``, checkpoints, auto burn-in);
- :mod:`~sgmcmc.api.build`: the checks and the :class:`~sgmcmc.run.sampler.Sampler` they make;
- :mod:`~sgmcmc.step.methods`: the table of samplers; :mod:`~sgmcmc.api.options`: the typed
  option groups; :mod:`~sgmcmc.api.docs`: the parameter documentation they share.
"""
