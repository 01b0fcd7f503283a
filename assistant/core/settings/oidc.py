"""Single sign-on through OpenID Connect."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from assistant.core.urls import HttpUrlText


class OidcSettings(BaseModel):
    """Single sign-on through OpenID Connect.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    issuer_url: HttpUrlText | None = Field(default=None, description="OpenID Connect issuer, e.g. https://sso.example.com/realms/x")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    scopes: str = "openid email profile"
    redirect_url: HttpUrlText | None = Field(
        default=None, description="public URL of /api/auth/oidc/callback; default: derived from the request"
    )
    username_claim: str = Field(default="preferred_username", description="claim naming the local user")
    groups_claim: str = Field(default="groups", description="claim listing the user's IdP groups")
    group_map: dict[str, str] = Field(
        default_factory=dict,
        description="IdP group -> local group (JSON in the environment); unmapped IdP groups are ignored",
    )

    @property
    def enabled(self) -> bool:
        """True when single sign-on through OpenID Connect is configured."""
        return bool(self.issuer_url)
