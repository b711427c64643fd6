"""Many devices and many machines through ``tf.distribute`` (SPEC §12).

Every sampler takes ``strategy=`` and ``shard_rows=``: :mod:`.placement` decides who computes
what (chains across replicas, or rows across workers), :mod:`.collective` sums and gathers over
the workers, :mod:`.replicas` runs a whole chain whose chains are split across replicas,
:mod:`.checkpoints` makes ``checkpoint_dir`` work under either placement, and
:mod:`.launcher` starts W local workers (``python -m sgmcmc.distribute --workers W script.py``).
"""
