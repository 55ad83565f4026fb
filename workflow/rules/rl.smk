# Agentic RL baselines (grpo, grpo_b, ppo): one training job per run, writing its kept
# checkpoints (rl/gen{k:03d}, evaluated like ES checkpoints), trajectories and ledger.
rule rl_train:
    wildcard_constraints:
        method=RL_METHOD,
    input:
        lambda w: spec_of(w).model,
    output:
        checkpoints=directory(f"{RUN}/rl"),
        ledger=f"{RUN}/ledger.parquet",
        trajectories=f"{RUN}/trajectories.parquet",
    params:
        spec=spec_json,
    threads: EVAL_THREADS
    log:
        f"logs/{RUN}/rl_train.log",
    benchmark:
        f"results/benchmarks/{RUN_REL}/rl_train.tsv"
    shell:
        "esopt stage rl --spec {params.spec:q} "
        "--out {output.checkpoints} "
        "--threads {threads} > {log} 2>&1"
