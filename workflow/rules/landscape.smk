# Figure 6: the training reward on a grid theta + x sigma_0 eps_a + y sigma_0 eps_b around
# the final checkpoint of one ES run per H* (esopt.pipeline.landscape).
rule landscape:
    wildcard_constraints:
        method=f"{ES_METHOD}|{ASYNC_METHOD}",
    input:
        final_checkpoint_input,
    output:
        f"{RUN}/landscape.parquet",
    params:
        spec=spec_json,
        checkpoint=final_checkpoint,
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
