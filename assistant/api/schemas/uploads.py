"""Bodies of uploads (`assistant.api.routes.uploads`); an upload itself is `assistant.core.db.uploads.UploadPublic`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class AudienceOption(BaseModel):
    """An audience the caller may give an upload: `value` is its ACL entry."""

    value: str
    kind: Literal["me", "group", "everyone"]
    name: str
