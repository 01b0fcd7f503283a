"""Principals (who is asking) and ACL tokens (who may read): `everyone`, `group:NAME`, `user:NAME`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from assistant.core.errors import InvalidRequestError

EVERYONE = "everyone"
# `everyone` is the ACL token of all readers and `anonymous` the CLI's principal without --as: no
# account takes these names, and no ACL may name them as a user or group.
RESERVED_NAMES = frozenset({EVERYONE, "anonymous"})
_TOKEN = re.compile(r"^(everyone|user:[^\s:]+|group:[^\s:]+)$")


def parse_acl(entries: list[str] | tuple[str, ...]) -> list[str]:
    """Validate and normalise ACL entries; returns them sorted and de-duplicated.

    Raises:
        InvalidRequestError: an entry is not `everyone`, `user:NAME` or `group:NAME`, or names a
            reserved name (`user:anonymous` would open the documents to every reader without --as).
    """
    out = set()
    for entry in entries:
        token = str(entry).strip()
        if not _TOKEN.match(token):
            raise InvalidRequestError(
                f"ACL entry {entry!r} is not 'everyone', 'user:NAME' or 'group:NAME'"
            )
        if token != EVERYONE and token.split(":", 1)[1].casefold() in RESERVED_NAMES:
            raise InvalidRequestError(
                f"ACL entry {entry!r} names a reserved name ({', '.join(sorted(RESERVED_NAMES))}); "
                "use 'everyone' for all readers"
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
    is_auditor: bool = False  # reads the audit trail; documents only through its ACL tokens

    @property
    def acl_tokens(self) -> list[str]:
        """Every ACL entry that grants this principal access, sorted (stable for cache keys). A
        reserved name (the CLI's `anonymous`) carries no `user:` token: it reads what `everyone` may."""
        tokens = {EVERYONE} | {f"group:{g}" for g in self.groups}
        if self.name.casefold() not in RESERVED_NAMES:
            tokens.add(f"user:{self.name}")
        return sorted(tokens)

    @property
    def scope_key(self) -> str:
        """A key identifying what this principal can read (for caches): its ACL tokens joined."""
        return "|".join(self.acl_tokens)


# Acts for callers that are not signed in on the CLI: reads only documents open to everyone.
ANONYMOUS = Principal(name="anonymous")


def may_read(acl: list[str] | None, principal: Principal) -> bool:
    """True when one of the principal's ACL tokens is in `acl` (an empty ACL admits nobody)."""
    return bool(set(acl or ()) & set(principal.acl_tokens))
