"""Files uploaded through the web app."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class UploadsSettings(BaseModel):
    """Files uploaded through the web app.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    dir: Path | None = Field(
        default=None, description="where uploaded files are kept while their documents exist; default: DATA_DIR/uploads"
    )
    max_files: int = Field(default=20, ge=1, description="files accepted in one upload request")
    max_request_bytes: int = Field(
        default=256 * 1024 * 1024, ge=1024, description="largest upload request body (all its files), in bytes"
    )
