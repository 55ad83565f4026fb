# Figure 6: the training reward on a grid theta + x sigma_0 eps_a + y sigma_0 eps_b around
# theta, the base model or the final checkpoint of one ES run per H* (landscape.centre;
# esopt.pipeline.landscape).
rule landscape:
    wildcard_constraints:
        method=f"{ES_METHOD}|{ASYNC_METHOD}",
    input:
        landscape_input,
    output:
        f"{RUN}/landscape.parquet",
    params:
        spec=spec_json,
        checkpoint=landscape_checkpoint,
        options=landscape_options,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/landscape.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/landscape.tsv"
    shell:
        "esopt stage landscape --spec {params.spec:q} "
        "--checkpoint {params.checkpoint} "
        "{params.options} --out {output} > {log} 2>&1"
