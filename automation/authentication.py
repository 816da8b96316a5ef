"""Authentication of agent runtimes by the delivery credential of one admitted turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from automation.models import Admission
from automation.selectors import (
    RecallFacts,
    admission_by_credential_digest,
    admission_with_recall_facts_by_credential_digest,
)
from workspaces.errors import OrgPendingDeletion
from workspaces.models import User
from workspaces.selectors import org_require_active
from workspaces.tokens import DELIVERY_PREFIX, bearer_secret_digest


@dataclass(frozen=True)
class DeliveryGrant:
    """What a delivery credential authenticates: exactly one admission, and nothing wider.
    On the recall route, also the live facts its recall decides on, read with it."""

    admission: Admission
    recall_facts: RecallFacts | None = None


class DeliveryCredentialAuthentication(BaseAuthentication):
    """`Authorization: Delivery dlv_...`, the credential minted for one admitted turn.

    The credential names its admission; whether that admission may still act (a newer
    turn, an expiry, a mode change) is decided by the route, so that a superseded
    runtime gets the precise reason instead of a bare 401.

    `with_recall_facts` is for the recall route, which runs before every model call: the
    lookup then also reads the live facts the recall decides on (`DeliveryGrant.recall_facts`),
    one statement instead of two.
    """

    # What it refuses a credential with, for the schema of every route it serves.
    refusals: ClassVar[tuple[type[Exception], ...]] = (AuthenticationFailed, OrgPendingDeletion)

    def __init__(self, *, with_recall_facts: bool = False) -> None:
        self.with_recall_facts = with_recall_facts

    def authenticate(self, request: Request) -> tuple[User, DeliveryGrant] | None:
        scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "delivery":
            return None
        raw = raw.strip()
        if not raw.startswith(DELIVERY_PREFIX):
            raise AuthenticationFailed("Malformed delivery credential.", code="TOKEN_INVALID")
        grant = self._grant_find(bearer_secret_digest(raw))
        if grant is None or not grant.admission.owner.is_active:
            raise AuthenticationFailed("Delivery credential invalid.", code="TOKEN_INVALID")
        org_require_active(org=grant.admission.workspace.team.org)
        return grant.admission.owner, grant

    def _grant_find(self, digest: str) -> DeliveryGrant | None:
        if self.with_recall_facts:
            found = admission_with_recall_facts_by_credential_digest(digest, now=timezone.now())
            return None if found is None else DeliveryGrant(*found)
        admission = admission_by_credential_digest(digest)
        return None if admission is None else DeliveryGrant(admission=admission)

    def authenticate_header(self, request: Request) -> str:
        return 'Delivery realm="automation"'
