"""The library side of the Snakemake pipeline: resolved run specs and one function per stage."""
