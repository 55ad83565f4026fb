"""The report rules generated from the registry run their own part: one real report job
(Table 6 from update records) with every upstream rule held back."""

import json

from tests.workflow.conftest import snakemake


def _record(method: str, experiment: str, fraction: float) -> dict:
    spec = {"experiment": experiment, "horizon": 1, "method": method, "seed": 0}
    return {"spec": spec, "generations": 20, "sigma_0": 1e-3,
            "fractions": [fraction, 0.9, 1.0], "max_abs": 2e-3}


def test_a_report_rule_builds_its_own_part(workdir):
    for experiment, fraction in (("sudoku", 0.25), ("countdown", 0.5)):
        path = workdir / f"results/{experiment}/h1/esopt/seed0/final/update_magnitudes.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_record("esopt", experiment, fraction)))
    # The rules are defined in a loop; a job must run its own part, not the loop's last.
    snakemake(workdir, "results/tables/table6.md", "--allowed-rules", "report_table6",
              "run_index")
    table6 = (workdir / "results/tables/table6.md").read_text()
    assert "| countdown | 1 | Agentic ESOpt | 0 | 20 | 1.0e-03 | 50.00% |" in table6
    assert "| sudoku | 1 | Agentic ESOpt | 0 | 20 | 1.0e-03 | 25.00% |" in table6
    assert (workdir / "logs/report/table6.log").read_text().split() == [
        f"results/tables/table6.{ext}" for ext in ("csv", "md", "tex")]
    assert not (workdir / "results/tables/table5.md").exists()  # the AHD part's
