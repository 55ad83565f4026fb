import re

from esopt.models import EMBEDDED_MODELS


rule fetch_model:
    output:
        directory("resources/models/{name}"),
    wildcard_constraints:
        name="|".join(re.escape(n) for n in EMBEDDED_MODELS),
    log:
        "logs/model/{name}.log",
    shell:
        "esopt model fetch {wildcards.name} --out {output} > {log} 2>&1"


rule tiny_random_model:
    input:
        "resources/models/smollm2-135m-instruct",
    output:
        directory(f"resources/models/{TINY_RANDOM}"),
    log:
        f"logs/model/{TINY_RANDOM}.log",
    shell:
        "esopt model tiny --out {output} --tokenizer-from {input} > {log} 2>&1"


rule fetch_hub_model:
    output:
        directory("resources/models/hub/{owner}--{repo}"),
    log:
        "logs/model/hub/{owner}--{repo}.log",
    shell:
        "esopt model fetch-hub {wildcards.owner}/{wildcards.repo} --out {output} > {log} 2>&1"
