"""Scale-out on ``tf.distribute`` (SPEC §12): a local launcher for multi-worker runs
(``python -m sgmcmc.distribute --workers W script.py``, see :mod:`sgmcmc.distribute.launcher`)."""
