"""Progress lines: count, rate and ETA, at most one per interval, always the last."""

import logging

from esopt.runtime.progress import Progress, format_seconds


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_progress_reports_rate_and_eta_at_most_once_per_interval(caplog):
    clock = Clock()
    p = Progress(8, "gen 003 directions", "direction", min_interval_s=30, clock=clock)
    with caplog.at_level(logging.INFO, logger="esopt.progress"):
        clock.t += 4
        first = p.update()  # the first item is always reported
        clock.t += 4
        assert p.update() is None  # 8 s after the last report
        clock.t += 32
        line = p.update(2)  # 4 done in 40 s: 0.1/s, 4 left: 40 s
        clock.t += 20
        assert p.update(3) is None  # 20 s after the last report
        clock.t += 1
        last = p.update()  # the last item is always reported
    assert first == "gen 003 directions: 1/8 (12%), 0.25 direction/s, elapsed 4s, ETA 28s"
    assert line == "gen 003 directions: 4/8 (50%), 0.1 direction/s, elapsed 40s, ETA 40s"
    assert last.startswith("gen 003 directions: 8/8 (100%),") and last.endswith("ETA 0s")
    assert [r.getMessage() for r in caplog.records] == [first, line, last]
    assert all("\r" not in r.getMessage() for r in caplog.records)  # one plain line each


def test_seconds_read_as_a_person_would():
    assert [format_seconds(s) for s in (3.2, 185, 7260)] == ["3s", "3m05s", "2h01m"]
