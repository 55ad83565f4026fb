"""Episodes <-> Parquet: one row per episode, its turns as a nested list column."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa

from esopt.agent.rollout import Episode
from esopt.envs.base import outcome_columns


def episodes_table(episodes: Sequence[Episode], extra: Mapping[str, object] | None = None
                   ) -> pa.Table:
    """A table of episodes; `extra` adds constant columns (direction, generation, ...), and
    each environment's `outcome_columns` come from its last turn's info (math: which
    checker decided; DocVQA: ANLS and accuracy)."""
    rows, types = [], {}
    for ep in episodes:
        row = dict(extra or {})
        columns = outcome_columns(ep.env)
        types.update(columns)
        final = ep.turns[-1].info if ep.turns else {}
        row.update({key: final.get(key) for key in columns})
        row.update(
            env=ep.env, task_seed=ep.task_seed, success=ep.success, failed=ep.failed,
            error=ep.error, reward=float(ep.reward),
            num_turns=ep.num_turns, prompt_tokens=ep.prompt_tokens,
            completion_tokens=ep.completion_tokens, wall_s=float(ep.wall_s),
            first_prompt=json.dumps(ep.first_prompt),
            turns=[{"completion": t.completion, "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": t.completion_tokens, "reward": float(t.reward),
                    "info": json.dumps(t.info, default=str),
                    "finish_reason": t.finish_reason,
                    "completion_ids": [int(i) for i in t.completion_ids]} for t in ep.turns],
        )
        rows.append(row)
    table = pa.Table.from_pylist(rows)
    # Typed even when every value is null, so repeats' tables concatenate.
    for key, type_name in types.items():
        i = table.schema.get_field_index(key)
        table = table.set_column(i, key, table.column(i).cast(pa.type_for_alias(type_name)))
    return table
