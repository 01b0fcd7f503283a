"""Bodies of the ingestion jobs API (`assistant.api.routes.jobs`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.api.schemas.common import AclManifestField


class SyncCreate(BaseModel):
    path: str = Field(min_length=1, max_length=4096, description="a folder or file on the server")
    acl: AclManifestField = None
