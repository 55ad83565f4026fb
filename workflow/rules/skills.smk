rule distill_skill:
    input:
        sources=skill_sources,
        writer=lambda w: spec_of(w).model,
    output:
        "results/{exp}/h{h}/{method}/seed{seed}/skill/SKILL.md",
    params:
        spec=spec_json,
        trace2skill=trace2skill_settings,
        episodes=lambda w, input: [p.replace(".done.json", "") for p in input.sources],
    threads: EVAL_THREADS
    log:
        "logs/results/{exp}/h{h}/{method}/seed{seed}/skill/distill.log",
    shell:
        "esopt stage distill --spec {params.spec:q} --generation 0 "
        "--trace2skill {params.trace2skill:q} "
        "--checkpoint {input.writer} --episodes {params.episodes} --out {output} > {log} 2>&1"


rule skill_eval:
    input:
        checkpoint=lambda w: checkpoint_input(spec_of(w), spec_of(w).generations),
        skill="results/{exp}/h{h}/{method}/seed{seed}/skill/SKILL.md",
    output:
        "results/{exp}/h{h}/{method}/seed{seed}/skill/eval.parquet",
    params:
        spec=spec_json,
        gen=lambda w: spec_of(w).generations,
        checkpoint=lambda w: checkpoint_dir(spec_of(w), spec_of(w).generations),
    threads: EVAL_THREADS
    log:
        "logs/results/{exp}/h{h}/{method}/seed{seed}/skill/eval.log",
    shell:
        "esopt stage eval --spec {params.spec:q} "
        "--generation {params.gen} "
        "--checkpoint {params.checkpoint} --skill {input.skill} --out {output} > {log} 2>&1"

