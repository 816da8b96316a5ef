"""Who calls an automation document route: an agent runtime with a turn's delivery
credential, or a member's client (token, JWT or session), as the document service's actor."""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from automation.authentication import DeliveryCredentialAuthentication, DeliveryGrant
from automation.selectors import document_actor_for_turn
from memory.documents import ActorKind, DocumentActor
from memory_project.api.views import ApiView
from workspaces.api.access import caller_membership
from workspaces.authentication import BearerAuthentication, TeamSessionAuthentication
from workspaces.errors import NotFound


class AutomationDocumentView(ApiView):
    # Any of these, then `caller_document_actor` makes the caller a document actor. (A
    # docstring here would become every route's description in the schema.)
    authentication_classes: list[type[BaseAuthentication]] = [
        BearerAuthentication,
        DeliveryCredentialAuthentication,
        TeamSessionAuthentication,
    ]


def caller_document_actor(request: Request, workspace_id: int) -> DocumentActor:
    """The caller as a document actor: the assistant for a delivery credential (which
    reaches only its turn's workspace; any other workspace id is the same 404 as one that
    does not exist), else a client acting as its member."""
    grant = request.auth
    if isinstance(grant, DeliveryGrant):
        if grant.admission.workspace_id != workspace_id:
            raise NotFound("No such workspace.")
        return document_actor_for_turn(admission=grant.admission)
    return DocumentActor.of_member(caller_membership(request, workspace_id), ActorKind.CLIENT)
