rule fetch_model:
    output:
        manifest="resources/models/{name}/manifest.json",
    log:
        "logs/model/{name}.log",
    shell:
        "esopt model fetch {wildcards.name} --out resources/models/{wildcards.name} > {log} 2>&1"
