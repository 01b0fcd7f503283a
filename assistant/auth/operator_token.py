"""The token with which `assistant backup` on the server's machine asks the running server to back up.

Derived from the key that signs session cookies (HMAC-SHA256 over a fixed label): whoever can read
that key (ASSISTANT_SECRET_KEY or DATA_DIR/secret-key) can already forge any session, so the token
grants nothing new, and it needs no file or setting of its own.
"""

from __future__ import annotations

import hashlib
import hmac

from assistant.auth.signing import signing_key
from assistant.core.settings import Settings

_LABEL = b"assistant operator token v1"


def operator_token(settings: Settings) -> str:
    """The operator token of this deployment (64 hex digits)."""
    return hmac.new(signing_key(settings).encode(), _LABEL, hashlib.sha256).hexdigest()


def is_operator_token(settings: Settings, presented: str) -> bool:
    """Whether `presented` is this deployment's operator token (compared in constant time)."""
    return hmac.compare_digest(presented.encode(), operator_token(settings).encode())
