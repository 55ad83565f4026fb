rule evaluate_directions:
    wildcard_constraints:
        method=ES_METHOD,
    input:
        directions_input,
    output:
        f"{RUN}/gen{{gen}}/directions.done.json",
    params:
        spec=spec_json,
        out=lambda w, output: output[0].replace(".done.json", ""),
    threads: FANOUT_THREADS
    log:
        f"logs/{RUN}/gen{{gen}}/directions.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/gen{{gen}}/directions.tsv"
    shell:
        "esopt stage directions --spec {params.spec:q} "
        "--generation {wildcards.gen} "
        "--checkpoint {input} --out {params.out} --marker {output} > {log} 2>&1"


rule reduce_rewards:
    wildcard_constraints:
        method=ES_METHOD,
    input:
        f"{RUN}/gen{{gen}}/directions.done.json",
    output:
        f"{RUN}/gen{{gen}}/rewards.parquet",
    params:
        spec=spec_json,
        directions=lambda w, input: input[0].replace(".done.json", ""),
    log:
        f"logs/{RUN}/gen{{gen}}/reduce.log",
    shell:
        "esopt stage reduce --spec {params.spec:q} "
        "--generation {wildcards.gen} "
        "--directions {params.directions} --out {output} > {log} 2>&1"


rule update_kept:
    input:
        unpack(update_input),
    output:
        checkpoint=directory(f"{RUN}/gen{{gen}}/checkpoint"),
        record=f"{RUN}/gen{{gen}}/update.json",
    wildcard_constraints:
        gen=KEPT_GEN,
        method=ES_METHOD,
    params:
        spec=spec_json,
        parent=lambda w: int(w.gen) - 1,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/gen{{gen}}/update.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/gen{{gen}}/update.tsv"
    shell:
        UPDATE_SHELL


# Intermediate checkpoints are deleted once the next generation no longer needs them.
rule update_temp:
    input:
        unpack(update_input),
    output:
        checkpoint=temp(directory(f"{RUN}/gen{{gen}}/checkpoint")),
        record=f"{RUN}/gen{{gen}}/update.json",
    wildcard_constraints:
        gen=f"(?!{KEPT_GEN})[0-9]{{3}}",
        method=ES_METHOD,
    params:
        spec=spec_json,
        parent=lambda w: int(w.gen) - 1,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/gen{{gen}}/update.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/gen{{gen}}/update.tsv"
    shell:
        UPDATE_SHELL


rule es_ledger:
    wildcard_constraints:
        method=ES_METHOD,
    input:
        es_ledger_input,
    output:
        f"{RUN}/ledger.parquet",
    params:
        spec=spec_json,
    log:
        f"logs/{RUN}/ledger.log",
    shell:
        "esopt stage ledger --spec {params.spec:q} "
        "--out {output} > {log} 2>&1"


# Bounded-staleness asynchronous ES: the deterministic schedule in one coordinator job
# (esopt.pipeline.async_run), writing its kept checkpoints, schedule and ledger.
rule async_train:
    wildcard_constraints:
        method=ASYNC_METHOD,
    input:
        lambda w: spec_of(w).model,
    output:
        checkpoints=directory(f"{RUN}/async"),
        ledger=f"{RUN}/ledger.parquet",
    params:
        spec=spec_json,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/async_train.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/async_train.tsv"
    shell:
        "esopt stage async --spec {params.spec:q} "
        "--out {output.checkpoints} "
        "--ledger {output.ledger} --threads {threads} > {log} 2>&1"
