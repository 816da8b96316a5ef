"""The web frame's workspace pages: sign-in and sign-out, the workspace list, Settings.

Page views are thin: they resolve the caller's membership through the same selector the
API uses (another team's workspace is a 404), call the same services, and render. Writes
of memory and notes happen in the browser, through the JSON API, so that each Save is one
direct compare-and-set request whose acknowledged version the page knows exactly.

Key sessions. The assistant reads and writes memory only through a live key session of
the sender. The frame opens one per browser session and workspace at the member's first
visit of a workspace page (`key_session_for_browser`, which finds it again by the browser
session); sign-out revokes every one it opened, and each ends with its browser session
however that ends (checked on use). This is done here, in the view functions, not with
login/logout signals (house rule).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from axes import helpers as axes_helpers
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timeuntil
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from workspaces import selectors, services
from workspaces.authentication import ACTIVE_TEAM_SESSION_KEY
from workspaces.errors import (
    ConsentRevisionConflict,
    CredentialOwnerInactive,
    KeySessionStoreUnavailable,
    NotFound,
    OrgPendingDeletion,
    WorkspaceAdminRequired,
)
from workspaces.forms import AiConsentForm
from workspaces.models import Team, TeamMembership, User, Workspace, WorkspaceMembership


class SignInView(LoginView):
    template_name = "workspaces/sign_in.html"
    redirect_authenticated_user = True


def sign_in_locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """django-axes' answer to a locked-out sign-in (AXES_LOCKOUT_CALLABLE), web frame and
    /admin/ alike. Its own answer gave no Retry-After, wrote the wait as "0:15:00", and to a
    request marked XMLHttpRequest answered JSON naming the account, open to every origin."""
    cool_off = axes_helpers.get_cool_off(request) or timedelta(0)
    now = timezone.now()
    context = {
        "failure_limit": axes_helpers.get_failure_limit(request, credentials),
        "wait": timeuntil(now + cool_off, now),
    }
    response = render(request, "workspaces/locked_out.html", context, status=429)
    response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response


@require_http_methods(["GET", "HEAD", "POST"])
def sign_out(request: HttpRequest) -> HttpResponse:
    """POST: revoke the key sessions this browser session opened, then sign out.

    GET (the address typed or bookmarked) and HEAD only show the sign-out button: signing
    out on either would let any page, image or prefetch sign a member out.
    """
    if request.method in {"GET", "HEAD"}:
        if not request.user.is_authenticated:
            return redirect("workspaces:sign-in")
        return render(request, "workspaces/sign_out.html")
    if request.user.is_authenticated and request.session.session_key is not None:
        services.key_sessions_end_for_browser(
            user=_user(request), browser_session_key=request.session.session_key
        )
    logout(request)
    # After logout: the message must outlive the session that logout just flushed.
    messages.info(request, "You have been signed out.")
    return redirect("workspaces:sign-in")


@login_required
@require_safe
def workspace_list(request: HttpRequest) -> HttpResponse:
    team = request_team(request)
    # A closed org's members still reach this page (and only this one): it says when the
    # purge is due instead of listing workspaces that every route refuses.
    purge_due_at = None if team is None or team.org.is_active else team.org.deletion_due_at
    workspaces = (
        []
        if team is None or purge_due_at is not None
        else list(selectors.workspace_list_for_member(user=_user(request), team=team))
    )
    context = {
        "team": team,
        "purge_due_at": purge_due_at,
        "workspaces": workspaces,
        "frame_config": {
            "urls": {
                "workspaces": reverse("workspace-list"),
                # The new workspace's id replaces the 0.
                "frame": reverse("memory:frame", kwargs={"workspace_id": 0}),
            }
        },
    }
    return render(request, "workspaces/list.html", context)


@dataclass(frozen=True)
class WorkspacePage:
    """What every workspace page needs: the caller's membership and the assistant's key
    session for this browser (None if the member revoked it)."""

    membership: WorkspaceMembership
    key_session_id: uuid.UUID | None

    @property
    def workspace(self) -> Workspace:
        return self.membership.workspace


def team_page(request: HttpRequest) -> Team:
    """The team a team-wide page shows: refused for someone in no team, and for a closed
    org, whose routes all refuse, with the time its purge is due."""
    team = request_team(request)
    if team is None:
        raise PermissionDenied("You are not a member of any team.")
    with _closed_org_refused():
        selectors.org_require_active(org=team.org)
    return team


def workspace_page(request: HttpRequest, workspace_id: int) -> WorkspacePage:
    """Resolve a workspace page's membership (404 for another team's workspace) and make
    sure this browser session holds a key session for it."""
    team = team_page(request)
    try:
        # The org is checked again with the membership: it may close in between.
        with _closed_org_refused():
            membership = selectors.workspace_membership_get(
                user=_user(request), team=team, workspace_id=workspace_id
            )
    except NotFound:
        raise Http404("No such workspace.") from None
    return WorkspacePage(
        membership=membership, key_session_id=_key_session_ensure(request, membership)
    )


@login_required
@require_safe
def workspace_settings(request: HttpRequest, workspace_id: int) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    sessions = selectors.key_session_liveness(
        sessions=list(
            selectors.key_session_list_for_user(
                user=page.membership.user, workspace=page.workspace
            )[:100]
        )
    )
    context = {
        "workspace": page.workspace,
        "membership": page.membership,
        "key_session_id": page.key_session_id,
        "active_page": "settings",
        "key_sessions": [
            {
                "session": session,
                "is_live": is_live,
                "is_this_browser": session.pk == page.key_session_id,
            }
            for session, is_live in sessions
        ],
        "ai_form": AiConsentForm(
            initial={
                "enabled": "0" if page.workspace.ai_enabled else "1",
                "expected_revision": page.workspace.ai_consent_revision,
            }
        ),
        "addable_people": (
            selectors.team_members_outside_workspace(workspace=page.workspace)
            if page.membership.is_admin
            else []
        ),
        # Members and tokens are read and changed in the page, through the JSON API.
        "frame_config": {
            "workspaceId": page.workspace.pk,
            "userId": page.membership.user.pk,
            "isAdmin": page.membership.is_admin,
            "urls": {
                "members": reverse(
                    "workspace-member-list", kwargs={"workspace_id": page.workspace.pk}
                ),
                "tokens": reverse("token-list"),
                "workspaces": reverse("workspaces:list"),
            },
        },
    }
    return render(request, "workspaces/settings.html", context)


def settings_form(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """`login_required` for the target of a Settings form, whose session may end while the
    form is open. Signing in returns to `next` with a GET, which the POST-only target would
    refuse with a blank 405: `next` is Settings instead, and the sign-in page says that
    nothing was changed."""

    @wraps(view)
    def wrapped(request: HttpRequest, workspace_id: int, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            messages.info(
                request,
                "You were signed out, so nothing was changed. Sign in, then do it again.",
            )
            return redirect_to_login(
                reverse("workspaces:settings", kwargs={"workspace_id": workspace_id})
            )
        return view(request, workspace_id, **kwargs)

    return wrapped


@settings_form
@require_POST
def workspace_ai_set(request: HttpRequest, workspace_id: int) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    form = AiConsentForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "Not changed: the form was not complete; reload the page and try again. "
            "(VALIDATION_FAILED)",
        )
        return redirect("workspaces:settings", workspace_id=workspace_id)
    try:
        workspace = services.workspace_ai_consent_set(
            workspace=page.workspace,
            enabled=form.cleaned_data["enabled"],
            expected_revision=form.cleaned_data["expected_revision"],
            actor=page.membership.user,
        )
    except WorkspaceAdminRequired:
        raise PermissionDenied("Only an admin of this workspace may change workspace AI.") from None
    except ConsentRevisionConflict:
        # The service has re-read the workspace: it shows the setting as it is now.
        state = "on" if page.workspace.ai_enabled else "off"
        messages.error(
            request,
            f"Not changed: workspace AI was switched elsewhere first, and it is {state} now. "
            "(CONSENT_REVISION_CONFLICT)",
        )
    else:
        state = "on" if workspace.ai_enabled else "off"
        messages.success(request, f"Workspace AI is {state}.")
    return redirect("workspaces:settings", workspace_id=workspace_id)


@settings_form
@require_POST
def key_session_open(request: HttpRequest, workspace_id: int) -> HttpResponse:
    """Open a fresh key session for this browser (after the member revoked the last one)."""
    page = workspace_page(request, workspace_id)
    try:
        services.key_session_for_browser(
            workspace=page.workspace,
            user=page.membership.user,
            browser_session_key=_browser_session_key(request),
            reopen=True,
        )
    except (KeySessionStoreUnavailable, CredentialOwnerInactive) as unavailable:
        # No cache, or deactivated since this request signed in (the next is signed out).
        messages.error(request, unavailable.message)
        return redirect("workspaces:settings", workspace_id=workspace_id)
    messages.success(request, "Opened a new key session for the assistant in this browser.")
    return redirect("workspaces:settings", workspace_id=workspace_id)


@settings_form
@require_POST
def key_session_revoke(
    request: HttpRequest, workspace_id: int, session_id: uuid.UUID
) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    team = page.workspace.team
    try:
        session = selectors.key_session_get_for_owner(
            user=page.membership.user, team=team, session_id=session_id
        )
    except NotFound:
        raise Http404("No such key session.") from None
    if session.workspace_id != page.workspace.pk:
        raise Http404("No such key session.")
    services.key_session_revoke(session=session, revoked_by=page.membership.user)
    messages.success(
        request,
        "Key session revoked. The assistant can no longer use this workspace's key through it.",
    )
    return redirect("workspaces:settings", workspace_id=workspace_id)


def request_team(request: HttpRequest) -> Team | None:
    """The signed-in member's active team, chosen exactly as the API's session
    authentication chooses it, so pages and the API calls they make agree on the tenant."""
    memberships = TeamMembership.objects.select_related("team__org").filter(user=_user(request))
    chosen = request.session.get(ACTIVE_TEAM_SESSION_KEY)
    membership = (chosen and memberships.filter(team_id=chosen).first()) or (
        memberships.order_by("team_id").first()
    )
    if membership is None:
        return None
    if chosen != membership.team_id:
        request.session[ACTIVE_TEAM_SESSION_KEY] = membership.team_id
    return membership.team


@contextmanager
def _closed_org_refused() -> Iterator[None]:
    """A closed org's page is a 403 that says when its data is purged."""
    try:
        yield
    except OrgPendingDeletion as closed:
        due: datetime = closed.detail["deletionDueAt"]
        raise PermissionDenied(
            "This organisation is scheduled for deletion and its workspaces are closed. Its "
            f"data is purged at the first nightly purge after {due:%Y-%m-%d %H:%M} UTC."
        ) from None


def _user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Sign in first.")
    return user


def _key_session_ensure(request: HttpRequest, membership: WorkspaceMembership) -> uuid.UUID | None:
    """This browser's key session for the workspace (opened at the first visit), or None if
    the member revoked it or the cache cannot be reached."""
    try:
        session = services.key_session_for_browser(
            workspace=membership.workspace,
            user=membership.user,
            browser_session_key=_browser_session_key(request),
        )
    except (KeySessionStoreUnavailable, CredentialOwnerInactive):
        # No session now; a person deactivated meanwhile is signed out at the next request.
        return None
    return None if session is None else session.pk


def _browser_session_key(request: HttpRequest) -> str:
    """The signed-in browser session's key (saved now if it has none yet, which a session
    that has signed in always has)."""
    if request.session.session_key is None:
        request.session.save()
    return str(request.session.session_key)
