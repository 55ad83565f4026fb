"""The same ES run as the DAG, in one process: the reference the DAG is measured against.

Loads the model once and keeps it across generations; scores directions one after the
other with the same tasks, sampling seeds and thread count as the DAG's workers, so the
final checkpoint has the same sha256 as the DAG's.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from esopt.backends.factory import load_policy
from esopt.es.strategy import ES
from esopt.pipeline.objective import episodes_fitness, score_direction
from esopt.pipeline.spec import RunSpec

log = logging.getLogger(__name__)


def train_in_process(spec: RunSpec, out_dir: str | Path) -> dict:
    """Run every generation of `spec` and save the final checkpoint; return its manifest."""
    import torch

    torch.set_num_threads(int(spec.runtime.get("threads_per_worker", 1)))
    t0 = time.perf_counter()
    policy, load_s = load_policy(spec.model, spec.backend, spec.serving_dtype, spec.runtime)
    es = ES(spec.es)
    parent = policy.checkpoint_sha256
    for t in range(spec.generations):
        state = es.state_at(t)
        rewards = [episodes_fitness(score_direction(policy, spec, t, d)[0],
                                    spec.failed_episode_reward) for d in es.ask(state)]
        update, _ = es.tell(state, rewards)
        policy.apply(update)
        log.info("in-process gen %03d: rewards %s", t, [round(r, 3) for r in rewards])
    return policy.save(out_dir, {"generation": spec.generations, "base_sha256": parent,
                                 "load_s": load_s, "wall_s": time.perf_counter() - t0,
                                 "config": spec.to_json()})
