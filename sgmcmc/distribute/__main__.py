"""``python -m sgmcmc.distribute --workers W script.py [args]``: the local launcher
(:mod:`sgmcmc.distribute.launcher`).

The launcher itself imports only the standard library, but ``python -m sgmcmc.distribute``
makes Python import the package ``sgmcmc`` first, whose ``__init__`` imports TensorFlow.
Measured here (TF 2.21, 2 cores, CPU only): that costs the launcher process about 3.3-4 s
(2.6 s of it in imports, by ``python -X importtime -m sgmcmc.distribute --help``) and 700 MB
of memory before it starts the workers, against about 0.03 s and 16 MB for the launcher
alone. It is paid once, in the launcher, not per worker. To avoid it, run the file directly:
``python path/to/sgmcmc/distribute/launcher.py --workers W script.py`` (same options).
"""

import sys

from .launcher import main

if __name__ == "__main__":
    sys.exit(main())
