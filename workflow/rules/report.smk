rule run_index:
    output:
        "results/runs.json",
    params:
        specs=lambda w: json.dumps([json.loads(s.identity_json()) for s in SPECS]),
    log:
        "logs/report/run_index.log",
    shell:
        "echo {params.specs:q} > {output} 2> {log}"


# One rule per part of esopt.report.registry (docs/extending.md), whether or not the
# config has it: `all` and report_pdf ask for the parts it has. The shell command reads
# the part from params: Snakemake evaluates it when the job runs, after the loop.
for _part in REPORT_PARTS:

    rule:
        name:
            f"report_{_part.name}"
        localrule: True
        input:
            runs="results/runs.json",
            data=report_part_input(_part),
        output:
            report_part_output(_part),
        params:
            part=_part.name,
            context=REPORT_FACTS,
        log:
            f"logs/report/{_part.name}.log",
        shell:
            "esopt report part {params.part} --runs {input.runs} --context {params.context:q} "
            "--tables results/tables --figures results/figures > {log} 2>&1"


rule update_magnitudes:
    wildcard_constraints:
        method=f"{ES_METHOD}|{ASYNC_METHOD}",
    input:
        base=lambda w: spec_of(w).model,
        final=final_checkpoint_input,
    output:
        f"{RUN}/final/update_magnitudes.json",
    params:
        spec=spec_json,
        final=final_checkpoint,
    log:
        f"logs/{RUN}/update_magnitudes.log",
    shell:
        "esopt stage magnitudes --spec {params.spec:q} --base {input.base} "
        "--final {params.final} --out {output} > {log} 2>&1"



rule report_pdf:
    input:
        report_outputs(REPORT),
        runs="results/runs.json",
        results=first_page_inputs(REPORT),  # the first page: every run's evaluations, ledger
    output:
        report("results/report.pdf", caption="../report/report.rst", category="Report"),
    log:
        "logs/report/report_pdf.log",
    shell:
        "esopt report pdf --runs {input.runs} --tables results/tables "
        "--figures results/figures --captions workflow/report --out {output} > {log} 2>&1"
