"""How the delivery credential appears in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class DeliveryScheme(OpenApiAuthenticationExtension):
    target_class = "automation.authentication.DeliveryCredentialAuthentication"
    name = "delivery"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Delivery dlv_...`: the credential of one admitted assistant turn.",
        }
