"""Bodies of the command line's local ingestion (`assistant.api.routes.local_ingest`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.api.schemas.common import AclManifestField


class LocalSyncCreate(BaseModel):
    path: str = Field(min_length=1, max_length=4096, description="an absolute folder or file path on this machine")
    acl: AclManifestField = None


class LocalSyncStop(BaseModel):
    by: str = Field(min_length=1, max_length=200, description="who stops it: the command line's user, `cli:NAME`")


class LocalSourceRemove(BaseModel):
    path: str = Field(min_length=1, max_length=4096, description="the source's absolute folder or file path")
    by: str = Field(min_length=1, max_length=200, description="who removes it: the command line's user, `cli:NAME`")
