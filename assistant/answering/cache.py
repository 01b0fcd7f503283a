"""Answer cache for frequent questions, never shared across ACL scopes, invalidated by document changes.

The key is the normalised question, the reader's ACL scope (`Principal.scope_key`), the LoRA adapter
that answers the reader (`AdapterRouter.choose`: the live adapter of the reader's audience, or its canary
for a stable share of users; none for the base model) and the index version (collection, embedding
model, LLM and prompt settings), so two readers who may open different documents never share an entry,
and an answer written by one adapter is never served to a reader whom another adapter answers (a canary
answer to a live reader, or, after a promote or rollback, a retired adapter's answer to anyone). An entry remembers the content hash of every document its answer was
generated from; a hit is served only if each of them still exists, still has that hash and is still
readable by the asker (`readable_versions`): an edited, deleted or newly restricted document makes
the entry stale, and it is dropped. Answers with history and abstentions are not cached (an
abstention cites nothing that could invalidate it when a document arrives).

Stores: an in-process LRU with a TTL (default), or Redis shared by several API processes.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Protocol

import redis

from assistant.core.principals import Principal

KEY_PREFIX = "assistant:answer:"
_TRAILING_PUNCT = re.compile(r"[\s?？!！.。,，;；:：]+$")

VersionsFn = Callable[[Iterable[str], Principal], dict[str, str]]


def normalise_question(question: str) -> str:
    """The question as a cache key part: NFKC, case-folded, white space collapsed, end punctuation dropped."""
    text = unicodedata.normalize("NFKC", question).casefold()
    return _TRAILING_PUNCT.sub("", " ".join(text.split()))


@dataclass
class CachedAnswer:
    """A cached answer: its text, citations (as `Citation.to_dict()`), the versions it rests on, and
    its `finish_reason` ("length" when it was cut at `max_tokens`; entries from before it say "stop"),
    the LoRA adapter that wrote it (None: the base model), and what the evidence check made of it when it
    was written, served again with it so that a hit is weighed as the first answer was (issue 42: a cached
    helpdesk answer reported `sentences` 0): `grounding` (`grounded_stream.grounding_report`, or
    `part_answers.combined_grounding`), `parts` (`Done.parts` of a question of several parts) and
    `quoted`; None where there was none (a table answer) or in entries from before."""

    answer: str
    citations: list[dict]
    doc_versions: dict[str, str]
    created_at: float
    finish_reason: str = "stop"
    adapter: str | None = None
    grounding: dict | None = None
    parts: list[dict] | None = None
    quoted: bool | None = None


class CacheStore(Protocol):
    """Where entries live: bytes by key with a time to live."""

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes, ttl_s: float) -> None: ...

    def delete(self, key: str) -> None: ...


class MemoryStore:
    """A thread-safe LRU of at most `max_entries`, each expiring `ttl_s` after it was set."""

    def __init__(self, max_entries: int, *, clock=time.monotonic):
        self.max_entries = max_entries
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        """The value, or None when absent or expired."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if item[0] <= self._clock():
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return item[1]

    def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store `value`, evicting the least recently used entries beyond `max_entries`."""
        with self._lock:
            self._items[key] = (self._clock() + ttl_s, value)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def delete(self, key: str) -> None:
        """Forget `key` (no error if absent)."""
        with self._lock:
            self._items.pop(key, None)


class RedisStore:
    """Entries in Redis (shared by every API process), expiring by Redis TTL. Redis being down is a
    cache miss, never an error.

    Args:
        url: `redis://host:port/db`.
    """

    def __init__(self, url: str):
        self._redis = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._errors = (OSError, redis.exceptions.RedisError)

    def get(self, key: str) -> bytes | None:
        """The value, or None when absent or Redis cannot be reached."""
        try:
            return self._redis.get(key)
        except self._errors:
            return None

    def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store `value` for `ttl_s` seconds (best effort)."""
        try:
            self._redis.set(key, value, px=max(1, int(ttl_s * 1000)))
        except self._errors:
            pass

    def delete(self, key: str) -> None:
        """Forget `key` (best effort)."""
        try:
            self._redis.delete(key)
        except self._errors:
            pass


class AnswerCache:
    """Looks up and stores answers per (question, ACL scope, adapter, index version).

    Args:
        store: a `MemoryStore` or `RedisStore`.
        versions: `(doc_ids, principal) -> {doc_id: content_hash}` of the documents the principal may
            read now (`assistant.core.db.documents.readable_versions` bound to the database).
        index_version: identifies the index and generation settings; a change empties the cache
            logically (old keys are never asked for again and expire).
        ttl_s: seconds an entry lives.
    """

    def __init__(self, store: CacheStore, *, versions: VersionsFn, index_version: str, ttl_s: float = 3600.0):
        self.store = store
        self._versions = versions
        self.index_version = index_version
        self.ttl_s = ttl_s
        self.hits = 0
        self.misses = 0

    def key(self, question: str, principal: Principal, adapter: str | None = None) -> str:
        """The store key: a SHA-256 over index version, ACL scope, adapter name ("" for the base model)
        and normalised question."""
        raw = "\x00".join((self.index_version, principal.scope_key, adapter or "", normalise_question(question)))
        return KEY_PREFIX + hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get(self, question: str, *, principal: Principal, adapter: str | None = None) -> CachedAnswer | None:
        """The cached answer to `question` for `principal`'s scope written by `adapter` (the adapter
        that answers `principal` now; None: the base model), if every document it rests on is unchanged
        and still readable by `principal`; a stale entry is deleted.

        Returns:
            The entry, or None (a miss).
        """
        key = self.key(question, principal, adapter)
        raw = self.store.get(key)
        if raw is None:
            self.misses += 1
            return None
        entry = CachedAnswer(**json.loads(raw))
        current = self._versions(list(entry.doc_versions), principal)
        if not entry.doc_versions or any(current.get(d) != h for d, h in entry.doc_versions.items()):
            self.store.delete(key)
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def forget(self, question: str, *, principal: Principal, adapter: str | None = None) -> None:
        """Delete the cached answer to `question` for `principal`'s scope written by `adapter` (None: the
        base model), if any: a reader rated it down, so the next asker of that scope gets a new one."""
        self.store.delete(self.key(question, principal, adapter))

    def put(
        self, question: str, *, principal: Principal, answer: str, citations: list[dict], doc_ids: Iterable[str],
        finish_reason: str = "stop", adapter: str | None = None, grounding: dict | None = None,
        parts: list[dict] | None = None, quoted: bool | None = None,
    ) -> bool:
        """Cache an answer generated from the documents `doc_ids` (all sources in its prompt) by `adapter`
        (the LoRA adapter that wrote it; None: the base model), and why its generation ended
        (`finish_reason`, "stop" or "length"), its `grounding` report, `parts` and `quoted` (`CachedAnswer`),
        all of which a hit reports again.

        Returns:
            True if stored; False when no document backs it (nothing could ever invalidate it) or one
            is no longer readable.
        """
        ids = sorted(set(doc_ids))
        versions = self._versions(ids, principal)
        if not ids or set(versions) != set(ids):
            return False
        entry = CachedAnswer(
            answer=answer, citations=citations, doc_versions=versions, created_at=time.time(),
            finish_reason=finish_reason, adapter=adapter, grounding=grounding, parts=parts, quoted=quoted,
        )
        self.store.set(self.key(question, principal, adapter), json.dumps(asdict(entry)).encode("utf-8"), self.ttl_s)
        return True


def index_version(*parts: object) -> str:
    """A short stable digest of what answers depend on besides the documents (model names, settings)."""
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode("utf-8")).hexdigest()[:16]
