"""How the API's credentials appear in the OpenAPI schema."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class CredentialScheme(OpenApiAuthenticationExtension):
    """A credential's security scheme, stated as data in `definition`. This base matches no
    authentication class (it has no `target_class`); each subclass names its own."""

    definition: ClassVar[dict[str, Any]]

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return self.definition


def bearer(description: str) -> dict[str, Any]:
    """An `Authorization: Bearer` credential, told apart from the others by `description`."""
    return {"type": "http", "scheme": "bearer", "description": description}


class BearerScheme(CredentialScheme):
    target_class = "workspaces.authentication.BearerAuthentication"
    name = "bearer"
    definition = bearer("A personal access token (iap_...) or a short-lived JWT.")


class SessionScheme(CredentialScheme):
    target_class = "workspaces.authentication.TeamSessionAuthentication"
    name = "session"
    definition = {
        "type": "apiKey",
        "in": "cookie",
        "name": "sessionid",
        "description": "The web frame's session; writes also need X-CSRFToken.",
    }


class BotBearerScheme(CredentialScheme):
    target_class = "workspaces.authentication.BotBearerAuthentication"
    name = "botBearer"
    definition = bearer("A bot's token (iap_..., scope `bot`): the bot is the caller.")
