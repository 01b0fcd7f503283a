"""ACL manifests for folder sources: which principals may read each file, and which personal data
(`assistant.core.pii_kinds`) is masked before its chunks are embedded."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assistant.core.errors import InvalidRequestError, not_utf8
from assistant.core.pii_kinds import PII_KINDS
from assistant.core.principals import EVERYONE, parse_acl


def _entries(value: Any, where: str) -> list[str]:
    """ACL entries from a list or a single string; refuses an empty list and non-string items."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise InvalidRequestError(f"{where} must be a list of principals such as [everyone, 'group:finance']")
    if not items:
        raise InvalidRequestError(f"{where} is empty: nobody could read these files; name at least one principal")
    try:
        return parse_acl(items)
    except InvalidRequestError as exc:
        raise InvalidRequestError(f"{where}: {exc.message}") from exc


def _pii_kinds(value: Any, origin: str) -> tuple[str, ...]:
    """`mask_pii: true` (every kind), `false`, or a list of `PII_KINDS`."""
    if value is True:
        return PII_KINDS
    if value is False or value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items) or set(items) - set(PII_KINDS):
        raise InvalidRequestError(
            f"{origin}: 'mask_pii' must be true, false or a list of {', '.join(PII_KINDS)}; got {value!r}"
        )
    return tuple(k for k in PII_KINDS if k in items)


def _globstar_variants(pattern: str) -> set[str]:
    """`pattern` and every form of it with some `**/` segments taken as zero folders:
    `a/**/*.md` -> {`a/**/*.md`, `a/*.md`}, as globstar (bash, gitignore) reads it."""
    out, todo = set(), [pattern]
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        if p.startswith("**/"):
            todo.append(p[3:])
        start = p.find("/**/")
        while start != -1:
            todo.append(p[:start] + p[start + 3 :])
            start = p.find("/**/", start + 1)
    return out


@dataclass(frozen=True)
class AclRule:
    """`allow` applies to the files `pattern` matches: the file or folder of that literal path
    (a folder named `HR [confidential]` included), or the files its glob matches (`finance/**`,
    `*.xlsx`, `legal/**/*.pdf`, which also covers `legal/x.pdf`)."""

    pattern: str
    allow: tuple[str, ...]

    def matches(self, relative_path: str) -> bool:
        """Whether the rule covers one file (relative to the source root, `/`-separated)."""
        folder = self.pattern.rstrip("/")
        if relative_path == folder or relative_path.startswith(folder + "/"):
            return True
        if not any(ch in self.pattern for ch in "*?["):
            return False
        return any(fnmatch.fnmatchcase(relative_path, p) for p in _globstar_variants(self.pattern))


@dataclass(frozen=True)
class AclManifest:
    """`default` applies to every file; the last rule whose glob matches the relative path wins.

    Globs use fnmatch semantics on POSIX relative paths (`*` also crosses `/`), with `**/` also
    matching zero folders; a rule's literal path matches first, glob characters and all.
    """

    default: tuple[str, ...] = (EVERYONE,)
    rules: tuple[AclRule, ...] = field(default_factory=tuple)
    # Personal data masked in the chunks before embedding (of `PII_KINDS`); empty: none.
    mask_pii: tuple[str, ...] = ()

    def acl_for(self, relative_path: str) -> list[str]:
        """ACL entries for one file (relative to the source root, `/`-separated)."""
        acl = self.default
        for rule in self.rules:
            if rule.matches(relative_path):
                acl = rule.allow
        return list(acl)

    def unmatched(self, relative_paths: list[str]) -> list[str]:
        """The rule paths that match none of `relative_paths` (likely typos: they protect nothing)."""
        return [rule.pattern for rule in self.rules if not any(rule.matches(p) for p in relative_paths)]

    def rooted(self, pattern: str, relative_paths: list[str]) -> tuple[str, int] | None:
        """The rule path `pattern` as it was probably meant, for a rule that matches none of
        `relative_paths` because it was written relative to a sub-folder (`departments/finance/**`
        for files under `handbook/departments/finance/`): the pattern behind the shortest leading
        folder that makes it match, and how many of `relative_paths` it then matches. None when no
        leading folder does."""
        best: tuple[str, int] | None = None
        for prefix in sorted({"/".join(p.split("/")[:i]) for p in relative_paths for i in range(1, p.count("/") + 1)}):
            rule = AclRule(f"{prefix}/{pattern.lstrip('/')}", ())
            matched = sum(1 for p in relative_paths if rule.matches(p))
            if matched and (best is None or len(rule.pattern) < len(best[0])):
                best = (rule.pattern, matched)
        return best

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"default": list(self.default), "rules": [{"path": r.pattern, "allow": list(r.allow)} for r in self.rules]}
        if self.mask_pii:
            out["mask_pii"] = list(self.mask_pii)
        return out

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "ACL manifest") -> AclManifest:
        """Build from the YAML structure `{default: [...], rules: [{path, allow}]}`.

        `default` and `allow` take a list of entries or a single entry (`default: everyone`).
        Nothing is guessed: an empty manifest, an unknown key (a typo such as `defaults` would
        otherwise leave a restricted folder open to everyone), an empty `default` or `allow` list
        (nobody, admins included, could read the files) and a rule without `path` are refused.

        Raises:
            InvalidRequestError: naming the manifest (`origin`), the rule and the problem.
        """
        if data is None or data == {}:
            raise InvalidRequestError(f"{origin} is empty: give at least 'default: [everyone]' or a list of principals")
        if not isinstance(data, dict):
            raise InvalidRequestError(f"{origin}: expected a mapping with the keys 'default' and 'rules', got {type(data).__name__}")
        unknown = sorted(set(map(str, data)) - {"default", "rules", "mask_pii"})
        if unknown:
            raise InvalidRequestError(
                f"{origin}: unknown key(s) {', '.join(unknown)}; the keys are 'default', 'rules' and 'mask_pii'"
            )
        default = (EVERYONE,) if "default" not in data else tuple(_entries(data["default"], f"{origin}: 'default'"))
        raw_rules = data.get("rules") or []
        if not isinstance(raw_rules, list):
            raise InvalidRequestError(f"{origin}: 'rules' must be a list of {{path, allow}} mappings")
        rules = []
        for i, rule in enumerate(raw_rules, start=1):
            if not isinstance(rule, dict) or not rule.get("path") or "allow" not in rule:
                raise InvalidRequestError(f"{origin}: rule {i} needs 'path' and 'allow'")
            extra = sorted(set(map(str, rule)) - {"path", "allow"})
            if extra:
                raise InvalidRequestError(f"{origin}: rule {i} ({rule['path']}) has unknown key(s) {', '.join(extra)}")
            allow = _entries(rule["allow"], f"{origin}: rule {i} ({rule['path']}) 'allow'")
            pattern = str(rule["path"]).strip()
            while pattern.startswith(("./", "/")):
                pattern = pattern[1:] if pattern.startswith("/") else pattern[2:]
            rules.append(AclRule(pattern, tuple(allow)))
        return cls(default=default, rules=tuple(rules), mask_pii=_pii_kinds(data.get("mask_pii", False), origin))

    @classmethod
    def load(cls, path: Path) -> AclManifest:
        """Read a YAML manifest file."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise not_utf8(f"ACL manifest {path}", exc) from exc
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidRequestError(f"ACL manifest {path}: {exc}") from exc
        return cls.from_dict(data, origin=f"ACL manifest {path}")
