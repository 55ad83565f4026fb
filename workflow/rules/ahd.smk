rule ahd_search:
    input:
        lambda w: ahd_run_of(w).model,
    output:
        summary=f"{AHD_DIR}/summary.json",
        candidates=f"{AHD_DIR}/candidates.parquet",
        updates=f"{AHD_DIR}/updates.parquet",
    params:
        spec=lambda w: ahd_run_of(w).to_json(),
        out=lambda w: ahd_run_of(w).run_dir,
    threads: EVAL_THREADS
    log:
        f"logs/{AHD_DIR}/search.log",
    benchmark:
        f"results/benchmarks/{AHD_REL}/search.tsv"
    shell:
        "esopt ahd run --spec {params.spec:q} --out {params.out} --threads {threads} "
        "> {log} 2>&1"


rule ahd_references:
    output:
        "results/ahd/references.json",
    params:
        problems=" ".join(sorted({r.problem for r in AHD_RUNS})),
        instances=ahd_instances_flag,
    log:
        "logs/ahd/references.log",
    shell:
        "esopt ahd references --problems {params.problems} {params.instances} --out {output} "
        "> {log} 2>&1"


rule ahd_run_index:
    output:
        "results/ahd/runs.json",
    params:
        runs=lambda w: json.dumps([json.loads(r.to_json()) for r in AHD_RUNS]),
    log:
        "logs/ahd/run_index.log",
    shell:
        "echo {params.runs:q} > {output} 2> {log}"

