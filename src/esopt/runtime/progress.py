"""A progress line for long loops: count, rate and ETA, written through `logging`.

One plain line per report (no carriage returns, no bar), so that a job's log file reads
well: `gen 003 directions: 5/8 (62%), 0.41 direction/s, elapsed 12s, ETA 7s`. Reports come
at the first item, then at most every `min_interval_s`, and always at the last item.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


def format_seconds(s: float) -> str:
    """12s, 3m05s, 2h01m."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class Progress:
    """Counts work done out of `total` and logs a line with the rate and the ETA."""

    def __init__(self, total: int, desc: str, unit: str = "it", *, min_interval_s: float = 30.0,
                 logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.unit = total, desc, unit
        self.min_interval_s, self.clock = min_interval_s, clock
        self.log = logger or logging.getLogger("esopt.progress")
        self.done = 0
        self.start = clock()
        self._last: float | None = None

    def line(self) -> str:
        elapsed = self.clock() - self.start
        rate = self.done / elapsed if elapsed > 0 else float("nan")
        pct = 100 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_s = format_seconds(eta) if eta == eta else "?"
        rate_s = f"{rate:.3g}" if rate == rate else "?"
        return (f"{self.desc}: {self.done}/{self.total} ({pct:.0f}%), {rate_s} {self.unit}/s, "
                f"elapsed {format_seconds(elapsed)}, ETA {eta_s}")

    def update(self, n: int = 1) -> str | None:
        """Count `n` more items; return the line if one was logged."""
        self.done += n
        now = self.clock()
        due = (self._last is None or now - self._last >= self.min_interval_s
               or self.done >= self.total)
        if not due:
            return None
        self._last = now
        text = self.line()
        self.log.info("%s", text)
        return text
