"""Small helpers shared by the vignettes: command line, output folder, plots, distances.

Nothing here is needed to use ``sgmcmc``; it only keeps the vignettes short.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import sgmcmc  # noqa: F401, E402 -- first: it imports TensorFlow without its start-up lines (sgmcmc/_quiet.py)
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# Several samplers in one process each compile their own functions; TensorFlow warns about
# "retracing" then, which is expected here.
tf.get_logger().setLevel("ERROR")

#: Exit status of a full run whose data set cannot be had (offline, no cache).
EXIT_NO_DATA = 2


def parse_args(
    name: str,
    description: str,
    argv: list[str] | None,
    extra: Callable[[argparse.ArgumentParser], object] | None = None,
) -> argparse.Namespace:
    """Parse ``--quick`` and ``--out DIR`` (default ``out/vignettes/<name>``).

    Parameters
    ----------
    name : str
        The vignette's name, used for the default output folder.
    description : str
        Shown by ``--help``.
    argv : list of str or None
        The arguments; None reads ``sys.argv``.
    extra : callable, optional
        ``extra(parser)`` adds the vignette's own options.
    """
    parser = argparse.ArgumentParser(prog=f"{name}.py", description=description)
    parser.add_argument("--quick", action="store_true", help="a small version that runs in seconds")
    parser.add_argument("--out", type=Path, default=Path("out") / "vignettes" / name, help="folder for the figures")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


def load_dataset_or_exit(name: str):
    """``sgmcmc.datasets.get_dataset(name)``, or a clear message and exit status 2 if the data
    cannot be had (offline and not in the cache)."""
    from sgmcmc.datasets import DatasetUnavailableError, get_dataset

    try:
        return get_dataset(name)
    except DatasetUnavailableError as error:
        print(
            f"\nThe {name} data set is not available, so the full vignette cannot run:\n{error}\n\n"
            "Run with --quick for the small version on generated data.",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_NO_DATA) from error


@contextmanager
def timed(what: str) -> Iterator[None]:
    """Print how long the block took."""
    start = time.perf_counter()
    yield
    print(f"  [{what}: {time.perf_counter() - start:.1f} s]")


def savefig(fig: plt.Figure, path: Path) -> Path:
    """Save ``fig`` as a PNG (creating its folder), close it and say where it went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {path}")
    return path


def kde_grid(
    xy: np.ndarray, lims: tuple[float, float, float, float], size: int = 100, max_points: int = 2000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 2-d Gaussian kernel density estimate (Scott's bandwidth) of the rows of ``xy`` on a grid.

    Returns the grid's ``x``, ``y`` (each ``size`` × ``size``) and the density there. At most
    ``max_points`` evenly spaced rows are used, which keeps it fast for long chains.
    """
    xy = np.asarray(xy, dtype=np.float64)
    xy = xy[:: max(1, len(xy) // max_points)]
    x, y = np.meshgrid(np.linspace(lims[0], lims[1], size), np.linspace(lims[2], lims[3], size))
    cov = np.cov(xy.T) * len(xy) ** (-2 / 6)  # Scott's factor n^(-1/(d+4)), squared, d = 2
    whiten = np.linalg.cholesky(np.linalg.inv(cov))  # Mahalanobis distance = Euclidean after this
    g = np.column_stack([x.ravel(), y.ravel()]) @ whiten
    p = xy @ whiten
    quad = np.maximum((g * g).sum(1)[:, None] + (p * p).sum(1)[None, :] - 2 * g @ p.T, 0.0)
    dens = np.exp(-0.5 * quad).sum(1) / (len(xy) * 2 * np.pi * np.sqrt(np.linalg.det(cov)))
    return x, y, dens.reshape(x.shape)


def density_contours(
    ax: plt.Axes, xy: np.ndarray, lims: tuple[float, float, float, float], filled: bool = True,
    size: int = 100, max_points: int = 2000, **kwargs
) -> None:
    """Draw the kernel density estimate of the 2-d points ``xy`` on ``ax``: filled bands, or
    lines. The lowest band is left empty so the background stays white. ``size`` and
    ``max_points``: those of :func:`kde_grid` (smaller in the ``--quick`` runs: a coarser figure)."""
    x, y, dens = kde_grid(xy, lims, size=size, max_points=max_points)
    levels = np.linspace(0, dens.max(), 9)[1:]
    (ax.contourf if filled else ax.contour)(x, y, dens, levels=levels, **kwargs)


def limits(*samples: np.ndarray, pad: float = 0.15) -> tuple[float, float, float, float]:
    """Axis limits (x0, x1, y0, y1) covering the 0.5%–99.5% range of every 2-d sample set."""
    xy = np.concatenate([np.asarray(s).reshape(-1, 2) for s in samples])
    lo, hi = np.percentile(xy, [0.5, 99.5], axis=0)
    span = hi - lo
    lo, hi = lo - pad * span, hi + pad * span
    return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])


def mmd(x: np.ndarray, y: np.ndarray, max_points: int = 2000, seed: int = 0) -> float:
    """Maximum mean discrepancy between two samples (rows), unbiased MMD² with a Gaussian kernel.

    The bandwidth is the median distance in the pooled sample. 0 means the two samples look
    alike to the kernel; it grows as they differ. Long samples are subsampled to ``max_points``.
    """
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    x = x[rng.choice(len(x), min(len(x), max_points), replace=False)]
    y = y[rng.choice(len(y), min(len(y), max_points), replace=False)]

    def sqdist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0)

    pooled = np.concatenate([x, y])
    h2 = np.median(sqdist(pooled, pooled))
    kxx, kyy, kxy = (np.exp(-sqdist(a, b) / h2) for a, b in ((x, x), (y, y), (x, y)))
    m, n = len(x), len(y)
    stat = (kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (n * (n - 1)) - 2 * kxy.mean()
    return float(stat)
