"""Authentication of agent runtimes by the delivery credential of one admitted turn."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from automation.models import Admission
from automation.selectors import admission_by_credential_digest
from automation.tokens import DELIVERY_PREFIX
from workspaces.models import User
from workspaces.selectors import org_require_active
from workspaces.tokens import bearer_secret_digest


@dataclass(frozen=True)
class DeliveryGrant:
    """What a delivery credential authenticates: exactly one admission, and nothing wider."""

    admission: Admission


class DeliveryCredentialAuthentication(BaseAuthentication):
    """`Authorization: Delivery dlv_...`, the credential minted for one admitted turn.

    The credential names its admission; whether that admission may still act (a newer
    turn, an expiry, a mode change) is decided by the route, so that a superseded
    runtime gets the precise reason instead of a bare 401.
    """

    def authenticate(self, request: Request) -> tuple[User, DeliveryGrant] | None:
        scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "delivery":
            return None
        raw = raw.strip()
        if not raw.startswith(DELIVERY_PREFIX):
            raise AuthenticationFailed("Malformed delivery credential.", code="TOKEN_INVALID")
        admission = admission_by_credential_digest(bearer_secret_digest(raw))
        if admission is None or not admission.owner.is_active:
            raise AuthenticationFailed("Delivery credential invalid.", code="TOKEN_INVALID")
        org_require_active(org=admission.workspace.team.org)
        return admission.owner, DeliveryGrant(admission=admission)

    def authenticate_header(self, request: Request) -> str:
        return 'Delivery realm="automation"'
