"""Per-generation ES diagnostics from a generation's directions: how many directions tie on
fitness, what the reward is made of, and how different the directions' outputs are.

The update's own diagnostics (the realised update, the weights the served precision left
unchanged) are measured where the update is applied (esopt.es.apply.UpdateStats); these
are computed from the directions' episodes and fitness, so that the ledger (one row per
generation) can carry all of them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from esopt.envs.base import REWARD_COMPONENTS


def tied_fraction(fitness: Sequence[float]) -> float:
    """The largest group of directions tied on one fitness value, as a fraction of the
    directions with a finite fitness: 1 when every direction scored the same (a
    zero-signal generation), 1/G when all differ; NaN without a finite value. (Counting
    every direction that ties with some other would saturate at 1 whenever rewards are
    discrete, e.g. 4 boards per direction give 5 possible values for 8 directions.)"""
    values = [float(f) for f in fitness if math.isfinite(f)]
    if not values:
        return math.nan
    return max(Counter(values).values()) / len(values)


def episode_components(turn_infos: Iterable[Mapping]) -> dict[str, float]:
    """An episode's reward parts: each turn's `reward_components`, summed over its turns
    ({} when the environment exposes none)."""
    out: dict[str, float] = {}
    for info in turn_infos:
        for name, value in (info.get(REWARD_COMPONENTS) or {}).items():
            out[name] = out.get(name, 0.0) + float(value)
    return out


def mean_components(per_episode: Sequence[Mapping[str, float]],
                    weights: Sequence[float] | None = None) -> dict[str, float]:
    """The (weighted) mean of each reward part over episodes (or directions); a part an
    item lacks counts as 0 there; {} when none has any part."""
    names = sorted({n for c in per_episode for n in c})
    if not names:
        return {}
    w = [1.0] * len(per_episode) if weights is None else [float(x) for x in weights]
    total = sum(w)
    return {n: sum(wi * float(c.get(n, 0.0)) for wi, c in zip(w, per_episode, strict=True))
            / total for n in names}


def trajectory_digest(completions: Sequence[str]) -> str:
    """A short hash of an episode's completions in turn order: two episodes with the same
    digest wrote the same text."""
    h = hashlib.blake2b(digest_size=8, person=b"esopt-trajectory")
    for text in completions:
        data = text.encode()
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def distinct_completions(digests: Sequence[Sequence[str]]) -> float:
    """Output diversity across directions: per task (digests[i][j] is direction i's episode
    on task j, every direction on the same tasks), the number of distinct trajectories the
    directions wrote over the number of directions, averaged over the tasks: 1/G when
    every direction wrote the same text, 1 when all differ; NaN without episodes."""
    rows = [list(d) for d in digests if d]
    if not rows:
        return math.nan
    tasks = min(len(r) for r in rows)
    if tasks == 0:
        return math.nan
    return sum(len({r[j] for r in rows}) for j in range(tasks)) / (tasks * len(rows))


def components_json(components: Mapping[str, float]) -> str:
    """Reward parts as the ledger stores them (a JSON object, sorted keys)."""
    return json.dumps({k: float(v) for k, v in components.items()}, sort_keys=True)
