"""The report's parts, one entry each: which runs it reads, the tables and figures it writes
(with their PDF titles, caption files and Snakemake report categories) and its build
function. The Snakefile's report rules and target lists, the report PDF's pages and
`esopt report part|list` all come from PARTS (docs/extending.md: adding a table).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from esopt.pipeline.spec import (
    ASYNC_METHODS,
    COMPANION_METHODS,
    ES_METHODS,
    TRAINING_REWARD_ENVS,
    RunSpec,
)

if TYPE_CHECKING:
    from esopt.pipeline.ahd import AHDRun

TABLES = "results/tables"
FIGURES = "results/figures"
CAPTIONS = "workflow/report"
AHD_INDEX = "results/ahd/runs.json"
AHD_REFERENCES = "results/ahd/references.json"
FORMATS = {"table": ("csv", "md", "tex"), "figure": ("pdf", "png")}
# Of each artifact's files, the one Snakemake's HTML report shows and the one the PDF
# page draws.
REPORT_FORMAT = {"table": "md", "figure": "pdf"}
PAGE_FORMAT = {"table": "csv", "figure": "png"}


class ReportError(ValueError):
    """A report part that cannot be built from what it was given (named in the message)."""


@dataclass(frozen=True)
class Artifact:
    """A table (NAME.csv/.md/.tex under the tables folder) or a figure (NAME.pdf/.png under
    the figures folder) of a part, with its page title in the report PDF, its category in
    Snakemake's HTML report and its caption file workflow/report/CAPTION.rst."""

    kind: str
    name: str
    title: str
    category: str
    caption: str = ""
    """Caption file stem when it is not the artifact's name."""

    def __post_init__(self) -> None:
        if self.kind not in FORMATS:
            raise ValueError(f"artifact {self.name!r}: kind must be one of {list(FORMATS)}")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"artifact {self.name!r}: name must be [a-z][a-z0-9_]*")

    @property
    def caption_stem(self) -> str:
        return self.caption or self.name

    @property
    def caption_file(self) -> str:
        return f"{CAPTIONS}/{self.caption_stem}.rst"

    def folder(self, tables: str | Path = TABLES, figures: str | Path = FIGURES) -> Path:
        return Path(tables if self.kind == "table" else figures)

    def files(self, tables: str | Path = TABLES, figures: str | Path = FIGURES) -> list[str]:
        """Every file the artifact is written as (the workflow's outputs)."""
        folder = self.folder(tables, figures)
        return [str(folder / f"{self.name}.{ext}") for ext in FORMATS[self.kind]]

    def report_file(self, tables: str | Path = TABLES, figures: str | Path = FIGURES) -> str:
        """The file Snakemake's HTML report shows, with the caption (.md, .pdf)."""
        return str(self.folder(tables, figures) / f"{self.name}.{REPORT_FORMAT[self.kind]}")

    def page_file(self, tables: str | Path = TABLES, figures: str | Path = FIGURES) -> Path:
        """The file the report PDF's page draws (.csv, .png)."""
        return self.folder(tables, figures) / f"{self.name}.{PAGE_FORMAT[self.kind]}"


def table(name: str, title: str, category: str, caption: str = "") -> Artifact:
    return Artifact("table", name, title, category, caption)


def figure(name: str, title: str, category: str, caption: str = "") -> Artifact:
    return Artifact("figure", name, title, category, caption)


@dataclass(frozen=True)
class ReportContext:
    """What the parts select from: the workflow's runs, its AHD runs, and the two facts of
    the config that no run spec carries (which experiments have Trace2Skill, which runs
    Figure 6 probes)."""

    specs: tuple[RunSpec, ...]
    ahd_runs: tuple[AHDRun, ...] = ()
    skill_experiments: tuple[str, ...] = ()
    """Experiments with `skills: true`, in config order."""
    landscapes: tuple[str, ...] = ()
    """Run directories whose final checkpoint Figure 6 probes (landscape.parquet)."""

    @classmethod
    def from_config(cls, config: dict, specs: list[RunSpec] | None = None,
                    ahd_runs: list[AHDRun] | None = None) -> ReportContext:
        """The context of a workflow config (specs and AHD runs when already resolved)."""
        from esopt.pipeline.config import ahd_run_list, landscape_runs, parse_config, run_specs

        cfg = parse_config(config)
        specs = run_specs(cfg) if specs is None else specs
        ahd_runs = ahd_run_list(cfg) if ahd_runs is None else ahd_runs
        skills = [e for e in cfg.experiments if e != "ahd" and getattr(cfg, e).skills]
        return cls(tuple(specs), tuple(ahd_runs), tuple(skills),
                   tuple(s.run_dir for s, _ in landscape_runs(cfg)))

    def facts(self) -> dict:
        """The config facts as JSON data (what the workflow's report rule passes)."""
        return {"landscapes": list(self.landscapes),
                "skill_experiments": list(self.skill_experiments)}

    @classmethod
    def load(cls, runs: str | Path, ahd_runs: str | Path | None, facts: dict
             ) -> ReportContext:
        """The context from the workflow's run indexes (results/runs.json, and
        results/ahd/runs.json when it exists) and the facts."""
        from esopt.pipeline.ahd import AHDRun
        from esopt.report.results import load_runs

        unknown = set(facts) - {"landscapes", "skill_experiments"}
        if unknown:
            raise ReportError(f"report context: unknown keys {sorted(unknown)} (known: "
                              "landscapes, skill_experiments)")
        ahd = []
        if ahd_runs is not None and Path(ahd_runs).exists():
            ahd = [AHDRun(**d) for d in json.loads(Path(ahd_runs).read_text())]
        return cls(tuple(load_runs(runs)), tuple(ahd),
                   tuple(facts.get("skill_experiments", ())), tuple(facts.get("landscapes", ())))


@dataclass(frozen=True)
class PartJob:
    """What a part's build function gets: the runs the part reads, the whole context and
    the folders to write its tables and figures to."""

    runs: list[RunSpec]
    context: ReportContext
    tables: Path
    figures: Path


@dataclass(frozen=True)
class ReportPart:
    """One report part: one workflow rule `report_<name>` and `esopt report part <name>`."""

    name: str
    reads: str
    """What it reads, in words (`esopt report list`)."""
    artifacts: tuple[Artifact, ...]
    runs: Callable[[ReportContext], list[RunSpec]]
    """The runs its build function reads."""
    build: Callable[[PartJob], None]
    """Writes every artifact (tables under job.tables, figures under job.figures)."""
    inputs: Callable[[ReportContext], list[str]] | None = None
    """The files it reads (the rule's inputs); default: the final and kept evaluations
    and the ledgers of its runs."""
    active: Callable[[ReportContext], bool] | None = None
    """Whether the config has it (its outputs are targets); default: it reads a run."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"report part {self.name!r}: name must be [a-z][a-z0-9_]*")
        if not self.artifacts:
            raise ValueError(f"report part {self.name!r}: writes no table or figure")

    def is_active(self, ctx: ReportContext) -> bool:
        return self.active(ctx) if self.active is not None else bool(self.runs(ctx))

    def input_files(self, ctx: ReportContext) -> list[str]:
        """The files it reads for `ctx`; a ReportError when the config does not have it."""
        if not self.is_active(ctx):
            raise ReportError(f"report part {self.name!r} is not in this config ({self.reads}; "
                              f"{len(ctx.specs)} runs, {len(ctx.ahd_runs)} AHD runs, "
                              f"skill experiments {list(ctx.skill_experiments)}, "
                              f"landscapes {list(ctx.landscapes)})")
        if self.inputs is not None:
            return self.inputs(ctx)
        return run_results(ctx, self.runs(ctx))

    def output_files(self, tables: str | Path = TABLES, figures: str | Path = FIGURES
                     ) -> list[str]:
        return [f for a in self.artifacts for f in a.files(tables, figures)]

    @property
    def tables(self) -> list[str]:
        return [a.name for a in self.artifacts if a.kind == "table"]

    @property
    def figures(self) -> list[str]:
        return [a.name for a in self.artifacts if a.kind == "figure"]


# What the parts read, as functions of the context (each decided here only).


def evaluated_generations(spec: RunSpec, methods: set[str]) -> list[int]:
    """Generations evaluated for a run; generation 0 of a trained run comes from the
    `base` run when the config has one (`methods`: every method of the config)."""
    gens = spec.kept_generations()
    if spec.method != "base" and "base" in methods:
        gens = [g for g in gens if g > 0]
    return gens


def run_results(ctx: ReportContext, specs: list[RunSpec]) -> list[str]:
    """What a part reads of `specs`: final and kept evaluations, ledgers."""
    methods = {s.method for s in ctx.specs}
    inputs = [f"{s.run_dir}/final/eval.parquet" for s in specs]
    inputs += [f"{s.run_dir}/eval/gen{g:03d}.parquet" for s in specs
               for g in evaluated_generations(s, methods)]
    inputs += [f"{s.run_dir}/ledger.parquet" for s in specs if s.generations]
    return inputs


def sudoku_runs(ctx: ReportContext) -> list[RunSpec]:
    """Tables 1, 2, 7, Figures 3 and 7 and the companion comparison are Sudoku's."""
    return [s for s in ctx.specs if s.env == "sudoku"]


def training_reward_runs(ctx: ReportContext) -> list[RunSpec]:
    """The training-reward figure and the first page also cover Countdown."""
    return [s for s in ctx.specs if s.env in TRAINING_REWARD_ENVS]


def countdown_runs(ctx: ReportContext) -> list[RunSpec]:
    """The Countdown comparison: Countdown's trained and base runs."""
    return [s for s in ctx.specs if s.env == "countdown" and not s.eval_model]


def es_runs_with_updates(ctx: ReportContext) -> list[RunSpec]:
    """Table 6: every trained ES run (its update_magnitudes.json)."""
    return [s for s in ctx.specs if s.method in ES_METHODS + ASYNC_METHODS and s.generations]


def landscape_runs(ctx: ReportContext) -> list[RunSpec]:
    """Figure 6: the runs whose landscape the config computes (landscape.parquet)."""
    return [s for s in ctx.specs if s.run_dir in ctx.landscapes]


def table3_experiments(ctx: ReportContext) -> list[str]:
    """Table 3's experiments: those with Trace2Skill but web (Table 12 is web's), then
    DocVQA's (base, GRPO, ESOpt; Trace2Skill too with skills: true)."""
    docvqa = dict.fromkeys(s.experiment for s in ctx.specs if s.env == "docvqa")
    # DocVQA with skills is both: listed once.
    return list(dict.fromkeys([e for e in ctx.skill_experiments if e != "web"] + list(docvqa)))


def table3_runs(ctx: ReportContext) -> list[RunSpec]:
    """Every run of Table 3's experiments (Table 3 and Figure 8 pick their conditions)."""
    experiments = table3_experiments(ctx)
    return [s for s in ctx.specs if s.experiment in experiments]


def _table3_conditions(ctx: ReportContext) -> list[RunSpec]:
    return [s for s in table3_runs(ctx)
            if s.method in ("base", "esopt", "grpo") and not s.eval_model]


def _skill_runs(specs: list[RunSpec], ctx: ReportContext) -> list[RunSpec]:
    """The runs of `specs` with a Trace2Skill condition (skill/eval.parquet)."""
    return [s for s in specs if s.experiment in ctx.skill_experiments
            and s.method in ("base", "esopt") and not s.eval_model]


def _table3_inputs(ctx: ReportContext) -> list[str]:
    runs = table3_runs(ctx)
    finals = _table3_conditions(ctx) + [s for s in runs if s.eval_model]
    return ([f"{s.run_dir}/final/eval.parquet" for s in finals]
            + [f"{s.run_dir}/skill/eval.parquet" for s in _skill_runs(runs, ctx)])


def docvqa_trained_runs(ctx: ReportContext) -> list[RunSpec]:
    """Figure 9: DocVQA's ESOpt and GRPO runs (their ledgers)."""
    return [s for s in _table3_conditions(ctx)
            if s.env == "docvqa" and s.method in ("esopt", "grpo")]


def web_runs(ctx: ReportContext) -> list[RunSpec]:
    """Tables 4 and 12 and Figure 10: the web experiment's runs."""
    return [s for s in ctx.specs if s.experiment == "web"]


def _web_inputs(ctx: ReportContext) -> list[str]:
    trained = [s for s in web_runs(ctx) if not s.eval_model]
    return run_results(ctx, trained) + [f"{s.run_dir}/skill/eval.parquet"
                                        for s in _skill_runs(trained, ctx)]


def first_page_inputs(ctx: ReportContext) -> list[str]:
    """What the report PDF's first page reads besides results/runs.json."""
    return run_results(ctx, training_reward_runs(ctx))


# Build functions: each writes its part's artifacts; the table and figure code they call
# lives in the report modules (imported here when a part is built, so that the Snakefile,
# which imports this module, does not load matplotlib).


def _write_tables(job: PartJob, tables: dict) -> None:
    from esopt.report.tables import write_table

    for name, make in tables.items():
        write_table(make(job.runs), job.tables, name)


def build_sudoku_tables(job: PartJob) -> None:
    from esopt.report.tables import table1, table2, table7

    _write_tables(job, {"table1": table1, "table2": table2, "table7": table7})


def build_sudoku_figures(job: PartJob) -> None:
    from esopt.report.figures import figure3, figure7, train_reward_figure

    sudoku = [s for s in job.runs if s.env == "sudoku"]
    figure3(sudoku, job.figures)
    figure7(sudoku, job.figures)
    train_reward_figure(job.runs, job.figures)


def build_table6(job: PartJob) -> None:
    from esopt.report.tables import write_table
    from esopt.report.update_magnitudes import table6

    records = [json.loads(Path(f).read_text()) for f in _magnitude_files(job.runs)]
    write_table(table6(records), job.tables, "table6")


def _magnitude_files(specs: list[RunSpec]) -> list[str]:
    return [f"{s.run_dir}/final/update_magnitudes.json" for s in specs]


def build_diagnostics(job: PartJob) -> None:
    from esopt.report.diagnostics import build_part

    build_part(job)


def build_figure6(job: PartJob) -> None:
    from esopt.report.landscape import figure6

    figure6(_landscape_files(job.runs), job.figures)


def _landscape_files(specs: list[RunSpec]) -> list[str]:
    return [f"{s.run_dir}/landscape.parquet" for s in specs]


def build_math(job: PartJob) -> None:
    from esopt.report.math_report import figure8, table3

    _write_tables(job, {"table3": table3})
    figure8(job.runs, job.figures)


def build_figure9(job: PartJob) -> None:
    from esopt.report.math_report import figure9

    figure9(job.runs, job.figures)


def build_web(job: PartJob) -> None:
    from esopt.report.web_report import figure10, table4, table12

    _write_tables(job, {"table4": table4, "table12": table12})
    figure10(job.runs, job.figures)


def build_companions(job: PartJob) -> None:
    from esopt.report.companions import write_companions

    write_companions(job.runs, job.tables, job.figures)


def build_countdown_compare(job: PartJob) -> None:
    from esopt.report.countdown_compare import write_countdown_compare

    write_countdown_compare(job.runs, job.tables, job.figures)


def build_ahd(job: PartJob) -> None:
    from esopt.report.ahd_tables import table5, table13, table14, table17, table18
    from esopt.report.tables import write_table

    runs = list(job.context.ahd_runs)
    references = json.loads(Path(AHD_REFERENCES).read_text())
    write_table(table5(runs, references), job.tables, "table5")
    write_table(table13(runs), job.tables, "table13")
    write_table(table14(runs, references), job.tables, "table14")
    write_table(table17(runs), job.tables, "table17")
    write_table(table18(runs), job.tables, "table18")


SUDOKU = "Sudoku"
COUNTDOWN = "Countdown comparison"
MATH = "Math and DocVQA"
WEB = "WebArena-Lite"

# In report-PDF order: each part's artifacts in turn, after the first page.
PARTS: tuple[ReportPart, ...] = (
    ReportPart(
        "sudoku_tables", "Sudoku runs: final and kept evaluations, ledgers",
        (table("table1", "Table 1: Agentic Sudoku success by H*", SUDOKU),
         table("table2", "Table 2: training compute and wall time", SUDOKU),
         table("table7", "Table 7: ES configurations", SUDOKU)),
        runs=sudoku_runs, build=build_sudoku_tables),
    ReportPart(
        "sudoku_figures", "Sudoku and Countdown runs: evaluations, ledgers (when Sudoku ran)",
        (figure("fig3", "Figure 3: Agentic Sudoku by H*", SUDOKU),
         figure("fig7", "Figure 7: per-turn success and realized horizon", SUDOKU),
         figure("train_reward", "Training reward of the ES runs (spread over directions)",
                SUDOKU)),
        runs=training_reward_runs, build=build_sudoku_figures,
        active=lambda ctx: bool(sudoku_runs(ctx))),
    ReportPart(
        "table6", "trained ES runs: final/update_magnitudes.json",
        (table("table6", "Table 6: distribution of parameter-update magnitudes after ES",
               "ES update magnitudes"),),
        runs=es_runs_with_updates, build=build_table6,
        inputs=lambda ctx: _magnitude_files(es_runs_with_updates(ctx))),
    ReportPart(
        "diagnostics", "trained ES runs: ledgers and final/update_magnitudes.json",
        (table("diagnostics", "ES diagnostics per run", "ES diagnostics"),
         figure("diagnostics", "ES diagnostics per generation", "ES diagnostics",
                caption="diagnostics_fig")),
        runs=es_runs_with_updates, build=build_diagnostics,
        inputs=lambda ctx: [f"{s.run_dir}/{f}" for s in es_runs_with_updates(ctx)
                            for f in ("ledger.parquet", "final/update_magnitudes.json")]),
    ReportPart(
        "figure6", "the landscape runs (config landscape): landscape.parquet",
        (figure("fig6", "Figure 6: reward landscapes around the base model (landscape.centre)",
                SUDOKU),),
        runs=landscape_runs, build=build_figure6,
        inputs=lambda ctx: _landscape_files(landscape_runs(ctx))),
    ReportPart(
        "math", "math (with skills) and DocVQA runs: final and skill evaluations",
        (table("table3", "Table 3: math with a tool and DocVQA with an OCR tool", MATH),
         figure("fig8", "Figure 8: best-of-k (math; DocVQA ANLS and accuracy)", MATH)),
        runs=table3_runs, build=build_math, inputs=_table3_inputs,
        active=lambda ctx: bool(_table3_conditions(ctx))),
    ReportPart(
        "figure9", "DocVQA's ESOpt and GRPO runs: ledgers",
        (figure("fig9", "Figure 9: average realized trajectory length during DocVQA "
                        "training", MATH),),
        runs=docvqa_trained_runs, build=build_figure9,
        inputs=lambda ctx: [f"{s.run_dir}/ledger.parquet" for s in docvqa_trained_runs(ctx)]),
    ReportPart(
        "web", "web runs: evaluations, ledgers, skill evaluations",
        (table("table4", "Table 4: web tasks, success per site category", WEB),
         figure("fig10", "Figure 10: web success during Agentic ESOpt", WEB),
         table("table12", "Table 12: web adaptation stages", WEB)),
        runs=web_runs, build=build_web, inputs=_web_inputs,
        active=lambda ctx: any(not s.eval_model for s in web_runs(ctx))),
    ReportPart(
        "companions", "Sudoku runs (when a companion ES method ran): evaluations, ledgers",
        (table("companions", "Companion ES methods: ES, CoPES, async ES, low-rank ES",
               "Companion ES"),
         figure("companions", "Companion ES methods: training reward and held-out success",
                "Companion ES", caption="companions_fig")),
        runs=sudoku_runs, build=build_companions,
        active=lambda ctx: any(s.method in COMPANION_METHODS for s in sudoku_runs(ctx))),
    ReportPart(
        "countdown_compare", "Countdown runs (when a method besides base and ESOpt ran): "
                             "evaluations, ledgers",
        (table("countdown_table1", "Countdown Table 1: held-out success, paired differences "
                                   "and memory", COUNTDOWN),
         table("countdown_table2", "Countdown Table 2: training FLOPs, episodes and time",
               COUNTDOWN),
         figure("countdown_flops", "Countdown: held-out success against training FLOPs",
                COUNTDOWN)),
        runs=countdown_runs, build=build_countdown_compare,
        active=lambda ctx: any(s.method not in ("base", "esopt") for s in countdown_runs(ctx))),
    ReportPart(
        "ahd", "AHD runs: results/ahd/runs.json, summary.json, references.json",
        tuple(table(name, title, "Heuristic design (AHD)") for name, title in (
            ("table5", "Table 5: constructive heuristic design (test objectives, gap-ratio "
                       "gains)"),
            ("table13", "Table 13: AHD proposal budgets and ES update units"),
            ("table14", "Table 14: ACO heuristic design (test objectives, EoH / ESOpt + EoH "
                        "ratios)"),
            ("table17", "Table 17: AHD repeated runs"),
            ("table18", "Table 18: AHD end-to-end runtime"))),
        runs=lambda ctx: [], build=build_ahd, active=lambda ctx: bool(ctx.ahd_runs),
        inputs=lambda ctx: [AHD_INDEX, AHD_REFERENCES]
        + [f"{r.run_dir}/summary.json" for r in ctx.ahd_runs]),
)
PART_NAMES = tuple(p.name for p in PARTS)


def load_context(runs: str | Path, ahd_runs: str | Path | None = AHD_INDEX, *,
                 facts: str | None = None, config: dict | None = None) -> ReportContext:
    """The context of `esopt report part`: the run indexes with the facts as the workflow
    passes them (JSON), or with those of `config`, which must have the same runs."""
    if (facts is None) == (config is None):
        raise ReportError("report context: give the facts (JSON) or the config, one of them")
    if config is None:
        try:
            data = json.loads(facts)
        except json.JSONDecodeError as e:
            raise ReportError(f"report context: not JSON ({e}): {facts[:80]!r}") from None
        return ReportContext.load(runs, ahd_runs, data)
    resolved = ReportContext.from_config(config)
    ctx = ReportContext.load(runs, ahd_runs, resolved.facts())
    in_config, in_file = ({s.run_dir for s in c.specs} for c in (resolved, ctx))
    if in_config != in_file:
        raise ReportError(f"{runs} does not hold the config's runs ({len(in_file)} in the file, "
                          f"{len(in_config)} in the config; e.g. "
                          f"{sorted(in_config ^ in_file)[:2]}): name the workflow's config "
                          "(--config scale=..., --configfile)")
    return ctx


def get_part(name: str) -> ReportPart:
    for p in PARTS:
        if p.name == name:
            return p
    raise ReportError(f"report part {name!r}: no such part; choose one of {list(PART_NAMES)}")


def active_parts(ctx: ReportContext) -> list[ReportPart]:
    """The parts the config has, in report order."""
    return [p for p in PARTS if p.is_active(ctx)]


def report_outputs(ctx: ReportContext) -> list[str]:
    """Every table and figure file of the config's parts (the report PDF's inputs)."""
    return [f for p in active_parts(ctx) for f in p.output_files()]


def build_part(name: str, ctx: ReportContext, tables: str | Path = TABLES,
               figures: str | Path = FIGURES) -> list[str]:
    """Write part `name`'s tables and figures; return their files."""
    part = get_part(name)
    part.input_files(ctx)  # refuses a part the context does not have, saying why
    tables, figures = Path(tables), Path(figures)
    part.build(PartJob(part.runs(ctx), ctx, tables, figures))
    missing = [f for f in part.output_files(tables, figures) if not Path(f).exists()]
    if missing:
        raise ReportError(f"report part {name!r}: its build wrote no {missing}")
    return part.output_files(tables, figures)
