"""Pieces of request and response bodies that more than one route module's bodies use."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

# An ACL manifest sent with a sync (`assistant.auth.acl_manifest.AclManifest.from_dict` checks it).
AclManifestField = Annotated[dict[str, Any] | None, Field(description="ACL manifest: {default, rules}")]
