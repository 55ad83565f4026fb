"""Tables, figures and the report PDF, read from the pipeline's Parquet outputs."""
