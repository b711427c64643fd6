"""Exceptions raised by :func:`sgmcmc.datasets.get_dataset`."""

from pathlib import Path


class DatasetUnavailableError(RuntimeError, OSError):
    """A data file is neither in the cache directory nor downloadable.

    Raised when a machine is offline (or every mirror fails) and the cache
    does not hold the file. The message names each missing file, the
    directory to put it in and the URLs it can be fetched from. It is both a
    ``RuntimeError`` and an ``OSError``, so ``except OSError`` (the usual
    guard around I/O and network code) catches it too.
    """


class DatasetCorruptError(ValueError):
    """A data file exists but fails verification (checksum or structure).

    The message names the file, what is wrong with it (including its MD5) and
    what to do: delete it so that it is downloaded again, or replace it.
    """


class ParseError(ValueError):
    """A file does not have the structure its format and the registry require.

    Internal: :func:`~sgmcmc.datasets.get_dataset` turns it into a
    :class:`DatasetCorruptError` that also says how to fix the file.

    Parameters
    ----------
    path : Path
        The offending file.
    problem : str
        What is wrong, e.g. ``"581011 rows, expected 581012"``.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
