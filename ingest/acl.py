"""ACL manifests for folder sources: which principals may read each file."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assistant.core.errors import InvalidRequestError
from assistant.core.principals import EVERYONE, parse_acl


@dataclass(frozen=True)
class AclRule:
    pattern: str
    allow: tuple[str, ...]


@dataclass(frozen=True)
class AclManifest:
    """`default` applies to every file; the last rule whose glob matches the relative path wins.

    Globs use fnmatch semantics on POSIX relative paths (`*` also crosses `/`; `**` works too).
    """

    default: tuple[str, ...] = (EVERYONE,)
    rules: tuple[AclRule, ...] = field(default_factory=tuple)

    def acl_for(self, relative_path: str) -> list[str]:
        """ACL entries for one file (relative to the source root, `/`-separated)."""
        acl = self.default
        for rule in self.rules:
            if fnmatch.fnmatchcase(relative_path, rule.pattern):
                acl = rule.allow
        return list(acl)

    def to_dict(self) -> dict[str, Any]:
        return {"default": list(self.default), "rules": [{"path": r.pattern, "allow": list(r.allow)} for r in self.rules]}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, origin: str = "manifest") -> "AclManifest":
        """Build from the YAML structure `{default: [...], rules: [{path, allow}]}`.

        Raises:
            InvalidRequestError: a missing key, a bad entry or an empty allow list, naming where.
        """
        if not data:
            return cls()
        if not isinstance(data, dict):
            raise InvalidRequestError(f"{origin}: expected a mapping with 'default' and 'rules'")
        default = tuple(parse_acl(data.get("default") or [EVERYONE]))
        rules = []
        for i, rule in enumerate(data.get("rules") or []):
            if not isinstance(rule, dict) or "path" not in rule or "allow" not in rule:
                raise InvalidRequestError(f"{origin}: rule {i + 1} needs 'path' and 'allow'")
            allow = parse_acl(rule["allow"] if isinstance(rule["allow"], list) else [rule["allow"]])
            if not allow:
                raise InvalidRequestError(f"{origin}: rule {i + 1} ({rule['path']}) allows nobody")
            rules.append(AclRule(str(rule["path"]).lstrip("/"), tuple(allow)))
        return cls(default=default, rules=tuple(rules))

    @classmethod
    def load(cls, path: Path) -> "AclManifest":
        """Read a YAML manifest file."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidRequestError(f"ACL manifest {path}: {exc}") from exc
        return cls.from_dict(data, origin=f"ACL manifest {path}")
