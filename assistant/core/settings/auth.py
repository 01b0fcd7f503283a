"""Sign-in: the signing key, browser sessions, throttling of failed sign-ins, the first admin."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class AuthSettings(BaseModel):
    """Sign-in: the signing key, browser sessions, throttling of failed sign-ins, the first admin.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    secret_key: SecretStr | None = Field(
        default=None,
        description="signs session cookies; default: a random key generated once into data_dir/secret-key "
        "(required in production, where several processes must share it)",
    )
    session_cookie_name: str = "assistant_session"
    session_cookie_secure: bool | None = Field(
        default=None,
        description="Secure flag of the session cookie; default: on in production, off in development (http://127.0.0.1)",
    )
    session_max_age_s: int = Field(default=8 * 3600, ge=60, description="browser session lifetime in seconds")
    login_max_failures: int = Field(
        default=10, ge=1, description="failed sign-ins of one account from one address before its back-off begins (429)"
    )
    login_failure_window_s: int = Field(default=900, ge=1, description="seconds failures are remembered, and the longest back-off")
    login_backoff_base_s: float = Field(
        default=2.0, gt=0,
        description="seconds one account name waits from one client address after login_max_failures failures "
        "from there; doubled on each further failure, at most login_failure_window_s",
    )
    bootstrap_admin_name: str = Field(default="admin", min_length=1, max_length=255)
    bootstrap_admin_password: SecretStr | None = Field(
        default=None,
        description="password of the first admin `assistant serve` creates on an empty database; "
        "default: generated and printed once",
    )
