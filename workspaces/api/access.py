"""Per-object authorization shared by every app's views."""

from __future__ import annotations

from rest_framework.request import Request

from workspaces.authentication import request_credential
from workspaces.errors import NotFound, OrgPendingDeletion
from workspaces.models import WorkspaceMembership
from workspaces.selectors import workspace_membership_get

# What `caller_membership` refuses with, for the schema of every route that calls it.
MEMBER_REFUSALS = (NotFound, OrgPendingDeletion)


def caller_membership(request: Request, workspace_id: int) -> WorkspaceMembership:
    """The caller's membership of the workspace, within the credential's team, or 404."""
    credential = request_credential(request)
    return workspace_membership_get(
        user=credential.user, team=credential.team, workspace_id=workspace_id
    )
