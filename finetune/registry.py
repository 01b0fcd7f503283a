"""Registering what a refresh produced: a candidate adapter's name, folder, files and training figures
in the SQL registry (`assistant.adapters.store`), and its failure with the reason."""

from __future__ import annotations

import re
from pathlib import Path

from assistant.adapters import store as registry_db
from assistant.core.db.models import utcnow
from assistant.core.db.session import Database
from finetune.config import FinetuneConfig


def adapter_name(audience: str, job_id: int) -> str:
    """The name the model server knows an adapter by: audience, UTC date and job (`everyone-20261202-7`)."""
    slug = re.sub(r"[^a-z0-9]+", "-", audience.casefold()).strip("-")
    return f"{slug}-{utcnow():%Y%m%d}-{job_id}"


def adapter_dir(config: FinetuneConfig, name: str) -> Path:
    """The folder of adapter `name` (PEFT files, checkpoints while training)."""
    return config.root / "adapters" / name


def log_path(config: FinetuneConfig, name: str) -> Path:
    """The training log of adapter `name` (JSON lines of step, loss, learning rate)."""
    return config.root / "logs" / f"{name}.jsonl"


def register_candidate(db: Database, config: FinetuneConfig, *, audience: str, snapshot_id: int,
                       job_id: int) -> registry_db.AdapterRecord:
    """A new `candidate` adapter for `audience`, trained on snapshot `snapshot_id` with `config`'s LoRA values."""
    name = adapter_name(audience, job_id)
    record = registry_db.add_adapter(
        db, name=name, audience=audience, base_model=config.base_model, snapshot_id=snapshot_id, job_id=job_id,
        hyperparameters=config.lora.to_dict(),
    )
    return registry_db.update_adapter(db, record.id, path=str(adapter_dir(config, name)))


def mark_failed(db: Database, adapter_id: int, reason: str) -> None:
    """Mark a candidate `failed` with `reason` (the live adapter is left as it is)."""
    registry_db.set_status(db, adapter_id, "failed", by="finetune", reason=reason)
