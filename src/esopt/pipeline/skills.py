"""Trace2Skill in the pipeline: episodes from Parquet -> SKILL.md (one distillation).

Trace2Skill (tiny scale: one distillation) learns from the base model's own rollouts on
training problems; Agentic ESOpt + Trace2Skill distils post hoc from every trajectory of
the ES run (all generations, all directions). The writer is the base model in both, so
the two conditions differ only in the trajectories they learn from.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq

from esopt.backends.factory import load_policy
from esopt.context.skills import distill_skill
from esopt.pipeline.spec import RunSpec
from esopt.runtime.atomic import write_json_atomic, write_text_atomic

log = logging.getLogger(__name__)


def episodes_from_parquet(paths: list[str | Path]) -> list[dict]:
    """Episode dicts (problem_id, question, gold, success, transcript) from episode tables."""
    episodes = []
    for path in paths:
        path = Path(path)
        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        for f in files:
            columns = ["first_prompt", "success", "turns"]
            has_failed = "failed" in pq.read_schema(f).names
            for row in pq.read_table(f, columns=columns + ["failed"] * has_failed).to_pylist():
                if row.get("failed"):
                    continue  # the environment raised: no lesson about the model in it
                infos = [json.loads(t["info"]) for t in row["turns"]]
                last = next((i for i in reversed(infos) if "problem_id" in i), {})
                if "problem_id" not in last:
                    continue  # not a problem-file environment
                prompt = json.loads(row["first_prompt"])
                question = next((m["content"] for m in prompt if m["role"] == "user"), "")
                episodes.append({
                    "problem_id": last["problem_id"], "gold": last.get("gold", "?"),
                    "question": question, "success": bool(row["success"]),
                    "transcript": "\n\n".join(t["completion"] for t in row["turns"]),
                })
    return episodes


def distill_stage(spec: RunSpec, writer_checkpoint: str, sources: list[str], out: str) -> dict:
    """Write SKILL.md (and the raw lessons beside it) from the episodes in `sources`."""
    import torch

    torch.set_num_threads(int(spec.runtime.get("eval_threads", torch.get_num_threads())))
    episodes = episodes_from_parquet(sources)
    policy, _ = load_policy(writer_checkpoint, spec.backend, spec.serving_dtype, spec.runtime)
    skill, raw = distill_skill(policy, episodes)
    out = Path(out)
    write_text_atomic(out, skill)
    record = {"episodes": len(episodes), "failed_used": len(raw), "lessons_raw": raw,
              "skill_chars": len(skill), "writer": writer_checkpoint,
              "config": json.loads(spec.to_json())}
    write_json_atomic(out.with_suffix(".json"), record, sort_keys=False)
    log.info("%s: %d episodes, %d lessons asked, SKILL.md %d chars", out, len(episodes),
             len(raw), len(skill))
    return record
