"""The `ebb` command line (typer)."""
