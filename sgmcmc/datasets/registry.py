"""The registry of downloadable data sets, kept as data in ``registry.json``.

Each entry has ``format`` ("libsvm" or "idx"), ``mirrors`` (base URLs, tried in
order, each followed by a file name), ``files`` (key -> ``{"name", "md5"}``,
``md5`` null where no checksum is published) and ``expect`` (the shapes the
parser must find), plus ``description``, ``homepage`` and ``licence``.
"""

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any


def load_registry() -> dict[str, Any]:
    """The registry shipped with the package, as a fresh dict."""
    text = resources.files(__package__).joinpath("registry.json").read_text(encoding="utf-8")
    return json.loads(text)


def lookup(name: str, registry: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The registry entry for `name`.

    Parameters
    ----------
    name : str
        A data set name.
    registry : mapping, optional
        The registry to look in; the shipped one by default.

    Raises
    ------
    ValueError
        If `name` is not in the registry; the message lists the names that are.
    """
    registry = load_registry() if registry is None else registry
    if name not in registry:
        raise ValueError(f"Unknown data set {name!r}: available are {', '.join(map(repr, sorted(registry)))}.")
    return registry[name]
