"""The cache directory, verification of the files in it, and downloads via pooch.

pooch re-downloads a cached file whose hash does not match, silently
overwriting it (and failing with a bare connection error when offline). So
files already in the cache are verified here first and pooch is only ever
asked for files that do not exist: a file the user placed is never
overwritten.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pooch
import requests

from .errors import DatasetCorruptError, DatasetUnavailableError

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a mirror to accept a connection: offline must fail fast."""
READ_TIMEOUT = 60.0
"""Seconds to wait for the next bytes of a download once connected."""


@dataclass(frozen=True)
class LocalFile:
    """An upstream file present in the cache directory.

    Attributes
    ----------
    path : Path
        Where it is.
    md5 : str
        Its MD5 (hex digest).
    downloaded_from : str or None
        The URL it was downloaded from by this call, None if it was already there.
    """

    path: Path
    md5: str
    downloaded_from: str | None = None


def cache_dir() -> Path:
    """The directory holding the upstream data files and their parsed ``.npz`` forms.

    ``$SGMCMC_DATA`` itself when that environment variable is set and not
    empty (read at every call), otherwise ``sgmcmc`` in the user's cache
    directory (``pooch.os_cache("sgmcmc")``, e.g. ``~/.cache/sgmcmc`` on
    Linux). The directory is created only when something is written to it.

    Returns
    -------
    Path
    """
    env = os.environ.get("SGMCMC_DATA")
    if env:
        return Path(env).expanduser()
    return Path(pooch.os_cache("sgmcmc"))


def md5sum(path: Path) -> str:
    """MD5 hex digest of a file."""
    digest = hashlib.md5(usedforsecurity=False)  # a checksum, so allowed on FIPS systems too
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _urls(entry: dict[str, Any], file_name: str) -> list[str]:
    return [mirror + file_name for mirror in entry["mirrors"]]


def reject(file: LocalFile, problem: str, entry: dict[str, Any]) -> DatasetCorruptError:
    """Build the error for a file that failed verification.

    A file this call downloaded is deleted (it is ours, and a broken file left
    behind would look complete); any other file is left untouched.

    Parameters
    ----------
    file : LocalFile
        The file that failed.
    problem : str
        What is wrong with it; its MD5 is added to the message here.
    entry : dict
        Its registry entry, for the URLs to suggest.

    Returns
    -------
    DatasetCorruptError
        To be raised by the caller.
    """
    urls = _urls(entry, file.path.name)
    if file.downloaded_from is None:
        return DatasetCorruptError(
            f"{file.path} is corrupt (md5 {file.md5}; {problem}): delete or replace it "
            f"(a deleted file is downloaded again; a replacement can come from {urls[0]})"
        )
    file.path.unlink(missing_ok=True)
    return DatasetCorruptError(
        f"{file.path} is corrupt (md5 {file.md5}; {problem}) as downloaded from "
        f"{file.downloaded_from}, so it has been deleted: try again later, or put a good "
        f"copy from one of {', '.join(urls)} into {file.path.parent}"
    )


def obtain(name: str, entry: dict[str, Any], directory: Path) -> dict[str, LocalFile]:
    """Verify the files of a data set present in `directory`, then download the missing ones.

    Present files with a published MD5 are checked before any network access.
    Missing files are fetched with pooch (atomic write, MD5 check where
    published, progress bar), trying the mirrors in order; a mirror that
    refuses or times out a connection is not tried again for the other files.

    Parameters
    ----------
    name : str
        The data set's name, for messages.
    entry : dict
        Its registry entry.
    directory : Path
        The cache directory.

    Returns
    -------
    dict of str to LocalFile
        One per key of ``entry["files"]``.

    Raises
    ------
    DatasetCorruptError
        If a present file's MD5 differs from the published one.
    DatasetUnavailableError
        If some missing file could not be downloaded from any mirror.
    """
    files = {}
    missing = {}
    for key, spec in entry["files"].items():
        path = directory / spec["name"]
        if not path.exists():
            missing[key] = spec
            continue
        file = LocalFile(path, md5sum(path))
        if spec["md5"] is not None and file.md5 != spec["md5"]:
            raise reject(file, f"expected {spec['md5']}", entry)
        files[key] = file

    dead: set[str] = set()
    errors: list[str] = []
    for key, spec in missing.items():
        file = _download(spec, entry["mirrors"], directory, dead, errors)
        if file is not None:
            files[key] = file
    if len(files) < len(entry["files"]):
        not_obtained = [spec for key, spec in entry["files"].items() if key not in files]
        raise DatasetUnavailableError(_unavailable_message(name, entry, not_obtained, directory, errors))
    return files


def _download(
    spec: dict[str, Any], mirrors: list[str], directory: Path, dead: set[str], errors: list[str]
) -> LocalFile | None:
    """Download one file, trying the live mirrors in order; record failures in `errors`."""
    downloader = pooch.HTTPDownloader(progressbar=True, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    known_hash = None if spec["md5"] is None else f"md5:{spec['md5']}"
    for mirror in mirrors:
        if mirror in dead:
            continue
        url = mirror + spec["name"]
        try:
            path = Path(
                pooch.retrieve(url, known_hash, fname=spec["name"], path=directory, downloader=downloader)
            )
        except requests.ConnectionError as err:  # includes ConnectTimeout
            dead.add(mirror)
            errors.append(f"{url}: {err}")
        except (OSError, ValueError) as err:  # HTTP errors, cut transfers, MD5 mismatch
            errors.append(f"{url}: {err}")
        else:
            if spec["md5"] is not None:
                return LocalFile(path, spec["md5"], url)
            md5 = md5sum(path)
            pooch.get_logger().info(
                "MD5 of %s: %s (no published checksum; its structure is verified instead).", path.name, md5
            )
            return LocalFile(path, md5, url)
    return None


def _unavailable_message(
    name: str, entry: dict[str, Any], specs: list[dict[str, Any]], directory: Path, errors: list[str]
) -> str:
    lines = [
        f"Data set {name!r} is not available: {len(specs)} file(s) are missing from the cache "
        f"directory {directory} and could not be downloaded (offline?).",
        f"Put these files, unchanged and under exactly these names, into {directory} "
        "(or set SGMCMC_DATA to a directory that holds them):",
    ]
    for spec in specs:
        checksum = "" if spec["md5"] is None else f" (md5 {spec['md5']})"
        lines.append(f"  {spec['name']}{checksum}, from any of:")
        lines.extend(f"      {url}" for url in _urls(entry, spec["name"]))
    if errors:
        lines.append("Download errors:")
        lines.extend(f"  {error}" for error in errors)
    return "\n".join(lines)
