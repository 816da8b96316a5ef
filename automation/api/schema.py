"""How the delivery credential appears in the OpenAPI schema."""

from __future__ import annotations

from workspaces.api.schema import CredentialScheme


class DeliveryScheme(CredentialScheme):
    target_class = "automation.authentication.DeliveryCredentialAuthentication"
    name = "delivery"
    definition = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Delivery dlv_...`: the credential of one admitted assistant turn.",
    }
