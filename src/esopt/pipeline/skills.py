"""Trace2Skill in the pipeline: the baseline's iterations, or one post-hoc distillation.

Trace2Skill (method base: the paper's baseline, Table 12) iterates in one job: each
iteration plays `tasks x rollouts` training episodes with the current SKILL.md (the ES
training decoder, a sampling seed per iteration), analyses their successes and failures
and consolidates the lessons (esopt.context.skills.trace2skill). Agentic ESOpt +
Trace2Skill distils once, post hoc, from every trajectory of the ES run (all
generations, all directions). The writer is the base model in both, so the two
conditions differ only in the trajectories they learn from; each environment has its own
prompts (esopt.context.skills.PROMPTS).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from esopt.agent.evaluate import task_seeds
from esopt.agent.rollout import run_episodes
from esopt.agent.trajectories import episodes_table
from esopt.backends.factory import load_policy
from esopt.context.skills import SkillLimits, distill_skill, prompts_for, trace2skill
from esopt.envs.base import make_env
from esopt.es.seeds import mix
from esopt.pipeline.spec import RunSpec, Trace2SkillConfig
from esopt.runtime.atomic import write_json_atomic, write_text_atomic
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)


def episode_dicts(table: pa.Table) -> list[dict]:
    """Episode dicts (problem_id, question, gold, success, transcript) of an episodes
    table; episodes whose environment raised (no lesson about the model in them) or that
    name no problem are left out."""
    columns = ["first_prompt", "success", "turns"] + ["failed"] * ("failed" in table.column_names)
    out = []
    for row in table.select(columns).to_pylist():
        if row.get("failed"):
            continue
        infos = [json.loads(t["info"]) for t in row["turns"]]
        last = next((i for i in reversed(infos) if "problem_id" in i), {})
        if "problem_id" not in last:
            continue  # not a problem-file environment
        prompt = json.loads(row["first_prompt"])
        # The task is the first prompt's last user message (a worked example's come first).
        question = next((m["content"] for m in reversed(prompt) if m["role"] == "user"), "")
        gold = last.get("gold", "?")
        out.append({
            "problem_id": last["problem_id"],
            "gold": " / ".join(map(str, gold)) if isinstance(gold, list) else gold,
            "question": question, "success": bool(row["success"]),
            "transcript": "\n\n".join(t["completion"] for t in row["turns"]),
        })
    return out


def episodes_from_parquet(paths: list[str | Path]) -> list[dict]:
    """Episode dicts of every episode table in `paths` (files, or directories of them)."""
    episodes = []
    for path in paths:
        path = Path(path)
        for f in sorted(path.glob("*.parquet")) if path.is_dir() else [path]:
            episodes += episode_dicts(pq.read_table(f))
    return episodes


def limits_of(config: Trace2SkillConfig) -> SkillLimits:
    return SkillLimits(max_chars=config.max_chars, max_rules=config.max_rules,
                       merge_batch=config.merge_batch)


def iteration_tasks(spec: RunSpec, settings: Trace2SkillConfig, iteration: int) -> list[int]:
    """The training tasks an iteration plays (their own hash family: neither ES's nor the
    held-out ones)."""
    return task_seeds(f"skill/{spec.seed}/{iteration}", settings.tasks)


def play_iteration(policy, spec: RunSpec, settings: Trace2SkillConfig, skill: str,
                   iteration: int):
    """The episodes of one Trace2Skill iteration: each task `rollouts` times with `skill`
    in the system prompt, the training decoder, a sampling seed per iteration."""
    seeds = [t for t in iteration_tasks(spec, settings, iteration)
             for _ in range(settings.rollouts)]
    sampling = replace(spec.train_decoder, seed=mix("skill", spec.seed, iteration) % 2**31)
    kwargs = {**spec.env_kwargs, "skill": skill}
    return run_episodes(policy, lambda: make_env(spec.env, **kwargs), seeds, sampling)


def distill_stage(spec: RunSpec, writer_checkpoint: str, sources: list[str], out: str,
                  settings: Trace2SkillConfig) -> dict:
    """Write SKILL.md (and SKILL.json, the record of every pass beside it): the Trace2Skill
    baseline's iterations for method base (`sources` unused), else one distillation from
    the episodes in `sources`."""
    import torch

    torch.set_num_threads(int(spec.runtime.get("eval_threads", torch.get_num_threads())))
    policy, _ = load_policy(writer_checkpoint, spec.backend, spec.serving_dtype, spec.runtime)
    prompts, limits = prompts_for(spec.env), limits_of(settings)
    if spec.method == "base":
        progress = Progress(settings.iterations, f"{spec.run_dir} Trace2Skill", "iteration")

        def play(skill: str, iteration: int) -> list[dict]:
            episodes = play_iteration(policy, spec, settings, skill, iteration)
            progress.update()
            return episode_dicts(episodes_table(episodes))

        skill, passes = trace2skill(policy, play, settings.iterations, prompts, limits)
    else:
        skill, record = distill_skill(policy, episodes_from_parquet(sources), prompts, limits)
        passes = [record]
    out = Path(out)
    write_text_atomic(out, skill)
    record = {"method": spec.method, "iterations": len(passes),
              "episodes": sum(p["episodes"] for p in passes), "passes": passes,
              "skill_chars": len(skill), "writer": writer_checkpoint,
              "trace2skill": asdict(settings), "config": json.loads(spec.to_json())}
    write_json_atomic(out.with_suffix(".json"), record, sort_keys=False)
    log.info("%s: %d pass(es) over %d episodes, SKILL.md %d chars", out, len(passes),
             record["episodes"], len(skill))
    return record
