configfile: "config/config.yaml"


include: "workflow/rules/model.smk"


rule all:
    input:
        f"resources/models/{config['model']}/manifest.json",
