"""The fast binary form of a parsed data set: an ``.npz`` next to the upstream files.

Each ``.npz`` stores a fingerprint (the MD5s of the upstream files and the
registry's format and expectations); it is used only while the fingerprint
still matches, so replacing an upstream file, or injecting a registry that
expects something else, invalidates it.
"""

import json
import os
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .fetch import LocalFile

_VERSION = 1  # bump when the arrays stored for a format change
_KEY = "fingerprint"


def fingerprint(entry: dict[str, Any], files: dict[str, LocalFile]) -> str:
    """What the parsed arrays depend on, as a canonical JSON string."""
    return json.dumps(
        {
            "version": _VERSION,
            "format": entry["format"],
            "expect": entry["expect"],
            "md5": {key: file.md5 for key, file in files.items()},
        },
        sort_keys=True,
    )


def load(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored in `path`, or None if it is missing, unreadable or stale.

    Parameters
    ----------
    path : Path
        The ``.npz`` file.
    key : str
        The fingerprint it must carry (see :func:`fingerprint`).
    """
    try:
        with np.load(path, allow_pickle=False) as npz:
            if str(npz[_KEY]) != key:
                return None
            return {name: npz[name] for name in npz.files if name != _KEY}
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile):
        # Missing, or damaged: it is ours, so it is simply rebuilt.
        return None


def save(path: Path, arrays: dict[str, np.ndarray], key: str) -> None:
    """Write `arrays` and the fingerprint `key` to `path` atomically.

    The data are written to a hidden temporary file in the same directory and
    renamed, so `path` is either absent or complete. If the directory is not
    writable a ``RuntimeWarning`` is issued and nothing else happens: the data
    are then parsed again at the next call.
    """
    tmp_name = None
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
            tmp_name = tmp.name
            np.savez(tmp, **{_KEY: np.array(key)}, **arrays)
        os.replace(tmp_name, path)
    except OSError as err:
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        warnings.warn(
            f"Could not write the parsed cache {path} ({err}); the data will be parsed again "
            "next time. Make the directory writable or set SGMCMC_DATA to one that is.",
            RuntimeWarning,
            stacklevel=3,
        )
