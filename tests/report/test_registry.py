"""The report registry: which runs each part reads, which parts a config has, and building
a part through `esopt report part` from real run files."""

import json
from pathlib import Path

import pytest
import yaml

from esopt.cli import main
from esopt.pipeline.config import merge_config, run_specs
from esopt.report import pdf
from esopt.report.registry import (
    CAPTIONS,
    PARTS,
    ReportContext,
    ReportError,
    active_parts,
    build_part,
    first_page_inputs,
    get_part,
    report_outputs,
)
from esopt.report.tables import table1, table2, table7, to_markdown
from tests.report.test_tables import write_sudoku_runs

REPO = Path(__file__).resolve().parents[2]


def _config(scale: str | None = None) -> dict:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    if scale:
        cfg = merge_config(cfg, yaml.safe_load((REPO / f"config/scales/{scale}.yaml").read_text()))
    return cfg


def test_every_part_writes_its_own_files_each_with_a_caption_and_title():
    assert len({p.name for p in PARTS}) == len(PARTS)
    files = [f for p in PARTS for f in p.output_files()]
    assert len(files) == len(set(files))  # no file is written by two parts
    for part in PARTS:
        for a in part.artifacts:
            assert (REPO / a.caption_file).is_file(), a.caption_file
            assert a.caption_file.startswith(CAPTIONS) and a.title and a.category


def test_the_default_tiny_run_has_the_sudoku_parts_table6_diagnostics_and_figure6():
    ctx = ReportContext.from_config(_config())
    # and the Countdown comparison's page: GRPO runs beside ESOpt on Countdown (issue 37)
    assert [p.name for p in active_parts(ctx)] == ["sudoku_tables", "sudoku_figures", "table6",
                                                   "diagnostics", "figure6",
                                                   "countdown_compare"]
    assert ctx.landscapes == ("results/sudoku/h1/esopt/seed0",) and ctx.skill_experiments == ()
    assert get_part("figure6").input_files(ctx) == [
        "results/sudoku/h1/esopt/seed0/landscape.parquet"]
    assert get_part("table6").input_files(ctx) == [
        f"results/{e}/h1/esopt/seed0/final/update_magnitudes.json"
        for e in ("sudoku", "countdown")]
    # Tables 1, 2, 7 read Sudoku's runs; the training-reward figure Countdown's as well;
    # generation 0 of ESOpt comes from the base run's evaluation.
    tables = get_part("sudoku_tables").input_files(ctx)
    figures = get_part("sudoku_figures").input_files(ctx)
    assert "results/sudoku/h1/esopt/seed0/ledger.parquet" in tables
    assert not any("countdown" in f for f in tables)
    assert "results/countdown/h1/esopt/seed0/ledger.parquet" in figures
    assert "results/sudoku/h1/esopt/seed0/eval/gen000.parquet" not in tables
    assert first_page_inputs(ctx) == figures
    outputs = report_outputs(ctx)
    assert "results/figures/fig6.png" in outputs and "results/tables/table3.csv" not in outputs
    # Tables 1, 2, 7 (3 files each), Figures 3, 7 and train_reward (2 each), Table 6, the
    # diagnostics table and figure, Figure 6; Countdown Tables 1, 2 (3 each) and its FLOPs
    # figure (2).
    assert len(outputs) == 3 * 3 + 3 * 2 + 3 + (3 + 2) + 2 + (2 * 3 + 2)


def test_a_part_the_config_lacks_is_refused_naming_it():
    ctx = ReportContext.from_config(_config())
    with pytest.raises(ReportError, match="report part 'web' is not in this config"):
        get_part("web").input_files(ctx)
    with pytest.raises(ReportError, match="report part 'math' is not in this config"):
        build_part("math", ctx, "tables", "figures")
    with pytest.raises(ReportError, match="no such part.*'sudoku_tables'"):
        get_part("tables")


def test_docvqa_has_table3_and_figure9_from_its_trained_runs():
    ctx = ReportContext.from_config(_config("docvqa"))
    assert [p.name for p in active_parts(ctx)] == ["table6", "diagnostics", "math", "figure9"]
    run = "results/docvqa/h2/{}/seed0"
    assert get_part("math").input_files(ctx) == [
        f"{run.format(m)}/final/eval.parquet" for m in ("base", "esopt", "grpo")]
    assert get_part("figure9").input_files(ctx) == [
        f"{run.format(m)}/ledger.parquet" for m in ("esopt", "grpo")]


def test_trace2skill_adds_the_skill_evaluations_where_the_config_says_so():
    specs = run_specs(_config("web"))
    without = ReportContext(tuple(specs))
    with_skills = ReportContext(tuple(specs), skill_experiments=("web",))
    skills = {f for f in get_part("web").input_files(with_skills) if "/skill/" in f}
    horizon = specs[0].horizon
    assert skills == {f"results/web/h{horizon}/{m}/seed0/skill/eval.parquet"
                      for m in ("base", "esopt")}
    assert not any("/skill/" in f for f in get_part("web").input_files(without))
    # Web's skills are Table 12's, never Table 3's
    assert not get_part("math").is_active(with_skills)


def test_an_evaluation_only_model_is_read_by_table1_and_adds_no_part():
    plain = ReportContext.from_config(_config("tiny-table1"))
    cfg = merge_config(_config("tiny-table1"), {"eval_models": ["Qwen/Qwen3.5-27B"]})
    ctx = ReportContext.from_config(cfg)
    assert active_parts(ctx) == active_parts(plain)
    read = [f for f in get_part("sudoku_tables").input_files(ctx) if "qwen" in f]
    run = "results/sudoku/h{}/base_qwen_qwen3_5_27b/seed0"
    assert sorted(read) == sorted([f"{run.format(h)}/final/eval.parquet" for h in (1, 2)]
                                  + [f"{run.format(h)}/eval/gen000.parquet" for h in (1, 2)])


@pytest.fixture()
def sudoku_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run dirs are relative, as in the workflow
    return write_sudoku_runs(tmp_path)


def _write_runs(path: Path, specs) -> Path:
    path.write_text(json.dumps([json.loads(s.identity_json()) for s in specs]))
    return path


def test_report_part_writes_tables_1_2_7_from_the_runs_files(sudoku_runs, tmp_path, capsys):
    runs = _write_runs(tmp_path / "runs.json", sudoku_runs)
    main(["report", "part", "sudoku_tables", "--runs", str(runs), "--context", "{}",
          "--tables", "tables", "--figures", "figures"])
    for name, make in (("table1", table1), ("table2", table2), ("table7", table7)):
        assert (tmp_path / "tables" / f"{name}.md").read_text() == to_markdown(make(sudoku_runs))
        assert (tmp_path / "tables" / f"{name}.tex").stat().st_size > 0
    assert capsys.readouterr().out.split() == [f"tables/{n}.{ext}" for n in
                                               ("table1", "table2", "table7")
                                               for ext in ("csv", "md", "tex")]


def test_report_part_by_hand_reads_the_facts_of_the_named_config(sudoku_runs, tmp_path):
    runs = _write_runs(tmp_path / "runs.json", sudoku_runs)
    args = ["report", "part", "sudoku_tables", "--runs", str(runs), "--tables", "tables",
            "--figures", "figures", "--directory", str(REPO)]
    with pytest.raises(ReportError, match="runs.json does not hold the config's runs"):
        main(args + ["--config", "scale=tiny"])  # the workflow ran another config
    main(args + ["--config", "scale=tiny-table1", "sudoku={seeds: [0, 1]}"])
    assert (tmp_path / "tables/table1.md").read_text() == to_markdown(table1(sudoku_runs))
    with pytest.raises(ReportError, match="--context or --config"):
        main(args + ["--context", "{}", "--config", "scale=tiny"])
    with pytest.raises(ReportError, match="unknown keys \\['skills'\\]"):
        main(args[:-2] + ["--context", '{"skills": ["math"]}'])


def test_report_list_names_every_part_with_its_tables_and_figures(capsys):
    main(["report", "list"])
    lines = capsys.readouterr().out.splitlines()
    for part in PARTS:
        row = next(line for line in lines if line.startswith(f"| {part.name} |"))
        assert all(name in row for name in part.tables + part.figures)


def test_the_report_pdf_has_a_page_per_written_artifact_in_registry_order(tmp_path,
                                                                         monkeypatch):
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    artifacts = [a for p in PARTS for a in p.artifacts]
    for a in artifacts:
        a.page_file(tables, figures).parent.mkdir(exist_ok=True)
        a.page_file(tables, figures).write_text("")
    pages = []
    monkeypatch.setattr(pdf, "_table_page", lambda _, title, path, caption: pages.append(
        (title, path.name, caption)))
    monkeypatch.setattr(pdf, "_figure_page", lambda _, title, path, caption: pages.append(
        (title, path.name, caption)))
    monkeypatch.setattr(pdf, "_first_page", lambda _, first: None)
    pdf.build_report(tables, figures, REPO / CAPTIONS, tmp_path / "report.pdf", None)
    assert [p[0] for p in pages] == [a.title for a in artifacts]
    assert pages[0][1] == "table1.csv" and pages[3][1] == "fig3.png"
    companions_figure = next(p for p in pages if p[1] == "companions.png")
    assert companions_figure[2] == " ".join(
        (REPO / CAPTIONS / "companions_fig.rst").read_text().split())
    (tables / "table1.csv").unlink()  # a table not written: no page
    pages.clear()
    pdf.build_report(tables, figures, REPO / CAPTIONS, tmp_path / "report.pdf", None)
    assert len(pages) == len(artifacts) - 1 and pages[0][1] == "table2.csv"
