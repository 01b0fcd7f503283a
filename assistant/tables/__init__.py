"""Large sheets kept as queryable tables: loaded into duckdb at ingestion, described by one table card (issue 40)."""
