"""The key that signs session cookies, and the one file it may be kept in.

Settings hold values only; reading or writing `data_dir/secret-key` happens here, when the server starts.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.core.errors import ConfigError

if TYPE_CHECKING:  # `assistant search` handed to the server reads the key without importing the settings
    from assistant.core.settings import Settings

KEY_FILE = "secret-key"


def signing_key(settings: Settings) -> str:
    """The key that signs session cookies: `settings.secret_key`, else the one in `data_dir/secret-key`.

    That file is created on first use with 256 random bits, readable by its owner only, so that a
    machine without configuration never signs cookies with a key known to anyone else. Several
    processes starting at once agree on one key (the file is published with an exclusive link).

    Raises:
        ConfigError: the file holds a key shorter than 16 characters.
    """
    if settings.auth.secret_key is not None:
        return settings.auth.secret_key.get_secret_value()
    path = settings.storage.data_dir / KEY_FILE
    key = stored_key(settings.storage.data_dir)
    if key is not None:
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f"{KEY_FILE}.{os.getpid()}.tmp")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_urlsafe(32))
    try:
        os.link(draft, path)  # atomic and exclusive: a process that lost the race reads the winner's key
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return path.read_text(encoding="ascii").strip()


def stored_key(data_dir: Path) -> str | None:
    """The key kept in `data_dir/secret-key`, or None when there is no such file (`signing_key` makes it).

    Raises:
        ConfigError: the file holds a key shorter than 16 characters.
    """
    path = data_dir / KEY_FILE
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    if len(key) < 16:
        raise ConfigError(f"{path} holds a key of {len(key)} characters; delete the file to generate a new one")
    return key


# --- issue 19: the local command line hands ingestion to the running server ---
def local_ingest_token(settings: Settings) -> str:
    """The token by which `assistant ingest` on the server's own machine proves it may start a sync
    of any local path through the running server (`/api/local/ingest`).

    It is an HMAC-SHA256 of a fixed label under the signing key (`signing_key`), so only a process
    that can read the server's key (its data folder, or its ASSISTANT_SECRET_KEY) can compute it.

    Returns:
        64 hex characters.
    """
    return local_token(signing_key(settings))


def local_token(key: str) -> str:
    """`local_ingest_token` of the signing key `key`: 64 hex characters."""
    return hmac.new(key.encode("utf-8"), b"assistant local ingest v1", hashlib.sha256).hexdigest()
