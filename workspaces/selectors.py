"""Reads with tenancy: every lookup is bounded by the caller's team and membership."""

from __future__ import annotations

from django.db.models import QuerySet

from workspaces.errors import NotFound
from workspaces.models import ApiToken, Team, User, Workspace, WorkspaceMembership


def workspace_list_for_member(*, user: User, team: Team) -> QuerySet[Workspace]:
    return Workspace.objects.filter(team=team, memberships__user=user).order_by("pk")


def workspace_membership_get(*, user: User, team: Team, workspace_id: int) -> WorkspaceMembership:
    """Return the caller's membership of a workspace in their team.

    A workspace of another team and one the caller is not a member of are the same
    404, so a probe learns nothing about what exists elsewhere.
    """
    membership = (
        WorkspaceMembership.objects.select_related("workspace")
        .filter(user=user, workspace_id=workspace_id, workspace__team=team)
        .first()
    )
    if membership is None:
        raise NotFound("No such workspace.")
    return membership


def api_token_list_for_user(*, user: User, team: Team) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user, team=team).order_by("-created_at", "-pk")


def api_token_get_for_user(*, user: User, team: Team, token_id: int) -> ApiToken:
    token = ApiToken.objects.filter(user=user, team=team, pk=token_id).first()
    if token is None:
        raise NotFound("No such token.")
    return token
