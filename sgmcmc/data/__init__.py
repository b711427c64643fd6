"""Where rows come from: the user's arrays read where they are (:mod:`~sgmcmc.data.rows`),
minibatch indices as a function of (seed, chain, t) (:mod:`~sgmcmc.data.minibatch`), the
blocks of rows gathered ahead of the compiled loop (:mod:`~sgmcmc.data.pipeline`), or a
``tf.data`` pipeline's minibatches read into such blocks (:mod:`~sgmcmc.data.stream`)."""
