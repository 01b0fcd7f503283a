"""Where state lives: the data folder, the database and the vector store."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from assistant.core.urls import DatabaseUrlText, HttpUrlText


class StorageSettings(BaseModel):
    """Where state lives: the data folder, the database and the vector store.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    data_dir: Path = Path("./var")
    database_url: DatabaseUrlText | None = Field(
        default=None, description="SQLAlchemy URL; default: a SQLite file under data_dir"
    )
    vector_store: Literal["edge", "qdrant"] = "edge"
    qdrant_url: HttpUrlText | None = Field(default=None, description="Qdrant server URL (vector_store=qdrant)")
    qdrant_path: Path | None = Field(
        default=None, description="qdrant-client local mode folder (vector_store=qdrant, no server)"
    )
    qdrant_api_key: SecretStr | None = None
    collection: str = "chunks"
    qdrant_shard_number: int | None = Field(
        default=None, ge=1, description="shards of a collection created on a Qdrant server (distributed mode); unset: the server's default",
    )
    qdrant_replication_factor: int | None = Field(
        default=None, ge=1, description="copies of each shard on a Qdrant cluster (2 survives one node); unset: the server's default",
    )
