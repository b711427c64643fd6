"""What a step does: the dynamics (:mod:`~sgmcmc.step.dynamics`, one kernel per method), the
gradient estimators (:mod:`~sgmcmc.step.estimators`), the contract between them
(:mod:`~sgmcmc.step.contract`) and the draws inside an iteration (:mod:`~sgmcmc.step.random`)."""
