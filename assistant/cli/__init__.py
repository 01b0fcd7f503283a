"""The `assistant` command line (Typer + Rich)."""
