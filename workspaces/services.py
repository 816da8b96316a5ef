"""Every state change of tenancy, membership, tokens and workspace AI consent."""

from __future__ import annotations

import functools
import logging
import secrets
import uuid
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.backends.db import SessionStore
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Model, Q, Sum
from django.http import HttpRequest
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from memory_project.cache import cache_get_and_touch
from workspaces.counters import tenant_counter_charge
from workspaces.crypto import (
    WrappedKeyField,
    ciphertext_digest,
    data_key_generate,
    data_key_unwrap,
    deployment_key_id,
    revision_associated_data,
    seal,
    unwrapped_keys_forget,
)
from workspaces.errors import (
    CACHE_ERRORS,
    AlreadyMember,
    ConsentRevisionConflict,
    CredentialKindRefused,
    CredentialOwnerInactive,
    DocumentExists,
    DocumentTooLarge,
    InvalidText,
    KeySessionStoreUnavailable,
    KeySessionUnavailable,
    LastTeamOwner,
    LastWorkspaceAdmin,
    NameTaken,
    NotFound,
    NotTeamMember,
    OrgPendingDeletion,
    OrgStateConflict,
    TeamOwnerRequired,
    ValidationFailed,
    VersionConflict,
    WorkspaceAdminRequired,
)
from workspaces.lookalikes import display_name_validator
from workspaces.models import (
    ApiToken,
    AuditEvent,
    Bot,
    File,
    FileVersion,
    KeySession,
    KeySessionRevocation,
    Org,
    Team,
    TeamMembership,
    TeamStorageUsage,
    User,
    Workspace,
    WorkspaceKey,
    WorkspaceMembership,
    key_session_cache_key,
)
from workspaces.ratelimit import client_address
from workspaces.selectors import team_owner_is, workspace_data_key
from workspaces.sql import (
    Cursor,
    datetime_param,
    driver_cursor,
    fetch_one,
    key_session_revoked,
    loaded,
    pk_param,
    table,
    user_with_browser_session,
)
from workspaces.tokens import bearer_secret_digest, jwt_encode, pat_generate
from workspaces.violations import violation_code, violation_raises

if TYPE_CHECKING:
    from workspaces.authentication import Credential, CredentialKind

logger = logging.getLogger(__name__)

# How fresh a token's `last_used_at` is kept: a use within this of the last stamp writes
# nothing, so a busy token costs one UPDATE a minute, not one per request.
TOKEN_USE_RESOLUTION = timedelta(minutes=1)


def workspace_create(*, team: Team, name: str, admin: User, ai_enabled: bool = False) -> Workspace:
    """Create a workspace in a team, with `admin`, its creator, as its first admin. A name
    the team already has is NameTaken, and nothing is created."""
    with transaction.atomic():
        with violation_raises(NameTaken, name=name):
            workspace = Workspace.objects.create(team=team, name=name, ai_enabled=ai_enabled)
        team_membership_ensure(team=team, user=admin)
        WorkspaceMembership.objects.create(
            workspace=workspace, user=admin, role=WorkspaceMembership.Role.ADMIN
        )
        workspace_audit_record(
            actor=admin,
            action=AuditEvent.Action.WORKSPACE_CREATED,
            workspace=workspace,
            target_type="workspace",
            target_id=workspace.pk,
            detail={"teamId": team.pk, "aiEnabled": ai_enabled},
        )
    return workspace


def workspace_member_add(
    *,
    workspace: Workspace,
    actor: User,
    user_id: int | None = None,
    username: str | None = None,
    role: str = WorkspaceMembership.Role.MEMBER,
) -> WorkspaceMembership:
    """Add a member of the workspace's team, named by id or by username, to the workspace.

    Only an admin of the workspace may (`WorkspaceAdminRequired`). A workspace never pulls
    anyone into its team: a person who is not an active member of it is `NotTeamMember`,
    the same answer as for no such person. One already a member is `AlreadyMember`.
    """
    _workspace_admin_require(workspace=workspace, user=actor)
    named: dict[str, Any]
    lookup: dict[str, object]
    if user_id is not None:
        # Through the user's own id, not the foreign key's column: the ORM then answers an id
        # past the column's range as no row, where SQLite would refuse to bind it.
        named, lookup = {"userId": user_id}, {"user__id": user_id}
    else:
        named, lookup = {"username": username}, {"user__username": username}
    with transaction.atomic():
        # Locked, so a removal from the team either ends this membership too or comes
        # first and leaves nobody to add (`team_member_remove`).
        team_membership = (
            TeamMembership.objects.select_for_update(of=("self",))
            .select_related("user")
            .filter(team_id=workspace.team_id, user__is_active=True, **lookup)
            .first()
        )
        if team_membership is None:
            raise NotTeamMember(**named)
        with violation_raises(AlreadyMember, userId=team_membership.user_id):
            membership = WorkspaceMembership.objects.create(
                workspace=workspace, user=team_membership.user, role=role
            )
        _member_audit(
            actor=actor,
            action=AuditEvent.Action.MEMBER_ADDED,
            workspace=workspace,
            member_id=team_membership.user_id,
            detail={"role": role},
        )
    return membership


def workspace_member_remove(*, workspace: Workspace, actor: User, user_id: int) -> None:
    """Remove a member from the workspace: an admin may remove anyone, and anyone may
    remove themselves (leave). Another's removal by a non-admin is `WorkspaceAdminRequired`;
    a person who is not a member is `NotFound`.

    The workspace keeps at least one admin (`LastWorkspaceAdmin`). The workspace's
    memberships are locked in primary-key order first, so two admins removing each other at
    once are serialized and the second sees that the other is the last. The removed
    person's key sessions on the workspace are revoked in the same transaction: the
    assistant loses their authority there at once. What they wrote, their conversations
    included, stays with the workspace, out of their reach, since every read is a member's.
    """
    with transaction.atomic():
        members = _members_locked(workspace=workspace, actor=actor)
        if user_id != actor.pk and not members.acting.is_admin:
            raise WorkspaceAdminRequired()
        _membership_end(
            workspace=workspace,
            members=members,
            user_id=user_id,
            actor=actor,
            detail={"left": user_id == actor.pk},
        )


def team_member_remove(*, membership: TeamMembership, actor: User) -> None:
    """Remove a person from a team, and so from each of its workspaces, by staff (`actor`).

    Every workspace membership ends as `workspace_member_remove` ends one, in one
    transaction: their key sessions there are revoked (the keys leave the cache on commit)
    and each removal is audited as `member_removed` with `"team": true`. A workspace of
    which they are the only admin refuses the whole removal (`LastWorkspaceAdmin`, nothing
    changed): staff make another member its admin first, as an admin leaving would. The
    team's only owner is refused too (`LastTeamOwner`), as demoting them is.

    The team's membership rows are locked first, as a role change locks them (so two
    removals of its two owners cannot each see the other still there): a workspace add,
    which locks the person's row too, then either sees them gone or is among the
    memberships ended here.
    """
    with transaction.atomic():
        removed = _TeamMember.locked(membership)
        removed.owner_loss_refuse()
        removed.membership.delete()
        # One workspace after another in primary-key order, each one's rows locked as a
        # workspace removal locks them, so this and those serialize without deadlocking.
        workspaces = Workspace.objects.filter(
            team_id=membership.team_id, memberships__user_id=membership.user_id
        ).order_by("pk")
        for workspace in workspaces:
            _membership_lock_and_end(workspace, membership.user_id, actor, team=True)


def team_membership_staff_role_set(
    *, membership: TeamMembership, actor: User, role: str
) -> TeamMembership:
    """Change a person's role in a team by staff (`actor`, in the admin), audited as
    `member_role_changed` naming the team. The team keeps an owner (`LastTeamOwner`): its
    memberships are locked in primary-key order, so two demotions cannot each see the other
    owner still there. Setting the role they already have changes and records nothing."""
    with transaction.atomic():
        locked = _TeamMember.locked(membership)
        changed = locked.membership
        if changed.role == role:
            return changed
        locked.owner_loss_refuse()
        previous, changed.role = changed.role, role
        changed.save(update_fields=["role"])
        audit_record(
            actor=actor,
            action=AuditEvent.Action.MEMBER_ROLE_CHANGED,
            org_id=_audit_org_id(pk=changed.team_id),
            target_type="user",
            target_id=changed.user_id,
            detail={"from": previous, "to": role, "teamId": changed.team_id},
        )
        return changed


def team_membership_staff_add(*, team: Team, user: User, role: str, actor: User) -> TeamMembership:
    """Make `user` a member of `team` with `role`, by staff (`actor`, in the admin), audited
    as `member_added` naming the team (`"staff": true`). Someone already in it is
    `AlreadyMember`, nothing changed."""
    with transaction.atomic():
        with violation_raises(AlreadyMember):
            membership = TeamMembership.objects.create(team=team, user=user, role=role)
        audit_record(
            actor=actor,
            action=AuditEvent.Action.MEMBER_ADDED,
            org_id=team.org_id,
            target_type="user",
            target_id=user.pk,
            detail={"role": role, "teamId": team.pk, "staff": True},
        )
    return membership


@dataclass(frozen=True)
class _TeamMember:
    """One membership of a team, locked with every other of the team, and who its owners
    are under those locks."""

    membership: TeamMembership
    owner_pks: frozenset[int]

    @classmethod
    def locked(cls, membership: TeamMembership) -> _TeamMember:
        """Lock every membership of `membership`'s team in primary-key order (one order for
        every writer, so two changes to its two owners serialize instead of deadlocking or
        each seeing the other still there); `NotFound` if `membership` is gone."""
        memberships = list(
            TeamMembership.objects.select_for_update()
            .filter(team_id=membership.team_id)
            .order_by("pk")
        )
        locked = next((m for m in memberships if m.pk == membership.pk), None)
        if locked is None:
            raise NotFound("No such team member.", userId=membership.user_id)
        owners = frozenset(m.pk for m in memberships if m.role == TeamMembership.Role.OWNER)
        return cls(membership=locked, owner_pks=owners)

    def owner_loss_refuse(self) -> None:
        """`LastTeamOwner` when the membership, about to be removed or demoted, is its
        team's only owner."""
        if self.owner_pks == {self.membership.pk}:
            raise LastTeamOwner()


def _membership_lock_and_end(
    workspace: Workspace, user_id: int, actor: User, **detail: object
) -> None:
    """Lock `workspace`'s memberships, then end `user_id`'s (not by their own leaving):
    the removals staff and team removal make, one workspace at a time."""
    _membership_end(
        workspace=workspace,
        members=_Members.locked(workspace),
        user_id=user_id,
        actor=actor,
        detail={"left": False, **detail},
    )


def _membership_end(
    *,
    workspace: Workspace,
    members: _Members,
    user_id: int,
    actor: User,
    detail: dict[str, object],
) -> None:
    """End `user_id`'s membership of `workspace`, whose rows `members` holds locked, unless
    they are its last admin: revoke their key sessions there, and audit it."""
    removed = members.get(user_id)
    members.admin_loss_refuse(removed)
    removed.delete()
    sessions = KeySession.objects.filter(
        workspace=workspace, user_id=user_id, revoked_at__isnull=True
    ).order_by("pk")
    for session in sessions:
        key_session_revoke(session=session, revoked_by=actor)
    _member_audit(
        actor=actor,
        action=AuditEvent.Action.MEMBER_REMOVED,
        workspace=workspace,
        member_id=user_id,
        detail={"role": removed.role, **detail},
    )


def workspace_member_role_set(
    *, workspace: Workspace, actor: User, user_id: int, role: str
) -> WorkspaceMembership:
    """Make a member an admin, or an admin a member. Only an admin may
    (`WorkspaceAdminRequired`), and the workspace keeps at least one admin
    (`LastWorkspaceAdmin`), under the same locks as a removal, so a demotion racing a
    removal or another demotion cannot leave it without one. Setting the role a member
    already has changes nothing and records nothing."""
    with transaction.atomic():
        members = _members_locked(workspace=workspace, actor=actor)
        if not members.acting.is_admin:
            raise WorkspaceAdminRequired()
        return _role_change(
            workspace=workspace, members=members, user_id=user_id, role=role, actor=actor
        )


def workspace_membership_staff_remove(*, membership: WorkspaceMembership, actor: User) -> None:
    """Remove a person from a workspace by staff (`actor`, in the admin), as an admin of it
    would (`workspace_member_remove`): under the same locks, the only admin refused
    (`LastWorkspaceAdmin`), their key sessions there revoked, audited as `member_removed`
    (`"staff": true`)."""
    with transaction.atomic():
        _membership_lock_and_end(membership.workspace, membership.user_id, actor, staff=True)


def workspace_membership_staff_role_set(
    *, membership: WorkspaceMembership, actor: User, role: str
) -> WorkspaceMembership:
    """Change a member's role by staff (`actor`, in the admin), as an admin of the workspace
    would (`workspace_member_role_set`): the only admin is not demoted (`LastWorkspaceAdmin`)."""
    workspace = membership.workspace
    with transaction.atomic():
        return _role_change(
            workspace=workspace,
            members=_Members.locked(workspace),
            user_id=membership.user_id,
            role=role,
            actor=actor,
        )


def _role_change(
    *, workspace: Workspace, members: _Members, user_id: int, role: str, actor: User
) -> WorkspaceMembership:
    """Give `user_id` `role` in `workspace`, whose rows `members` holds locked, unless that
    leaves it without an admin; a role they already have changes and records nothing."""
    changed = members.get(user_id)
    if changed.role == role:
        return changed
    members.admin_loss_refuse(changed)
    previous, changed.role = changed.role, role
    changed.save(update_fields=["role"])
    _member_audit(
        actor=actor,
        action=AuditEvent.Action.MEMBER_ROLE_CHANGED,
        workspace=workspace,
        member_id=user_id,
        detail={"from": previous, "to": role},
    )
    return changed


@dataclass(frozen=True)
class _Members:
    """A workspace's memberships by user id, their rows locked."""

    by_user: dict[int, WorkspaceMembership]

    @classmethod
    def locked(cls, workspace: Workspace) -> _Members:
        """Every membership of `workspace`, its row locked, in primary-key order."""
        return cls(by_user=_memberships_locked(workspace))

    def admin_loss_refuse(self, member: WorkspaceMembership) -> None:
        """`LastWorkspaceAdmin` when `member`, about to be removed or demoted, is the
        workspace's only admin."""
        admins = sum(membership.is_admin for membership in self.by_user.values())
        if member.is_admin and admins == 1:
            raise LastWorkspaceAdmin()

    def get(self, user_id: int) -> WorkspaceMembership:
        member = self.by_user.get(user_id)
        if member is None:
            raise NotFound("No such member.", userId=user_id)
        return member


@dataclass(frozen=True)
class _LockedMembers(_Members):
    """The same, with the membership of the person acting on them."""

    acting: WorkspaceMembership


def _members_locked(*, workspace: Workspace, actor: User) -> _LockedMembers:
    """Lock every membership of the workspace in primary-key order (one order for every
    writer, so two admins acting on each other serialize instead of deadlocking), and
    find the actor's: `NotFound` for someone who is not a member."""
    by_user = _memberships_locked(workspace)
    acting = by_user.get(actor.pk)
    if acting is None:
        raise NotFound("No such workspace.")
    return _LockedMembers(acting=acting, by_user=by_user)


def _memberships_locked(workspace: Workspace) -> dict[int, WorkspaceMembership]:
    return {
        membership.user_id: membership
        for membership in WorkspaceMembership.objects.select_for_update()
        .filter(workspace=workspace)
        .order_by("pk")
    }


def _member_audit(
    *, actor: User, action: str, workspace: Workspace, member_id: int, detail: dict[str, object]
) -> None:
    """Record a change to one membership of `workspace`, aimed at the member's user id."""
    workspace_audit_record(
        actor=actor,
        action=action,
        workspace=workspace,
        target_type="user",
        target_id=member_id,
        detail=detail,
    )


def _workspace_admin_require(*, workspace: Workspace, user: User) -> None:
    if not WorkspaceMembership.objects.filter(
        workspace=workspace, user=user, role=WorkspaceMembership.Role.ADMIN
    ).exists():
        raise WorkspaceAdminRequired()


def team_membership_ensure(
    *, team: Team, user: User, role: str = TeamMembership.Role.MEMBER
) -> TeamMembership:
    membership, _ = TeamMembership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership


def workspace_membership_ensure(
    *, workspace: Workspace, user: User, role: str = WorkspaceMembership.Role.MEMBER
) -> WorkspaceMembership:
    """Make `user` a member of `workspace` (and so of its team)."""
    with transaction.atomic():
        team_membership_ensure(team=workspace.team, user=user)
        membership, _ = WorkspaceMembership.objects.get_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
    return membership


def api_token_create(
    *,
    user: User,
    team: Team,
    name: str,
    scope: str = ApiToken.Scope.API,
    ttl_days: int | None = None,
    minted_with: CredentialKind | None = None,
    bot: Bot | None = None,
) -> tuple[ApiToken, str]:
    """Mint a personal access token of `scope` for `user`, who is also the audited actor:
    a token is only ever minted by its own owner. Returns the row and the token, which is
    never stored. With `bot` it is that bot's token (scope `bot`, audited as
    `bot_token_issued`), issued by `user`: call `bot_token_issue`, which checks that `user`
    may.

    `minted_with` is the kind of credential the asking request carries; None is the system
    itself (seed_demo). A token may not mint a longer-lived token: only a person signed in
    to the web frame can (`CredentialKindRefused`, nothing written).
    """
    if minted_with is not None and minted_with != "session":
        raise CredentialKindRefused(
            "Personal access tokens can only be created from a signed-in browser session."
        )
    raw, digest = pat_generate()
    now = timezone.now()
    days = ttl_days if ttl_days is not None else settings.API_TOKEN_DEFAULT_TTL_DAYS
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            team=team,
            name=name,
            scope=scope,
            bot=bot,
            token_hash=digest,
            created_at=now,
            expires_at=now + timedelta(days=days),
        )
        audit_record(
            actor=user,
            action=AuditEvent.Action.TOKEN_CREATED
            if bot is None
            else AuditEvent.Action.BOT_TOKEN_ISSUED,
            org_id=team.org_id,
            target_type="api_token",
            target_id=token.pk,
            detail={
                "scope": scope,
                "teamId": team.pk,
                "expiresAt": token.expires_at.isoformat(),
                **({} if bot is None else {"botId": bot.slug}),
            },
        )
    return token, raw


def api_token_use_record(*, token: ApiToken, now: datetime) -> None:
    """Stamp `token` as used at `now`, unless it was stamped less than TOKEN_USE_RESOLUTION
    ago. One conditional UPDATE: of concurrent requests past the resolution, one writes and
    the others match nothing."""
    stale_before = now - TOKEN_USE_RESOLUTION
    if token.last_used_at is not None and token.last_used_at > stale_before:
        return
    ApiToken.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale_before), pk=token.pk
    ).update(last_used_at=now)


def team_owner_require(*, team: Team, user: User) -> None:
    """`user` owns `team` (`TeamOwnerRequired` otherwise): what managing its bots takes."""
    if not team_owner_is(team=team, user=user):
        raise TeamOwnerRequired()


def bot_token_issue(
    *, bot: Bot, actor: User, name: str, minted_with: CredentialKind | None = None
) -> tuple[ApiToken, str]:
    """Issue a token that authenticates `bot`, shown once, revocable with `api_token_revoke`
    and audited like a person's token. Only an owner of the bot's team may
    (`TeamOwnerRequired`), and, like any token, only from a signed-in browser session."""
    team_owner_require(team=bot.team, user=actor)
    return api_token_create(
        user=actor,
        team=bot.team,
        name=name,
        scope=ApiToken.Scope.BOT,
        minted_with=minted_with,
        bot=bot,
    )


def api_token_revoke(*, token: ApiToken, actor: User) -> ApiToken:
    """Revoke a token, and with it every JWT minted from it. Revoking a revoked token keeps
    its first revocation time and records nothing more. A bot's token is audited as
    `bot_token_revoked`, a person's as `token_revoked`."""
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            detail: dict[str, object] = {"ownerId": token.user_id, "teamId": token.team_id}
            if token.bot_id is not None:
                detail["botId"] = Bot.objects.values_list("slug", flat=True).get(pk=token.bot_id)
            audit_record(
                actor=actor,
                action=AuditEvent.Action.TOKEN_REVOKED
                if token.bot_id is None
                else AuditEvent.Action.BOT_TOKEN_REVOKED,
                org_id=_audit_org_id(pk=token.team_id),
                target_type="api_token",
                target_id=token.pk,
                detail=detail,
            )
    token.refresh_from_db(fields=["revoked_at"])
    return token


def bot_token_revoke(*, bot: Bot, token_id: int, actor: User) -> ApiToken:
    """Revoke one of `bot`'s tokens (`NotFound` for another's): only a team owner may
    (`TeamOwnerRequired`). The token ends at once, as a person's does."""
    team_owner_require(team=bot.team, user=actor)
    token = ApiToken.objects.filter(bot=bot, pk=token_id).first()
    if token is None:
        raise NotFound("No such token.")
    return api_token_revoke(token=token, actor=actor)


def jwt_issue(*, credential: Credential) -> tuple[str, datetime]:
    """Sign a short-lived JWT for the credential's person and team; return it and its expiry.

    A JWT cannot renew itself (`CredentialKindRefused`): short-lived means it ends unless a
    longer-lived credential (a PAT or the browser session) asks again. It names what it was
    minted from, a PAT or the browser session, and ends with it: revoking the PAT, signing
    out of the session (or a password change, which ends every session) ends the JWT too.
    """
    if credential.kind == "jwt":
        raise CredentialKindRefused("A JWT cannot be exchanged for another JWT.")
    return jwt_encode(
        user_id=credential.user.pk,
        team_id=credential.team.pk,
        now=timezone.now(),
        token_id=credential.token_id,
        session_key=credential.session_key,
    )


def workspace_ai_consent_set(
    *, workspace: Workspace, enabled: bool, expected_revision: int, actor: User
) -> Workspace:
    """Set workspace AI consent by compare-and-set on the consent revision.

    Only an admin of the workspace may (`WorkspaceAdminRequired`, nothing changed). Every
    accepted change bumps the revision, even one that re-states the current value: an
    admission frozen under the old revision is retired either way.
    """
    _workspace_admin_require(workspace=workspace, user=actor)
    with transaction.atomic():
        updated = Workspace.objects.filter(
            pk=workspace.pk, ai_consent_revision=expected_revision
        ).update(ai_enabled=enabled, ai_consent_revision=F("ai_consent_revision") + 1)
        workspace.refresh_from_db(fields=["ai_enabled", "ai_consent_revision"])
        if updated != 1:
            raise ConsentRevisionConflict(currentRevision=workspace.ai_consent_revision)
        workspace_audit_record(
            actor=actor,
            action=AuditEvent.Action.AI_CONSENT_CHANGED,
            workspace=workspace,
            detail={"enabled": enabled, "consentRevision": workspace.ai_consent_revision},
        )
    return workspace


def audit_record(
    *,
    actor: User | None,
    action: str,
    org_id: int | None,
    workspace_id: int | None = None,
    target_type: str = "",
    target_id: object = "",
    detail: dict[str, object] | None = None,
) -> AuditEvent:
    """Record a security-relevant action. Call inside the action's own transaction, so
    the record exists exactly when the action happened. Ids and versions only."""
    return AuditEvent.objects.create(
        actor=actor,
        actor_username=actor.get_username() if actor else "",
        action=action,
        org_id=org_id,
        workspace_id=workspace_id,
        target_type=target_type,
        target_id=str(target_id),
        detail=detail or {},
    )


def workspace_audit_record(
    *,
    actor: User,
    action: str,
    workspace: Workspace,
    target_type: str = "",
    target_id: object = "",
    detail: dict[str, object] | None = None,
) -> AuditEvent:
    """Record a security-relevant action on `workspace`, naming it and its team's org (read
    through `workspace.team`: no query when the team is loaded, one when it is not). Call
    inside the action's own transaction, as `audit_record`."""
    return audit_record(
        actor=actor,
        action=action,
        org_id=workspace.team.org_id,
        workspace_id=workspace.pk,
        target_type=target_type,
        target_id=target_id,
        detail=detail,
    )


def _audit_org_id(**team_lookup: object) -> int | None:
    """The org an audit event names, for an action on a row that holds only its team's or
    its workspace's id: the org of the team `team_lookup` finds (one query)."""
    return Team.objects.filter(**team_lookup).values_list("org_id", flat=True).first()


def sign_in_audit(
    *, actor: User | None, is_success: bool, request: HttpRequest | None
) -> AuditEvent:
    """Audit one sign-in attempt, to the web frame or the admin. `actor` is the account
    signed in to or tried; None when the username tried names no account, and that
    username is not kept (it may be a password typed into the wrong field)."""
    detail: dict[str, object] = {}
    if request is not None:
        detail = {"clientAddress": client_address(request), "path": request.path}
        if getattr(request, "axes_locked_out", False):
            detail["lockedOut"] = True
    return audit_record(
        actor=actor,
        action=AuditEvent.Action.SIGN_IN_SUCCEEDED
        if is_success
        else AuditEvent.Action.SIGN_IN_FAILED,
        org_id=None,
        detail=detail,
    )


def org_deletion_request(*, org: Org, actor: User | None) -> Org:
    """Soft-delete an org: its workspaces close at once, its data goes after the grace."""
    due = timezone.now() + timedelta(days=settings.ORG_DELETION_GRACE_DAYS)
    with transaction.atomic():
        updated = Org.objects.filter(pk=org.pk, status=Org.Status.ACTIVE).update(
            status=Org.Status.PENDING_DELETION, deletion_due_at=due
        )
        if updated != 1:
            raise OrgStateConflict(status=_org_status(org))
        audit_record(
            actor=actor,
            action=AuditEvent.Action.ORG_DELETION_REQUESTED,
            org_id=org.pk,
            detail={"deletionDueAt": due.isoformat()},
        )
    org.refresh_from_db()
    return org


def org_restore(*, org: Org, actor: User | None) -> Org:
    """Return a pending org to active, losing nothing. Refused once a purge has claimed it:
    the conditional update makes a restore and a purge claim exclude each other."""
    with transaction.atomic():
        updated = Org.objects.filter(pk=org.pk, status=Org.Status.PENDING_DELETION).update(
            status=Org.Status.ACTIVE, deletion_due_at=None
        )
        if updated != 1:
            raise OrgStateConflict(status=_org_status(org))
        audit_record(actor=actor, action=AuditEvent.Action.ORG_RESTORED, org_id=org.pk)
    org.refresh_from_db()
    return org


def org_quota_set(*, org: Org, memory_quota_bytes: int, actor: User | None) -> Org:
    with transaction.atomic():
        previous = Org.objects.select_for_update().get(pk=org.pk).memory_quota_bytes
        Org.objects.filter(pk=org.pk).update(memory_quota_bytes=memory_quota_bytes)
        if previous == 0 and memory_quota_bytes > 0:
            # The usage is not kept without a quota (`team_storage_charge`).
            _team_usage_count(org_id=org.pk)
        audit_record(
            actor=actor,
            action=AuditEvent.Action.ORG_QUOTA_CHANGED,
            org_id=org.pk,
            detail={"from": previous, "to": memory_quota_bytes},
        )
    org.refresh_from_db()
    return org


def org_create(*, name: str, actor: User) -> Org:
    """Create an org by staff (`actor`), audited as `org_created`. A name another org has is
    `NameTaken`; one that does not read as what it is, `ValidationFailed`
    (`display_name_refuse`)."""
    display_name_refuse(name)
    with transaction.atomic():
        with violation_raises(NameTaken, name=name):
            org = Org.objects.create(name=name)
        audit_record(
            actor=actor, action=AuditEvent.Action.ORG_CREATED, org_id=org.pk, detail={"name": name}
        )
    return org


def org_rename(*, org: Org, name: str, actor: User) -> Org:
    """Rename an org by staff (`actor`), writing its name alone (its status, deadline and
    quota are the lifecycle services'), audited as `org_renamed`; refusals as `org_create`'s."""
    _rename(org, name, actor=actor, action=AuditEvent.Action.ORG_RENAMED, org_id=org.pk)
    return org


def team_create(*, org: Org, name: str, actor: User, auto_memory_default: str = "") -> Team:
    """Create a team in `org` by staff (`actor`), audited as `team_created`. A name the org's
    other teams have is `NameTaken`; refusals otherwise as `org_create`'s."""
    display_name_refuse(name)
    with transaction.atomic():
        with violation_raises(NameTaken, name=name):
            team = Team.objects.create(org=org, name=name, auto_memory_default=auto_memory_default)
        audit_record(
            actor=actor,
            action=AuditEvent.Action.TEAM_CREATED,
            org_id=org.pk,
            target_type="team",
            target_id=team.pk,
            detail={"name": name},
        )
    return team


def team_rename(*, team: Team, name: str, actor: User) -> Team:
    """Rename a team by staff (`actor`), writing its name alone, audited as `team_renamed`;
    refusals as `team_create`'s."""
    _rename(
        team,
        name,
        actor=actor,
        action=AuditEvent.Action.TEAM_RENAMED,
        org_id=team.org_id,
        target_type="team",
        target_id=team.pk,
    )
    return team


def _rename(row: Org | Team, name: str, *, actor: User, action: str, **audit: Any) -> None:
    """Give `row` `name`, writing that column alone under its row's lock (a whole-row save
    would write back what a service changed meanwhile), and audit it as `action` (`audit`
    names the org and target) with the names before and after; the name it has already
    changes and records nothing."""
    display_name_refuse(name)
    rows = type(row).objects.filter(pk=row.pk)
    with transaction.atomic():
        previous = rows.select_for_update().values_list("name", flat=True).get()
        if previous != name:
            with violation_raises(NameTaken, name=name):
                rows.update(name=name)
            audit_record(actor=actor, action=action, detail={"from": previous, "to": name}, **audit)
    row.name = name


def display_name_refuse(name: str) -> None:
    """Refuse a display name the API would (`DisplayNameField`): blank, or holding a
    character that displays as nothing (`display_name_validator`), whichever writer sent it."""
    try:
        if not name.strip():
            raise ValidationError("This field may not be blank.", code="blank")
        display_name_validator(name)
    except ValidationError as refusal:
        raise ValidationFailed(refusal.messages[0], fields={"name": refusal.messages}) from None


def _org_status(org: Org) -> str:
    return Org.objects.filter(pk=org.pk).values_list("status", flat=True).first() or "absent"


@dataclass(frozen=True)
class DemoCredentials:
    username: str
    password: str
    token: str
    mcp_token: str
    org_id: int
    team_id: int
    workspace_id: int


def demo_tenant_seed(*, name: str = "demo", kept: DemoCredentials | None = None) -> DemoCredentials:
    """Create (or find) a demo org, team, AI-enabled workspace and admin user, and return
    working credentials for them.

    Idempotent: a second run creates no new org, team, workspace or user. `kept` is what
    an earlier run returned (neither the password nor a token can be read back from what
    is stored): each of its credentials that still works is returned as it is, so a
    restart neither resets the password (which would sign every browser out) nor mints
    another token. Only one that no longer works (a password changed since, a token
    revoked or expired) is replaced: a fresh password, a freshly minted token.
    """
    with transaction.atomic():
        org, _ = Org.objects.get_or_create(name=f"{name} org")
        team, _ = Team.objects.get_or_create(org=org, name=f"{name} team")
        user, _ = User.objects.get_or_create(username=name)
        # The demo shows the staff side too: the same person may inspect receipts in admin.
        user.is_staff = user.is_superuser = True
        previous = kept if kept is not None and kept.username == user.username else None
        password = previous.password if previous else ""
        if not (password and user.check_password(password)):
            password = secrets.token_urlsafe(12)
            user.set_password(password)
        user.save(update_fields=["password", "is_staff", "is_superuser"])
        team_membership_ensure(team=team, user=user, role=TeamMembership.Role.OWNER)
        workspace, _ = Workspace.objects.get_or_create(
            team=team, name=f"{name} workspace", defaults={"ai_enabled": True}
        )
        workspace_membership_ensure(
            workspace=workspace, user=user, role=WorkspaceMembership.Role.ADMIN
        )
        token = _demo_token_ensure(
            user=user, team=team, kept=previous.token if previous else "", scope=ApiToken.Scope.API
        )
        mcp_token = _demo_token_ensure(
            user=user,
            team=team,
            kept=previous.mcp_token if previous else "",
            scope=ApiToken.Scope.MCP,
        )
    return DemoCredentials(
        username=user.username,
        password=password,
        token=token,
        mcp_token=mcp_token,
        org_id=org.pk,
        team_id=team.pk,
        workspace_id=workspace.pk,
    )


def _demo_token_ensure(*, user: User, team: Team, kept: str, scope: str) -> str:
    """`kept` if it is still a live token of `scope` for `user` in `team`, else a new one."""
    name = f"{user.username}{' MCP' if scope == ApiToken.Scope.MCP else ''} (seed_demo)"
    is_live = (
        bool(kept)
        and ApiToken.objects.filter(
            token_hash=bearer_secret_digest(kept),
            user=user,
            team=team,
            scope=scope,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        ).exists()
    )
    if is_live:
        return kept
    return api_token_create(user=user, team=team, name=name, scope=scope)[1]


def workspace_key_ensure(*, workspace: Workspace) -> bytes:
    """Return the workspace's data key, creating it on first use. For writers, and for a
    key session, which must hold the key a later write uses; a reader calls
    `selectors.workspace_data_key`, which never creates one.

    Two first writers may race to create it; the loser's insert fails on the primary
    key and it reads the winner's key, so a workspace never has two. A key is created only
    while the org is active (`org_active_hold`; OrgPendingDeletion otherwise): the purge
    destroys the keys first, and a key made after that would outlive it.
    """
    existing = workspace_data_key(workspace=workspace)
    if existing is not None:
        return existing
    with transaction.atomic():
        org_active_hold(team_id=workspace.team_id)
        row, _ = WorkspaceKey.objects.get_or_create(
            workspace=workspace,
            defaults={
                "wrapped_key": data_key_generate(),
                "wrapping_key_id": deployment_key_id(settings.DEPLOYMENT_KEY),
            },
        )
    return bytes(row.wrapped_key)


def data_keys_rewrap(*, batch_size: int = 100) -> int:
    """Re-wrap every data key not yet wrapped by the current deployment key: the workspaces'
    and those of any other app (memory spaces'), found as the models with a
    `WrappedKeyField`, so a key table added later is never left behind by a rotation.

    Each batch commits on its own, and rows already re-wrapped are skipped, so an
    interrupted run resumes where it stopped. What the keys sealed is untouched: the data
    keys do not change. Returns how many keys were re-wrapped.
    """
    key_models = [
        model
        for model in apps.get_models()
        if any(isinstance(field, WrappedKeyField) for field in model._meta.concrete_fields)
    ]
    rewrapped = sum(_keys_rewrap(model, batch_size) for model in key_models)
    # What the process holds unwrapped is keyed by the old wrapped forms, which no row
    # stores any more.
    unwrapped_keys_forget()
    return rewrapped


def _keys_rewrap(model: type[Model], batch_size: int) -> int:
    # Every key table has `wrapped_key`, `wrapping_key_id` and `rewrapped_at`.
    current = deployment_key_id(settings.DEPLOYMENT_KEY)
    total = 0
    while True:
        with transaction.atomic():
            batch: list[Any] = list(
                model._default_manager.select_for_update()
                .exclude(wrapping_key_id=current)
                .order_by("pk")[:batch_size]
            )
            for row in batch:
                # Assigning the unwrapped value back makes the field seal it again
                # under the current deployment key.
                row.wrapped_key = bytes(row.wrapped_key)
                row.wrapping_key_id = current
                row.rewrapped_at = timezone.now()
                row.save(update_fields=["wrapped_key", "wrapping_key_id", "rewrapped_at"])
        if not batch:
            return total
        total += len(batch)


def document_nul_refuse(text: str | bytes, **detail: Any) -> None:
    """Refuse a document's text holding a NUL as a JSON body's `content` is refused (DRF's
    own check, VALIDATION_FAILED naming `content`), whichever writer sent it: a raw Markdown
    body, the CLI or an import entry has no serializer to do it. `detail` adds what a batch
    needs to name the document (`path`)."""
    if b"\x00" in text if isinstance(text, bytes) else "\x00" in text:
        message = str(ProhibitNullCharactersValidator.message)
        raise ValidationFailed(message, fields={"content": [message]}, **detail)


def document_encode(plaintext: str) -> bytes:
    """`plaintext` as UTF-8, within the one ceiling every document writer keeps.

    Refuses text holding a NUL (VALIDATION_FAILED), text that UTF-8 cannot hold (a lone
    surrogate, INVALID_TEXT) and text over `MEMORY_MAX_DOCUMENT_BYTES` (DOCUMENT_TOO_LARGE).
    """
    document_nul_refuse(plaintext)
    try:
        encoded = plaintext.encode()
    except UnicodeEncodeError:
        raise InvalidText() from None
    limit = settings.MEMORY_MAX_DOCUMENT_BYTES
    if len(encoded) > limit:
        raise DocumentTooLarge(limitBytes=limit, bytes=len(encoded))
    return encoded


def file_write(
    *,
    workspace: Workspace,
    path: str,
    plaintext: str,
    base_version: int,
    data_key: bytes | None,
    author: User | None,
    author_kind: str,
    change_kind: str,
    savepoint: bool = True,
    target: WriteTarget | None = None,
) -> FileVersion:
    """Write a new revision of a file by compare-and-set on its current version.

    `base_version` 0 creates the file and fails if it exists; otherwise the write
    applies only if the live file is still at `base_version` (a deleted file is never
    revived by a write). On a mismatch nothing is written and VersionConflict carries
    the version now held. The version bump, the revision and the change in the team's
    storage usage commit together; a write that would take the usage past the org's quota
    is TenantQuotaExceeded and writes nothing. `data_key` None seals under the workspace's
    own key (created by a first write); a stale write is refused before any transaction,
    by one read that unwraps no key. `savepoint` False is for a caller whose own
    transaction already makes the write all or nothing and ends on any refusal (the
    capture): it saves a SAVEPOINT and its RELEASE, and a refusal other than
    VersionConflict leaves that transaction unusable. `target` is the file at `base_version`
    as the caller has just read it with its own `data_key` (the capture, which read memory
    to edit it): it spares the write its read, and the compare-and-set still decides.

    The write holds its org's row FOR SHARE while the org is active (`_org_live_sql`), so an
    org deletion request that commits before it refuses it (OrgPendingDeletion, as the
    request would be refused had it arrived after), and one that comes later waits for it.
    """
    encoded = document_encode(plaintext)
    now = timezone.now()
    # The revision's fields that do not depend on the file and version it lands as.
    attribution = {
        "size_bytes": len(encoded),
        "author_id": None if author is None else author.pk,
        "author_kind": author_kind,
        "change_kind": change_kind,
        "created_at": now,
    }
    if base_version == 0:
        with transaction.atomic(savepoint=savepoint), driver_cursor() as cursor:
            # A first write is rare: its org's hold is a statement of its own, the first lock.
            org_active_hold(team_id=workspace.team_id)
            file_id = _file_create(workspace=workspace, path=path, now=now).pk
            if data_key is None:
                data_key = workspace_key_ensure(workspace=workspace)
            sealed = _revision_sealed(
                workspace=workspace, file_id=file_id, version=1, encoded=encoded, data_key=data_key
            )
            written, _ = _revision_insert(cursor, sealed | attribution, author=author, bump=None)
            # Last, as in every write: the usage row's lock is held only until the commit.
            team_storage_charge(workspace=workspace, delta=len(encoded))
    else:
        # One cursor for the read and the write: opening one costs about as much Python as
        # the execute it serves.
        with driver_cursor() as cursor:
            if target is None:
                target = _write_target(
                    cursor, workspace=workspace, path=path, base_version=base_version
                )
            if data_key is None:
                data_key = (
                    data_key_unwrap(target.wrapped_key)
                    if target.wrapped_key is not None
                    else workspace_key_ensure(workspace=workspace)
                )
            # Sealed before the transaction: the read fixed the file and the version the
            # revision is bound to, and the compare-and-set writes it only if they still hold.
            sealed = _revision_sealed(
                workspace=workspace,
                file_id=target.file_id,
                version=base_version + 1,
                encoded=encoded,
                data_key=data_key,
            )
            # Exact: the revision replaced is `base_version`'s, which no write changes.
            delta = len(encoded) - target.previous_bytes
            bump = _Bump(
                path=path,
                base_version=base_version,
                team_id=workspace.team_id,
                charged=delta != 0,
            )
            with _write_transaction(bump, savepoint=savepoint):
                written, quota = _revision_insert(
                    cursor, sealed | attribution, author=author, bump=bump
                )
                if written is not None and delta != 0:
                    # After the file row's lock, as the last lock of the write.
                    team_storage_charge(workspace=workspace, delta=delta, quota=quota)
    if written is None:
        # Raised once its transaction has ended: the compare-and-set lost to a writer that
        # moved the file after the read and changed nothing, so that transaction commits
        # instead of rolling back, and the connection keeps its prepared statements
        # (psycopg drops every one of them on a rollback). Or the org's row was retired
        # first (`_org_live_sql`), which left the file as it was.
        retired = _org_retirement(team_id=workspace.team_id)
        raise retired if retired is not None else _conflict(workspace=workspace, path=path)
    return written


@dataclass(frozen=True)
class WriteTarget:
    """The file a write based on a version replaces."""

    file_id: int
    # The size of the revision the new one replaces, for the storage charge.
    previous_bytes: int
    # The workspace's data key as stored (None: the workspace has none).
    wrapped_key: bytes | None


def _write_target(
    cursor: Cursor, *, workspace: Workspace, path: str, base_version: int
) -> WriteTarget:
    """The live file at `path` as a write based on `base_version` finds it, or the
    VersionConflict carrying the version it holds (0 if there is none).

    One read, in autocommit when no transaction is open: a stale write is refused with no
    BEGIN or COMMIT, no key unwrapped and nothing sealed. It decides nothing else; the
    compare-and-set in the write's transaction does, for a writer may move the file between
    the two.
    """
    cursor.execute(_write_target_sql(), [workspace.pk, workspace.pk, path])
    row = cursor.fetchone()
    if row is None:
        raise VersionConflict(currentVersion=0)
    file_id, version, is_live, previous_bytes, wrapped_key = row
    if version != base_version or not is_live:
        raise VersionConflict(currentVersion=version)
    return WriteTarget(
        file_id=file_id,
        previous_bytes=previous_bytes or 0,
        wrapped_key=None if wrapped_key is None else bytes(wrapped_key),
    )


@functools.cache
def _write_target_sql() -> str:
    # SQL for one round trip: the file, the size of its current revision and the wrapped
    # data key together (identifiers come from model metadata; every value is a parameter).
    return f"""
        SELECT f.id, f.current_version, f.deleted_at IS NULL,
            (SELECT size_bytes FROM {table(FileVersion)}
                WHERE file_id = f.id AND version = f.current_version),
            (SELECT wrapped_key FROM {table(WorkspaceKey)} WHERE workspace_id = %s)
        FROM {table(File)} f WHERE f.workspace_id = %s AND f.path = %s
    """


def _revision_sealed(
    *, workspace: Workspace, file_id: int, version: int, encoded: bytes, data_key: bytes
) -> dict[str, Any]:
    """The fields of revision `version` of file `file_id` that bind it there: `encoded`
    sealed with that address, and its digest."""
    ciphertext = seal(
        data_key=data_key,
        plaintext=encoded,
        associated_data=revision_associated_data(
            workspace_id=workspace.pk, file_id=file_id, version=version
        ),
    )
    return {
        "file_id": file_id,
        "version": version,
        "ciphertext": ciphertext,
        "ciphertext_sha256": ciphertext_digest(ciphertext),
    }


@dataclass(frozen=True)
class _Bump:
    """The compare-and-set a revision's insert depends on: its file, still at `path`, live
    and at `base_version`, moves to the revision's version."""

    path: str
    base_version: int
    # The team of the file's workspace: its org's row is held while active, and its quota
    # read when the write is `charged` (changes the size).
    team_id: int
    charged: bool


def _write_transaction(bump: _Bump, *, savepoint: bool) -> AbstractContextManager[Any]:
    """The transaction a write after `bump` needs: none on PostgreSQL in autocommit (outside
    any other transaction) when the write charges no storage, for its one statement
    (`_bump_insert_sql`) is atomic by itself and commits by itself; that spares a Save its
    BEGIN and COMMIT (bench/README.md)."""
    postgresql = connection.vendor == "postgresql"
    if not bump.charged and postgresql and connection.get_autocommit():
        return nullcontext()
    return transaction.atomic(savepoint=savepoint)


def _revision_insert(
    cursor: Cursor, fields: dict[str, Any], *, author: User | None, bump: _Bump | None
) -> tuple[FileVersion | None, int | None]:
    """Insert the revision whose every field but its id is in `fields`, after `bump` if
    given; return it as the ORM would load it, with `author` (its `author_id`'s user)
    attached, or None when the bump matched nothing (and nothing was written). With it,
    on PostgreSQL, the quota `_org_quota_held` reads, when the bump names a team to charge
    and the revision was written; None otherwise.

    The bump is one conditional UPDATE: a concurrent writer blocks on the row lock, then
    re-reads the bumped version and matches nothing.
    """
    # SQL because it was measured: building and compiling the ORM's INSERT took a tenth
    # of a Save's time, for a statement whose shape never changes. The instance is built as
    # the ORM loads a row: built by keyword (each one looked up, the author set through the
    # relation's checks) it cost a Save as much CPU as its INSERT's own Python.
    params = [fields[name] for name in _REVISION_FIELDS]
    params[-1] = datetime_param(fields["created_at"])
    if bump is None:
        cursor.execute(_revision_insert_sql(), params)
    else:
        bump_params = [
            params[-1],
            fields["file_id"],
            bump.path,
            bump.base_version,
            bump.team_id,
            Org.Status.ACTIVE,
        ]
        if connection.vendor == "postgresql":
            # The bump and the insert as one data-modifying statement: the insert takes its
            # row from the bump's, so it writes nothing when the bump matched nothing; and
            # the quota's read after them, in the same round trip.
            quota_params = [bump.team_id] if bump.charged else []
            cursor.execute(_bump_insert_sql(bump.charged), bump_params + params + quota_params)
        else:
            # SQLite has no data-modifying WITH; its write lock, taken at BEGIN, already
            # keeps every other writer out between the two statements.
            cursor.execute(_bump_sql(connection.vendor), bump_params)
            if cursor.rowcount != 1:
                return None, None
            cursor.execute(_revision_insert_sql(), params)
    row = cursor.fetchone()
    if row is None:
        return None, None
    revision = loaded(FileVersion, {"id": row[0], **fields})
    FileVersion.author.field.set_cached_value(revision, author)
    return revision, (None if len(row) == 1 else _org_quota_of(row[1]))


# What `_revision_insert` writes, in its statement's order: every field but the id.
_REVISION_FIELDS = (
    "file_id",
    "version",
    "ciphertext",
    "ciphertext_sha256",
    "size_bytes",
    "author_id",
    "author_kind",
    "change_kind",
    "created_at",
)


@functools.cache
def _revision_insert_sql() -> str:
    names = ", ".join(_REVISION_FIELDS)
    slots = ", ".join(["%s"] * len(_REVISION_FIELDS))
    return f"INSERT INTO {table(FileVersion)} ({names}) VALUES ({slots}) RETURNING id"


@functools.cache
def _bump_sql(vendor: str) -> str:
    # SQL to share the text with `_bump_insert_sql`; its parameters are the time, the
    # file, its path, the base version, then `_org_live_sql`'s. The org's hold is an
    # uncorrelated EXISTS, which PostgreSQL runs once, before it scans for the file's row:
    # the org's lock comes before the file's, and a retired org leaves the file untouched.
    return (
        f"UPDATE {table(File)} SET current_version = current_version + 1, updated_at = %s "
        "WHERE id = %s AND path = %s AND current_version = %s AND deleted_at IS NULL "
        f"AND EXISTS ({_org_live_sql(vendor)})"
    )


@functools.cache
def _bump_insert_sql(charged: bool) -> str:
    # PostgreSQL's data-modifying WITH, which the ORM cannot write: a Save's whole write in
    # one round trip. The parameters are `_bump_sql`'s, then the revision's fields, then
    # when `charged` the team whose org's quota `_org_quota_held_sql` reads. That read is a
    # subquery of the select list over the inserted row: evaluated once the row exists,
    # after the bump has locked the file's row (the org's lock comes after the file's, as
    # in every write), and not at all when the bump matched nothing.
    names = ", ".join(_REVISION_FIELDS)
    slots = ", ".join(["%s"] * len(_REVISION_FIELDS))
    insert = f"INSERT INTO {table(FileVersion)} ({names}) SELECT {slots} FROM bumped RETURNING id"
    quota = f", ({_org_quota_held_sql(connection.vendor)})" if charged else ""
    return (
        f"WITH bumped AS ({_bump_sql(connection.vendor)} RETURNING id), inserted AS ({insert}) "
        f"SELECT id{quota} FROM inserted"
    )


def team_storage_charge(*, workspace: Workspace, delta: int, quota: int | None = None) -> None:
    """Add `delta` bytes to the storage usage of the workspace's team, if its org has a
    quota.

    Call inside the transaction of the write, delete or restore it accounts for, after
    that file's row is locked: the usage row is always the last lock a document change
    takes. Growth applies only while the usage stays within the org's quota, as one
    conditional UPDATE, so concurrent writers cannot pass the quota together; otherwise
    TenantQuotaExceeded, and the caller's transaction rolls back. A shrink always applies,
    never below zero. Under no quota (0) the usage is not kept: every change of a team's
    documents would update its one row, whose lock each holds until its commit has been
    flushed, so a team's writes would take turns (bench/README.md, http_throughput_*).
    `org_quota_set` counts it afresh when a quota is set. `quota` is the org's quota if the
    caller's transaction has read it as `_org_quota_held` does (a write's statement does).
    """
    if delta == 0:
        return
    if quota is None:
        quota = _org_quota_held(team_id=workspace.team_id)
    if quota == 0:
        return
    tenant_counter_charge(
        rows=TeamStorageUsage.objects.filter(team_id=workspace.team_id),
        new_row=TeamStorageUsage(team_id=workspace.team_id),
        delta=delta,
        quota=quota,
    )


def _org_quota_held(*, team_id: int) -> int:
    """The quota of the team's org, its row held against `org_quota_set` (FOR KEY SHARE,
    which writers do not wait for among themselves) until the caller's transaction ends: a
    quota set in the meantime waits for the change, then counts it; a change that waited
    for a quota being set sees that quota, and charges the usage counted with it."""
    row = fetch_one(_org_quota_held_sql(connection.vendor), [team_id])
    return _org_quota_of(None if row is None else row[0])


def _org_quota_of(value: int | None) -> int:
    """The quota `_org_quota_held_sql` read (None: it found no team)."""
    if value is None:
        raise Team.DoesNotExist
    return int(value)


@functools.cache
def _org_quota_held_sql(vendor: str) -> str:
    # SQL because FOR KEY SHARE has no ORM spelling (identifiers come from model metadata;
    # the team is a parameter). SQLite has no row locks: its one write lock already orders
    # the two transactions.
    lock = " FOR KEY SHARE OF o" if vendor == "postgresql" else ""
    return (
        f"SELECT o.memory_quota_bytes FROM {table(Org)} o JOIN {table(Team)} t "
        f"ON t.org_id = o.id WHERE t.id = %s{lock}"
    )


def org_active_hold(*, team_id: int) -> None:
    """Hold the org of team `team_id` as `_org_live_sql` does, until the caller's
    transaction ends, or refuse with OrgPendingDeletion when it is no longer active. For a
    write of the org's data that has no statement of its own to fold the hold into."""
    if fetch_one(_org_live_sql(connection.vendor), [team_id, Org.Status.ACTIVE]) is None:
        raise _org_retirement(team_id=team_id) or OrgPendingDeletion()


def _org_retirement(*, team_id: int) -> OrgPendingDeletion | None:
    """The refusal of a write whose org is no longer active, with its deletion's due date
    as the authenticator gives it (None while the org is active). One read, made only on a
    refusal's path, to tell a retired org from the write's own refusal."""
    row = Org.objects.filter(teams=team_id).values_list("status", "deletion_due_at").first()
    if row is None or row[0] == Org.Status.ACTIVE:
        return None
    return OrgPendingDeletion(deletionDueAt=row[1])


@functools.cache
def _org_live_sql(vendor: str) -> str:
    # The retiring row of an org deletion request (and of the purge's claim, which needs
    # the org pending): every write of the org's documents holds it FOR SHARE while the org
    # is active, in the statement that writes where it can. The request's UPDATE then waits
    # for writes in flight, and a write after it finds the org retired and writes nothing.
    # Parameters: the team, then Org.Status.ACTIVE. SQLite has no row locks: its one write
    # lock already orders the two.
    # The org is found by its primary key from the team's row, so both are index probes
    # whatever the planner's statistics (a join let it scan the org table): measured, the
    # hold adds about 0.01 ms to a Save's statement (bench/README.md).
    lock = " FOR SHARE" if vendor == "postgresql" else ""
    return (
        f"SELECT 1 FROM {table(Org)} WHERE id = (SELECT org_id FROM {table(Team)} WHERE id = %s) "
        f"AND status = %s{lock}"
    )


def _team_usage_count(*, org_id: int) -> None:
    """Count the storage usage of every team of the org afresh: the current revision of
    each live document. Call inside a transaction holding the org's row FOR UPDATE, so no
    change of a document of the org is in flight (`_org_quota_held`)."""
    totals = (
        FileVersion.objects.filter(
            file__deleted_at__isnull=True,
            version=F("file__current_version"),
            file__workspace__team__org_id=org_id,
        )
        .values_list("file__workspace__team")
        .annotate(total=Sum("size_bytes"))
    )
    TeamStorageUsage.objects.filter(team__org_id=org_id).delete()
    TeamStorageUsage.objects.bulk_create(
        TeamStorageUsage(team_id=team_id, used_bytes=total) for team_id, total in totals
    )


def _file_create(*, workspace: Workspace, path: str, now: datetime) -> File:
    try:
        with transaction.atomic():
            return File.objects.create(
                workspace=workspace, path=path, current_version=1, created_at=now, updated_at=now
            )
    except IntegrityError as error:
        # The path is taken. To a first write (base version 0) that is a stale view of the
        # document, answered like any stale base version, with the version held now.
        if violation_code(error) != DocumentExists.code:
            raise
        raise _conflict(workspace=workspace, path=path) from None


def _conflict(*, workspace: Workspace, path: str) -> VersionConflict:
    current = File.objects.filter(workspace=workspace, path=path).values("current_version").first()
    return VersionConflict(currentVersion=current["current_version"] if current else 0)


def key_session_open(
    *, workspace: Workspace, user: User, browser_session_key: str | None = None
) -> KeySession:
    """Open a key session: the unwrapped data key goes into the cache, never the database.

    The key is cached before the row is stored, so an unreachable cache leaves no session
    that never held a key (KeySessionStoreUnavailable, nothing written). The row is stored
    only while `user` is still active (`_key_session_insert_sql`): a person deactivated
    after the request authenticated gets CredentialOwnerInactive and no session, as a
    request arriving after the deactivation would. One opened by a
    browser session (`browser_session_key`) ends with it: every use checks that session
    (`_key_session_key_of`), whose key the cache entry holds beside the data key.
    """
    data_key = workspace_key_ensure(workspace=workspace)
    session = KeySession(
        workspace=workspace,
        user=user,
        browser_session=(
            "" if browser_session_key is None else browser_session_digest(browser_session_key)
        ),
    )
    entry = {"workspace_id": workspace.pk, "user_id": user.pk, "key": data_key}
    if browser_session_key is not None:
        entry["browser_session"] = browser_session_key
    try:
        cache.set(session.cache_key, entry, timeout=settings.KEY_SESSION_IDLE_SECONDS)
    except CACHE_ERRORS:
        raise KeySessionStoreUnavailable() from None
    with driver_cursor() as cursor:
        cursor.execute(
            _key_session_insert_sql(connection.vendor),
            [
                pk_param(KeySession, session.pk),
                workspace.pk,
                user.pk,
                datetime_param(session.created_at),
                session.browser_session,
                user.pk,
                True,
            ],
        )
        inserted = cursor.rowcount == 1
    if not inserted:
        cached_secrets_discard(cache_keys=[session.cache_key])
        raise CredentialOwnerInactive()
    # As the ORM would load the row just stored, its workspace and person attached.
    stored = loaded(
        KeySession,
        {
            "id": session.pk,
            "workspace_id": workspace.pk,
            "user_id": user.pk,
            "created_at": session.created_at,
            "revoked_at": None,
            "browser_session": session.browser_session,
        },
    )
    stored.workspace, stored.user = workspace, user
    return stored


@functools.cache
def _key_session_insert_sql(vendor: str) -> str:
    # SQL because an INSERT ... SELECT has no ORM spelling. The person's row is the
    # retiring row of `user_deactivate`, held FOR SHARE by the insert itself: a
    # deactivation that commits first leaves it nothing to insert; one that comes later
    # waits for it, then finds the new session among those it revokes. Parameters: the
    # session's id, workspace, person, creation time and browser session digest, then the
    # person and True.
    lock = " FOR SHARE" if vendor == "postgresql" else ""
    return (
        f"INSERT INTO {table(KeySession)} (id, workspace_id, user_id, created_at, "
        f"browser_session) SELECT %s, %s, %s, %s, %s FROM {table(User)} "
        f"WHERE id = %s AND is_active = %s{lock}"
    )


def key_session_for_browser(
    *, workspace: Workspace, user: User, browser_session_key: str, reopen: bool = False
) -> KeySession | None:
    """This browser session's key session on `workspace`, opening one if it has none: one
    live key session per browser session and workspace, however many tabs ask at once.

    Its newest one is kept while live. One evicted after idling is replaced, since the
    member is active again; a revoked one is not (revoking is the member's explicit
    choice: None) unless `reopen` (Settings' "open a new one"). The member's membership
    row is locked while deciding, so two first visits (two tabs) serialize: the second
    finds the first's session instead of opening another.
    """
    digest = browser_session_digest(browser_session_key)
    # A visit usually finds its live session: only opening one takes the lock, and decides
    # again under it.
    decided, kept = _browser_key_session_kept(
        digest=digest, workspace=workspace, user=user, reopen=reopen
    )
    if decided:
        return kept
    with transaction.atomic():
        WorkspaceMembership.objects.select_for_update().filter(
            workspace=workspace, user=user
        ).first()
        decided, kept = _browser_key_session_kept(
            digest=digest, workspace=workspace, user=user, reopen=reopen
        )
        if decided:
            return kept
        return key_session_open(
            workspace=workspace, user=user, browser_session_key=browser_session_key
        )


def _browser_key_session_kept(
    *, digest: str, workspace: Workspace, user: User, reopen: bool
) -> tuple[bool, KeySession | None]:
    """Whether the newest key session browser session `digest` opened on `workspace` is the
    answer of `key_session_for_browser`, and that answer: it while live (or while the cache
    cannot tell), None once revoked unless `reopen`. Not decided: none yet, or one to
    replace."""
    newest = (
        KeySession.objects.filter(browser_session=digest, workspace=workspace, user=user)
        .order_by("-created_at", "-pk")
        .first()
    )
    if newest is None:
        return False, None
    try:
        key_session_resolve(session_id=newest.pk, workspace=workspace, user=user)
    except KeySessionUnavailable as unavailable:
        revoked = unavailable.detail.get("reason") == "revoked"
        return (True, None) if revoked and not reopen else (False, None)
    except KeySessionStoreUnavailable:
        # Kept for when the cache is back; the page works without a key session.
        return True, newest
    return True, newest


def key_sessions_end_for_browser(*, user: User, browser_session_key: str) -> None:
    """Revoke every key session `browser_session_key` opened (at sign-out), each audited."""
    with transaction.atomic():
        sessions = KeySession.objects.filter(
            user=user,
            browser_session=browser_session_digest(browser_session_key),
            revoked_at__isnull=True,
        ).order_by("pk")
        for session in sessions:
            key_session_revoke(session=session, revoked_by=user)


def browser_session_digest(browser_session_key: str) -> str:
    # A browser session's key is its cookie, a bearer secret: the database keeps its hash.
    return bearer_secret_digest(browser_session_key)


def browser_session_is_live(*, session_key: str, user: User) -> bool:
    """Whether the browser session `session_key` is still `user`'s sign-in
    (`_browser_session_owner`)."""
    _owner, live = _browser_session_owner(session_key=session_key, user_id=user.pk)
    return live


def _browser_session_owner(*, session_key: str, user_id: int) -> tuple[User | None, bool]:
    """Person `user_id` as stored now (None if gone), and whether the browser session
    `session_key` still signs them in: not signed out (from the frame or the admin), not
    expired, and not signed in before their password changed (its auth hash no longer
    matches, which Django itself judges only on the session's next use). Both rows are read
    in one statement on every call, so no cache delays a sign-out or a password change.

    Read from the database session store, the product's `SESSION_ENGINE`, as it loads a
    session: an unexpired row, decoded (a tampered one decodes to nothing)."""
    found = user_with_browser_session(user_id=user_id, session_key=session_key, now=timezone.now())
    if found is None:
        return None, False
    owner, session_data = found
    if session_data is None:
        return owner, False
    session = SessionStore().decode(session_data)
    if session.get(SESSION_KEY) != str(owner.pk):
        return owner, False
    session_hash = session.get(HASH_SESSION_KEY) or ""
    return owner, any(
        constant_time_compare(session_hash, current)
        for current in (owner.get_session_auth_hash(), *owner.get_session_auth_fallback_hash())
    )


def key_session_resolve(*, session_id: uuid.UUID, workspace: Workspace, user: User) -> bytes:
    """Return the data key held by a live key session of `user` on `workspace`.

    Refuses an unknown or foreign session, a revoked one (durable row), one the cache has
    evicted after idling, and one whose browser session has ended (revoked here, on this
    use). Each use restarts the idle timeout.
    """
    revoked = key_session_revoked(session_id=session_id, workspace_id=workspace.pk, user_id=user.pk)
    if revoked is None:
        raise KeySessionUnavailable(reason="unknown")
    if revoked:
        raise KeySessionUnavailable(reason="revoked")
    try:
        entry = _key_session_cache_read(session_id=session_id, workspace_id=workspace.pk)
    except CACHE_ERRORS:
        raise KeySessionStoreUnavailable() from None
    if entry is None:
        raise KeySessionUnavailable(reason="expired")
    data_key = _key_session_key_of(session_id, entry)
    if data_key is None:
        raise KeySessionUnavailable(reason="revoked")
    return data_key


def key_session_cached_data_key(
    *, session_id: uuid.UUID, workspace_id: int, restart_idle: bool = True
) -> bytes | None:
    """The cache half of `key_session_resolve`: the session's key if it is still cached
    (restarting its idle timeout unless `restart_idle` is False) and its browser session, if
    it has one, has not ended; else None, also when the cache cannot be reached (the key is
    unavailable either way). Call only once the session's row has been checked (owner,
    workspace, no revocation) in the same request."""
    try:
        entry = _key_session_cache_read(
            session_id=session_id, workspace_id=workspace_id, restart_idle=restart_idle
        )
    except CACHE_ERRORS:
        logger.warning("key-session cache unreachable; key session %s unavailable", session_id)
        return None
    return None if entry is None else _key_session_key_of(session_id, entry)


def _key_session_cache_read(
    *, session_id: uuid.UUID, workspace_id: int, restart_idle: bool = True
) -> dict[str, Any] | None:
    # Read and restart in one Redis call (GETEX; memory_project/cache.py). The caller has
    # already matched the session's row to this workspace, so the entry it restarts is the
    # one it reads.
    if restart_idle:
        entry = cache_get_and_touch(
            key_session_cache_key(session_id), settings.KEY_SESSION_IDLE_SECONDS
        )
    else:
        entry = cache.get(key_session_cache_key(session_id))
    if entry is None or entry["workspace_id"] != workspace_id:
        return None
    return dict(entry)


def _key_session_key_of(session_id: uuid.UUID, entry: dict[str, Any]) -> bytes | None:
    """The data key a cache `entry` holds, unless the browser session that opened the key
    session has ended (signed out, expired, or a password changed since): checked on every
    use, since an expiry or a password change (in the admin, or `manage.py changepassword`)
    reaches no code of ours when it happens. Such a session is revoked here, durably, so
    that the fence and every later check see it revoked; None then."""
    browser_session_key = entry.get("browser_session")
    if browser_session_key is None:
        return bytes(entry["key"])
    owner, live = _browser_session_owner(session_key=browser_session_key, user_id=entry["user_id"])
    if live:
        return bytes(entry["key"])
    session = KeySession.objects.filter(pk=session_id).first()
    if session is not None:
        key_session_revoke(session=session, revoked_by=owner)
    return None


def cached_secrets_discard(*, cache_keys: list[str]) -> None:
    """Drop cached secrets (session keys, delivery credentials) whose rows were revoked or
    deleted, if the cache can be reached.

    Never raises: the durable revocation (or the missing row) is what every use checks
    first, so a secret left behind by an outage can no longer be used, and expires.
    """
    try:
        cache.delete_many(cache_keys)
    except CACHE_ERRORS:
        logger.warning("cache unreachable; %d cached secret(s) left to expire", len(cache_keys))


def key_session_revoke(*, session: KeySession, revoked_by: User | None) -> KeySession:
    """Revoke a key session: record the revocation durably, then discard the key.

    The revocation row is what every later use checks, so a key a crash left in the cache
    is refused too. Being a new row, no lock can make a fence wait for it: stamping the
    session row, which the commit fence locks, in the same transaction gives the fence a
    real order against this. Revoking twice keeps the first revocation.
    """
    with transaction.atomic():
        _, is_new = KeySessionRevocation.objects.get_or_create(
            key_session=session, defaults={"revoked_by": revoked_by}
        )
        if is_new:
            audit_record(
                actor=revoked_by,
                action=AuditEvent.Action.KEY_SESSION_REVOKED,
                org_id=_audit_org_id(workspaces=session.workspace_id),
                workspace_id=session.workspace_id,
                target_type="key_session",
                target_id=session.pk,
            )
        KeySession.objects.filter(pk=session.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        transaction.on_commit(lambda: cached_secrets_discard(cache_keys=[session.cache_key]))
    session.refresh_from_db(fields=["revoked_at"])
    return session


def user_deactivate(*, user: User, actor: User) -> None:
    """Deactivate a person (staff, `actor`), audited as `user_active_changed`: no credential
    of theirs is accepted from now on, and every key session and token they still hold is
    revoked at once (`_credentials_revoke`). Their sessions would otherwise stay usable by a
    turn already running until they idled out, and their tokens would work again the day
    they are reactivated."""
    _user_active_set(user=user, actor=actor, active=False)


def user_reactivate(*, user: User, actor: User) -> None:
    """Reactivate a person (staff, `actor`), audited as `user_active_changed`. Nothing they
    held comes back: they sign in again, open new key sessions and make new tokens. Any
    key session or token still unrevoked (a person deactivated around `user_deactivate`, by
    a shell or an import, kept theirs) is revoked here, before they can use it."""
    _user_active_set(user=user, actor=actor, active=True)


def _user_active_set(*, user: User, actor: User, active: bool) -> None:
    """The person's row is updated first: a key session being opened holds it
    (`key_session_open`), so the sessions read after it include every one opened before,
    and none can be opened after."""
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(is_active=active)
        user.is_active = active
        _credentials_revoke(user=user, actor=actor)
        _user_audit(
            user=user,
            actor=actor,
            action=AuditEvent.Action.USER_ACTIVE_CHANGED,
            detail={"isActive": active},
        )


def _credentials_revoke(*, user: User, actor: User) -> None:
    """Revoke every key session and token (their bots' they hold too) `user` still holds,
    each audited, the keys leaving the cache on commit."""
    sessions = KeySession.objects.filter(user=user, revoked_at__isnull=True).order_by("pk")
    for session in sessions:
        key_session_revoke(session=session, revoked_by=actor)
    for token in ApiToken.objects.filter(user=user, revoked_at__isnull=True).order_by("pk"):
        api_token_revoke(token=token, actor=actor)


@dataclass(frozen=True)
class StaffAccess:
    """What a person may do in the admin: its flags, and their groups' and own permissions'
    primary keys."""

    is_staff: bool
    is_superuser: bool
    group_pks: frozenset[int]
    permission_pks: frozenset[int]


def user_created_record(*, user: User, actor: User) -> None:
    """Audit a person staff (`actor`) created in the admin, as `user_created`."""
    _user_audit(user=user, actor=actor, action=AuditEvent.Action.USER_CREATED, detail={})


def user_access_changed_record(
    *, user: User, actor: User, before: StaffAccess, after: StaffAccess
) -> None:
    """Audit what staff (`actor`) changed of `user`'s admin access, as `user_access_changed`
    naming each flag's change and the groups and permissions granted or withdrawn (by name,
    so the record reads the same after one is deleted). A save changing none records nothing."""
    detail: dict[str, object] = {}
    for key, field in (("isStaff", "is_staff"), ("isSuperuser", "is_superuser")):
        if getattr(before, field) != getattr(after, field):
            detail[key] = {"from": getattr(before, field), "to": getattr(after, field)}

    def group_names(pks: frozenset[int]) -> list[str]:
        return sorted(Group.objects.filter(pk__in=pks).values_list("name", flat=True))

    def permission_names(pks: frozenset[int]) -> list[str]:
        rows = Permission.objects.filter(pk__in=pks).values_list(
            "content_type__app_label", "codename"
        )
        return sorted(f"{app_label}.{codename}" for app_label, codename in rows)

    for key, names, was, now in (
        ("groups", group_names, before.group_pks, after.group_pks),
        ("permissions", permission_names, before.permission_pks, after.permission_pks),
    ):
        if added := names(now - was):
            detail[f"{key}Added"] = added
        if removed := names(was - now):
            detail[f"{key}Removed"] = removed
    if detail:
        _user_audit(
            user=user, actor=actor, action=AuditEvent.Action.USER_ACCESS_CHANGED, detail=detail
        )


def _user_audit(*, user: User, actor: User, action: str, detail: dict[str, object]) -> None:
    audit_record(
        actor=actor,
        action=action,
        org_id=None,
        target_type="user",
        target_id=user.pk,
        detail=detail,
    )


def file_delete(*, workspace: Workspace, path: str, base_version: int) -> File:
    """Delete a live file at `base_version`: it becomes a tombstone, its revisions kept.

    One conditional UPDATE on (path, version, live). The version does not move, since no
    revision is written: restoring names the same version. A file that is already
    deleted, missing, or at another version is a VersionConflict and nothing changes.
    Its bytes no longer count towards the team's storage usage.
    """
    return _file_deleted_set(
        workspace=workspace, path=path, base_version=base_version, is_deleted=True
    )


def file_restore(*, workspace: Workspace, path: str, base_version: int) -> File:
    """Bring a deleted file at `base_version` back to life, with the text it had.

    The mirror of `file_delete`: one conditional UPDATE on (path, version, deleted). A live
    or missing file, or another version, is a VersionConflict and nothing changes. Its
    bytes count towards the team's storage usage again, so a restore past the org's quota
    is TenantQuotaExceeded.
    """
    return _file_deleted_set(
        workspace=workspace, path=path, base_version=base_version, is_deleted=False
    )


def _file_deleted_set(
    *, workspace: Workspace, path: str, base_version: int, is_deleted: bool
) -> File:
    """Turn the file at `base_version` into a tombstone (`is_deleted`) or back, with one
    conditional UPDATE that also requires the other state, and move its bytes out of or
    into the team's storage usage in the same transaction."""
    now = timezone.now()
    with transaction.atomic():
        at_base = File.objects.filter(workspace=workspace, path=path, current_version=base_version)
        updated = at_base.filter(deleted_at__isnull=is_deleted).update(
            deleted_at=now if is_deleted else None, updated_at=now
        )
        if updated != 1:
            raise _state_conflict(workspace=workspace, path=path)
        size = _revision_bytes(workspace, path, base_version)
        team_storage_charge(workspace=workspace, delta=-size if is_deleted else size)
    return File.objects.get(workspace=workspace, path=path)


def _revision_bytes(workspace: Workspace, path: str, version: int) -> int:
    return (
        FileVersion.objects.filter(file__workspace=workspace, file__path=path, version=version)
        .values_list("size_bytes", flat=True)
        .get()
    )


def file_move(*, workspace: Workspace, source: str, destination: str, base_version: int) -> File:
    """Rename a live file at `base_version` from `source` to `destination`.

    The file keeps its id, so its revisions (sealed with the file id, not the path) stay
    readable, and its version. A stale or missing source is a VersionConflict. A taken
    destination, live or deleted, is DocumentExists: the path's unique constraint decides,
    not an earlier look, so of two concurrent moves to one destination exactly one lands
    (the other blocks on the index entry until the first commits, then fails).
    """
    now = timezone.now()
    with transaction.atomic():
        with violation_raises(DocumentExists, path=destination):
            updated = File.objects.filter(
                workspace=workspace,
                path=source,
                current_version=base_version,
                deleted_at__isnull=True,
            ).update(path=destination, updated_at=now)
        if updated != 1:
            raise _state_conflict(workspace=workspace, path=source)
    return File.objects.get(workspace=workspace, path=destination)


def _state_conflict(*, workspace: Workspace, path: str) -> VersionConflict:
    """The conflict for a delete, restore or move: the version held now and whether the file
    is deleted, so a client can tell "changed since" from "already deleted" (0 if none)."""
    current = (
        File.objects.filter(workspace=workspace, path=path)
        .values("current_version", "deleted_at")
        .first()
    )
    if current is None:
        return VersionConflict(currentVersion=0, deleted=False)
    return VersionConflict(
        currentVersion=current["current_version"], deleted=current["deleted_at"] is not None
    )
