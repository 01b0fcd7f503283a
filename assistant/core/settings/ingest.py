"""Chunking, per-file parsing limits and ingestion throughput (a file over a limit fails alone with a reason naming the setting)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class IngestSettings(BaseModel):
    """Chunking, per-file parsing limits and ingestion throughput (a file over a limit fails alone with a reason naming the setting).

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    chunk_size_tokens: int = Field(
        default=0, ge=0, description="0 = the embedding model's own limit minus special tokens"
    )
    chunk_overlap_tokens: int = Field(default=32, ge=0)
    max_file_size_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="largest file parsed")
    max_pages: int = Field(default=5000, ge=1, description="most PDF pages or slides per document")
    max_decompressed_bytes: int = Field(
        default=1024 * 1024 * 1024, ge=1, description="most bytes a zip-based file (DOCX, XLSX, EPUB...) unpacks to"
    )
    max_sheet_cells: int = Field(default=2_000_000, ge=1, description="most spreadsheet/CSV cells per file")
    max_sheet_rows: int = Field(
        default=1_000_000, ge=1,
        description="most spreadsheet/CSV rows indexed per file; the rows beyond are left out and the status says so",
    )
    parse_timeout_s: float = Field(
        default=120.0, gt=0, description="wall-clock seconds one file's parse may take before its process is killed"
    )
    parse_memory_limit_bytes: int = Field(
        default=2 * 1024**3, ge=64 * 1024**2,
        description="address space (RLIMIT_AS) a parse may use beyond the parser process's start-up size",
    )
    parse_part_chunks: int = Field(
        default=256, ge=1,
        description="chunks the parser process hands over at a time: a big file (a 200,000-row workbook) is embedded "
        "and written a part at a time, so memory stays bounded whatever its length",
    )
    embedding_batch_chunks: int = Field(
        default=512, ge=1, description="chunks gathered across files before one embedding call"
    )
    optimize_min_points: int = Field(
        default=1000, ge=1,
        description="a sync that writes at least this many points optimises the Qdrant Edge collection after it",
    )
    embedding_cache_max_vectors: int = Field(
        default=1_000_000, ge=0,
        description="most vectors the ingestion embedding cache keeps (oldest dropped first; 1M x 384-d is about 1.6 GB)",
    )
    via_server: bool = Field(
        default=True,
        description="`assistant ingest` hands its work to a running `assistant serve` that holds the embedded store",
    )
    source_roots: list[Path] = Field(
        default_factory=list,
        description="folders on the server under which admins may start syncs through the API (JSON list); "
        "empty: the API starts none (the CLI is not limited)",
    )
