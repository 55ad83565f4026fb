rule evaluate_checkpoint:
    input:
        eval_input,
    output:
        f"{RUN}/eval/gen{{gen}}.parquet",
    params:
        spec=spec_json,
        checkpoint=eval_checkpoint,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/eval/gen{{gen}}.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/eval/gen{{gen}}.tsv"
    shell:
        "esopt stage eval --spec {params.spec:q} "
        "--generation {wildcards.gen} "
        "--checkpoint {params.checkpoint} --out {output} > {log} 2>&1"


rule final_eval:
    input:
        final_eval_input,
    output:
        f"{RUN}/final/eval.parquet",
    log:
        f"logs/{RUN}/final_eval.log",
    shell:
        "cp {input} {output} 2> {log}"
