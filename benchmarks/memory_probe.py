"""Resident memory of this process, as the benchmarks measure it (anonymous, not page cache)."""

from __future__ import annotations

import threading
import time
from typing import Callable


def rss_bytes(kind: str = "RssAnon") -> int:
    """``kind`` (``RssAnon``, ``RssFile``, …) of /proc/self/status, in bytes (0 if absent)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(kind + ":"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_anon(fn: Callable[[], object], every: float) -> tuple[float, int, int]:
    """Run ``fn()`` while a thread samples RssAnon every ``every`` seconds; returns (seconds,
    RssAnon before, the peak seen during the call), bytes."""
    before = rss_bytes()
    peak, stop = [before], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        seconds = time.perf_counter() - t0
        stop.set()
        thread.join()
    return seconds, before, peak[0]
