"""Test support only (tests/support/faults.py): wraps the objective's scoring so that a
direction can crash (ESOPT_FAIL_DIRECTION) or be slow (ESOPT_DIRECTION_DELAY_S)."""

import os
import time

from esopt.pipeline import objective

_score_directions = objective.score_directions


def score_directions(policy, spec, generation, directions):
    for d in directions:
        if os.environ.get("ESOPT_FAIL_DIRECTION") == str(d.index):
            raise RuntimeError(f"injected failure in direction {d.index}")
        time.sleep(float(os.environ.get("ESOPT_DIRECTION_DELAY_S", 0)))
    return _score_directions(policy, spec, generation, directions)


objective.score_directions = score_directions
