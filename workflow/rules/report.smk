rule run_index:
    output:
        "results/runs.json",
    params:
        specs=lambda w: json.dumps([json.loads(s.identity_json()) for s in SPECS]),
    log:
        "logs/report/run_index.log",
    shell:
        "echo {params.specs:q} > {output} 2> {log}"


if SUDOKU_SPECS:

    localrules:
        tables,
        figures,

    rule tables:
        input:
            runs="results/runs.json",
            results=sudoku_results,
        output:
            TABLES,
        log:
            "logs/report/tables.log",
        shell:
            "esopt report tables --runs {input.runs} --out results/tables > {log} 2>&1"


    rule figures:
        input:
            runs="results/runs.json",
            results=figure_results,
        output:
            pdf=report("results/figures/fig3.pdf", caption="../report/fig3.rst", category="Sudoku"),
            png="results/figures/fig3.png",
            fig7_pdf=report("results/figures/fig7.pdf", caption="../report/fig7.rst",
                            category="Sudoku"),
            fig7_png="results/figures/fig7.png",
            train_reward_pdf=report("results/figures/train_reward.pdf",
                                    caption="../report/train_reward.rst", category="Sudoku"),
            train_reward_png="results/figures/train_reward.png",
        log:
            "logs/report/figures.log",
        shell:
            "esopt report figures --runs {input.runs} --out results/figures > {log} 2>&1"


if LANDSCAPES:

    localrules:
        figure6,

    rule figure6:
        input:
            LANDSCAPE_FILES,
        output:
            pdf=report("results/figures/fig6.pdf", caption="../report/fig6.rst", category="Sudoku"),
            png="results/figures/fig6.png",
        log:
            "logs/report/figure6.log",
        shell:
            "esopt report landscape --landscapes {input} --out results/figures > {log} 2>&1"


if COMPANION_OUTPUTS:

    localrules:
        companions_report,

    rule companions_report:
        input:
            runs="results/runs.json",
            results=sudoku_results,
        output:
            table=report("results/tables/companions.md", caption="../report/companions.rst",
                         category="Companion ES"),
            csv="results/tables/companions.csv",
            tex="results/tables/companions.tex",
            pdf=report("results/figures/companions.pdf",
                       caption="../report/companions_fig.rst", category="Companion ES"),
            png="results/figures/companions.png",
        log:
            "logs/report/companions.log",
        shell:
            "esopt report companions --runs {input.runs} --tables results/tables "
            "--figures results/figures > {log} 2>&1"


if WEB_OUTPUTS:

    localrules:
        web_report,

    rule web_report:
        input:
            runs="results/runs.json",
            results=web_results,
        output:
            table4=report("results/tables/table4.md", caption="../report/table4.rst",
                          category="WebArena-Lite"),
            table4_csv="results/tables/table4.csv",
            table4_tex="results/tables/table4.tex",
            table12=report("results/tables/table12.md", caption="../report/table12.rst",
                           category="WebArena-Lite"),
            table12_csv="results/tables/table12.csv",
            table12_tex="results/tables/table12.tex",
            pdf=report("results/figures/fig10.pdf", caption="../report/fig10.rst",
                       category="WebArena-Lite"),
            png="results/figures/fig10.png",
        params:
            experiments=" ".join(WEB_EXPERIMENTS),
        log:
            "logs/report/web.log",
        shell:
            "esopt report web --runs {input.runs} --experiments {params.experiments} "
            "--out results/tables --figures results/figures > {log} 2>&1"


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


if TABLE6:

    localrules:
        table6,

    rule table6:
        input:
            MAGNITUDE_FILES,
        output:
            TABLE6,
        log:
            "logs/report/table6.log",
        shell:
            "esopt report table6 --records {input} --out results/tables > {log} 2>&1"


rule report_pdf:
    input:
        TABLES,
        TABLE6,
        FIGURES,
        LANDSCAPE_OUTPUTS,
        COMPANION_OUTPUTS,
        AHD_TABLES,
        MATH_OUTPUTS,
        WEB_OUTPUTS,
        runs="results/runs.json",
        results=figure_results,  # the first page reads every run's evaluations and ledger
    output:
        report("results/report.pdf", caption="../report/report.rst", category="Report"),
    log:
        "logs/report/report_pdf.log",
    shell:
        "esopt report pdf --runs {input.runs} --tables results/tables "
        "--figures results/figures --captions workflow/report --out {output} > {log} 2>&1"
