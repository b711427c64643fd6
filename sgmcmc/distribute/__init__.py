"""Many devices and many machines through ``tf.distribute`` (SPEC §12).

Every sampler takes ``strategy=`` and ``shard_rows=``: :mod:`.placement` decides who computes
what (chains across replicas, or rows across workers), :mod:`.collective` sums and gathers over
the workers, and :mod:`.launcher` starts W local workers (``python -m sgmcmc.distribute --workers W script.py``).
These are the low-level pieces (they import nothing of the package above ``errors``); the runs
that use them are in :mod:`sgmcmc.run` (:mod:`~sgmcmc.run.replicas`: chains split across
replicas; :mod:`~sgmcmc.run.distributed_checkpoints`: ``checkpoint_dir`` under either placement).
"""
