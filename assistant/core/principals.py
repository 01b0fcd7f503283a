"""Principals (who is asking) and ACL tokens (who may read): `everyone`, `group:NAME`, `user:NAME`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from assistant.core.errors import InvalidRequestError

EVERYONE = "everyone"
_TOKEN = re.compile(r"^(everyone|user:[^\s:]+|group:[^\s:]+)$")


def parse_acl(entries: list[str] | tuple[str, ...]) -> list[str]:
    """Validate and normalise ACL entries; returns them sorted and de-duplicated.

    Raises:
        InvalidRequestError: an entry is not `everyone`, `user:NAME` or `group:NAME`.
    """
    out = set()
    for entry in entries:
        token = str(entry).strip()
        if not _TOKEN.match(token):
            raise InvalidRequestError(
                f"ACL entry {entry!r} is not 'everyone', 'user:NAME' or 'group:NAME'"
            )
        out.add(token)
    return sorted(out)


@dataclass(frozen=True)
class Principal:
    """A user or service account with its groups. `acl_tokens` is what the vector filter matches."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    is_admin: bool = False
    is_service: bool = False
    user_id: int | None = None

    @property
    def acl_tokens(self) -> list[str]:
        """Every ACL entry that grants this principal access, sorted (stable for cache keys)."""
        tokens = {EVERYONE, f"user:{self.name}"} | {f"group:{g}" for g in self.groups}
        return sorted(tokens)

    @property
    def scope_key(self) -> str:
        """A key identifying what this principal can read (for caches): its ACL tokens joined."""
        return "|".join(self.acl_tokens)


# Acts for callers that are not signed in on the CLI: reads only documents open to everyone.
ANONYMOUS = Principal(name="anonymous")
