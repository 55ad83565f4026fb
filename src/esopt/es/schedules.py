"""Perturbation-scale (sigma) schedules over T generations, t = 0 .. T-1."""

from __future__ import annotations

import math
from dataclasses import dataclass

SCHEDULE_KINDS = ("constant", "cosine", "linear")


@dataclass(frozen=True)
class SigmaSchedule:
    """sigma_t for t in [0, T): `constant` (sigma_0), or `cosine`/`linear` from sigma_0 at
    t = 0 to exactly sigma_T at the last generation t = T - 1 (the paper's cosine decay)."""

    kind: str = "cosine"
    sigma_0: float = 1e-3
    sigma_T: float = 1e-3
    generations: int = 1

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULE_KINDS:
            raise ValueError(f"sigma.kind: unknown schedule {self.kind!r}; choose one of "
                             f"{list(SCHEDULE_KINDS)}")
        if not self.sigma_0 > 0:  # also rejects NaN
            raise ValueError(f"sigma.sigma_0 must be > 0, got {self.sigma_0}")
        if self.kind != "constant" and not self.sigma_T > 0:
            # A zero sigma at the last generation makes that update pure noise with no
            # signal (reward differences vanish); use a small floor instead.
            raise ValueError(f"sigma.sigma_T must be > 0, got {self.sigma_T}")
        if self.generations < 1:
            raise ValueError(f"sigma.generations must be >= 1, got {self.generations}")

    def __call__(self, t: int) -> float:
        """sigma at generation t."""
        if not 0 <= t < self.generations:
            raise ValueError(f"generation {t} outside the schedule [0, {self.generations})")
        if self.kind == "constant" or self.generations == 1:
            return float(self.sigma_0)
        if t == self.generations - 1:
            return float(self.sigma_T)  # exactly, not up to cos(pi) rounding
        frac = t / (self.generations - 1)
        if self.kind == "linear":
            return self.sigma_0 + (self.sigma_T - self.sigma_0) * frac
        return self.sigma_T + 0.5 * (self.sigma_0 - self.sigma_T) * (1.0 + math.cos(math.pi * frac))
