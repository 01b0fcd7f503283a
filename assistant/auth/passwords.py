"""Password hashing with Argon2id (argon2-cffi's defaults follow RFC 9106's recommended profile)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from assistant.core.errors import InvalidRequestError

MIN_PASSWORD_CHARS = 8
_hasher = PasswordHasher()
# Verified against when the user does not exist, so that a wrong name costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash("not-a-real-password")


def check_password_policy(password: str) -> None:
    """Refuse passwords too short to protect an account.

    Raises:
        InvalidRequestError: fewer than `MIN_PASSWORD_CHARS` characters.
    """
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidRequestError(
            f"password has {len(password)} characters; at least {MIN_PASSWORD_CHARS} are required"
        )


def hash_password(password: str) -> str:
    """The Argon2id hash of `password` (PHC string format, salt included).

    Raises:
        InvalidRequestError: the password breaks the policy (see `check_password_policy`).
    """
    check_password_policy(password)
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches `password_hash`; a missing hash still spends one verification."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with weaker parameters than the current ones."""
    return _hasher.check_needs_rehash(password_hash)
