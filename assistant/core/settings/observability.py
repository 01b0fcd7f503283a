"""Metrics, logs and the doctor's checks."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class ObservabilitySettings(BaseModel):
    """Metrics, logs and the doctor's checks.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    metrics_token: SecretStr | None = Field(
        default=None, description="bearer token Prometheus presents to /metrics (admins may always read it); unset: admins only",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto", description="json: one JSON object per line with the request ID; auto: json in production, text otherwise",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    prometheus_multiproc_dir: Path | None = Field(
        default=None,
        description="prometheus-client's multiprocess folder (its own variable, PROMETHEUS_MULTIPROC_DIR, unprefixed): "
        "set when several processes serve the API; `assistant serve --workers N` sets it to DATA_DIR/prometheus",
    )
    doctor_min_free_bytes: int = Field(
        default=5 * 1024**3, ge=0, description="free disk space under data_dir below which `assistant doctor` reports a problem",
    )
