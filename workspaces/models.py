"""Tenancy and identity: orgs, teams (the tenant), workspaces, memberships and API tokens."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.utils import timezone

from workspaces.constraints import (
    after_check,
    choices_check,
    length_check,
    minimum_check,
    set_iff_check,
    unique,
)
from workspaces.crypto import WrappedKeyField
from workspaces.lookalikes import display_name_validator


class User(AbstractUser):
    """A person (or a demo account). The project's own model from the first migration, so a
    field can be added later without swapping the user model."""


# Choices are declared beside their model, not inside it, so that the model's CHECK
# constraints (in Meta, which cannot see the model's own names) can list their values.
class OrgStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    PENDING_DELETION = "pending_deletion", "Pending deletion"
    PURGING = "purging", "Being purged"


class Org(models.Model):
    Status = OrgStatus

    name = models.CharField(max_length=200, validators=[display_name_validator])
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.ACTIVE)
    deletion_due_at = models.DateTimeField(null=True, blank=True)
    memory_quota_bytes = models.BigIntegerField(
        default=0,
        help_text=(
            "Ceiling on the document bytes each of the org's teams stores (its storage "
            "usage); 0 means unlimited."
        ),
    )
    created_at = models.DateTimeField(default=timezone.now)
    # Set when a purge claims the org, so that a purge that died can be taken over later.
    purge_claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            unique(["name"], "workspaces_org_name_unique", "NAME_TAKEN"),
            choices_check("status", OrgStatus, "workspaces_org_status_valid", "ORG_STATUS_INVALID"),
            models.CheckConstraint(
                condition=(
                    Q(
                        status__in=[OrgStatus.PENDING_DELETION, OrgStatus.PURGING],
                        deletion_due_at__isnull=False,
                    )
                    | (Q(status=OrgStatus.ACTIVE) & Q(deletion_due_at__isnull=True))
                    | ~Q(status__in=OrgStatus.values)
                ),
                name="workspaces_org_deletion_due_iff_pending",
                violation_error_code="ORG_STATUS_INVALID",
            ),
            set_iff_check(
                "purge_claimed_at",
                "status",
                OrgStatus.PURGING,
                "workspaces_org_purge_claim_iff_purging",
                "ORG_STATUS_INVALID",
            ),
            minimum_check(
                "memory_quota_bytes", 0, "workspaces_org_memory_quota_non_negative", "QUOTA_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class AutoMemorySetting(models.TextChoices):
    ON = "on", "On"
    OFF = "off", "Off"
    # Unset defers to the next level of the precedence chain (the team default, then the
    # environment), which is not the same as off.
    UNSET = "", "Unset"


class Team(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=200, validators=[display_name_validator])
    # The team's default for its bots' auto-memory mirror: one level of the precedence
    # chain (flag > bot > team > AUTO_MEMORY environment > off).
    auto_memory_default = models.CharField(
        max_length=3,
        choices=AutoMemorySetting.choices,
        default=AutoMemorySetting.UNSET,
        blank=True,
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(["org", "name"], "workspaces_team_name_unique_in_org", "NAME_TAKEN"),
            choices_check(
                "auto_memory_default",
                AutoMemorySetting,
                "workspaces_team_auto_memory_default_valid",
                "AUTO_MEMORY_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ByteCounter(models.Model):
    """A row holding a byte counter a quota bounds: a team's storage usage, and (in memory) a
    space's bytes and its tenant's. `workspaces.counters` moves any of them by conditional
    UPDATEs of this column; that it never goes below zero is declared once, here."""

    used_bytes = models.BigIntegerField(default=0)

    class Meta:
        abstract = True
        constraints = [
            minimum_check(
                "used_bytes", 0, "%(app_label)s_%(class)s_used_non_negative", "USAGE_INVALID"
            ),
        ]


class TeamStorageUsage(ByteCounter):
    """A team's storage usage: the bytes of the current revision of every live document in
    its workspaces (notes and memory alike), which the org's quota bounds.

    Kept by conditional updates in the same transaction as each write, delete and restore
    (`workspaces.services.team_storage_charge`), never recomputed from the documents. Memory
    spaces keep an aggregate of their own (`memory.TenantSpaceUsage`).
    """

    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="storage_usage"
    )

    def __str__(self) -> str:
        return f"storage of team {self.team_id}: {self.used_bytes} bytes"


class TeamRole(models.TextChoices):
    OWNER = "owner", "Owner"
    MEMBER = "member", "Member"


class TeamMembership(models.Model):
    """Belonging to a team: what lets a user hold credentials scoped to it."""

    Role = TeamRole

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="team_memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(["team", "user"], "workspaces_teammembership_unique", "ALREADY_MEMBER"),
            choices_check("role", TeamRole, "workspaces_teammembership_role_valid", "ROLE_INVALID"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Workspace(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="workspaces")
    name = models.CharField(max_length=200, validators=[display_name_validator])
    ai_enabled = models.BooleanField(default=False)
    # Bumped by every accepted consent change, so work admitted under an older
    # consent can tell that consent moved even if it moved back.
    ai_consent_revision = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(["team", "name"], "workspaces_workspace_name_unique_in_team", "NAME_TAKEN"),
            minimum_check(
                "ai_consent_revision",
                0,
                "workspaces_workspace_consent_revision_non_negative",
                "REVISION_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class WorkspaceRole(models.TextChoices):
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"


class WorkspaceMembership(models.Model):
    """Normal authenticated workspace access; admins may also change workspace AI consent."""

    Role = WorkspaceRole

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="workspace_memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(
                ["workspace", "user"], "workspaces_workspacemembership_unique", "ALREADY_MEMBER"
            ),
            choices_check(
                "role", WorkspaceRole, "workspaces_workspacemembership_role_valid", "ROLE_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN


class TokenScope(models.TextChoices):
    API = "api", "Person API"
    MCP = "mcp", "MCP server only"
    BOT = "bot", "A bot's token"


class BotRuntime(models.TextChoices):
    CLAUDE_CODE = "claude_code", "Claude Code"
    CLAW = "claw", "Claw"
    PI = "pi", "Pi"
    KIMI = "kimi", "Kimi"
    GROK = "grok", "Grok"
    CODEX = "codex", "Codex"
    MCP = "mcp", "MCP client"


class Bot(models.Model):
    """An agent identity of one team: the runtime it drives, its memory spec and its
    auto-memory setting. Its slug is its id within the team, the `<id>` of `bot:<id>`.

    The memory spec is stored as given and validated only by the service that saves it
    (`memory.bots`), which refuses a spec with an error diagnostic.
    """

    Runtime = BotRuntime
    AutoMemory = AutoMemorySetting

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="bots")
    # A slug ([A-Za-z0-9_-]) is also one valid space-handle segment, so a bot id can name a
    # `bot` space without escaping.
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200, validators=[display_name_validator])
    runtime = models.CharField(max_length=16, choices=Runtime.choices)
    memory_spec = models.JSONField(null=True, blank=True)
    auto_memory = models.CharField(
        max_length=3, choices=AutoMemory.choices, default=AutoMemory.UNSET, blank=True
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(["team", "slug"], "workspaces_bot_slug_unique_in_team", "BOT_SLUG_TAKEN"),
            choices_check(
                "runtime", BotRuntime, "workspaces_bot_runtime_valid", "BOT_RUNTIME_INVALID"
            ),
            choices_check(
                "auto_memory",
                AutoMemorySetting,
                "workspaces_bot_auto_memory_valid",
                "AUTO_MEMORY_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.slug} ({self.team})"


class ApiToken(models.Model):
    """A personal access token (iap_...). Only its SHA-256 is stored; the token is shown once.

    Its scope, chosen at creation and never changed, decides where it is accepted: the
    person API (`/api/`), or only the MCP server, so a token handed to an external MCP
    client cannot read, Save or Clear memory through the person routes.

    A bot token is the same row with scope `bot` and its `bot` set (exactly then, by a
    CHECK): it authenticates the bot, never a person. Its `user` is the team owner who
    issued it and answers for it, so like every token it ends when that person leaves the
    team or is deactivated.
    """

    Scope = TokenScope

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, validators=[display_name_validator])
    # Tokens minted before scopes existed were used on the person API, so that is what
    # the migration gives them; an MCP client needs a new, MCP-only token.
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.API)
    bot = models.ForeignKey(
        Bot, on_delete=models.CASCADE, null=True, blank=True, related_name="tokens"
    )
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Kept to the minute (`api_token_use_record`), so that using a token seldom writes.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            unique(["token_hash"], "workspaces_apitoken_hash_unique", "TOKEN_HASH_TAKEN"),
            after_check(
                "expires_at",
                "created_at",
                "workspaces_apitoken_expires_after_created",
                "TOKEN_EXPIRY_INVALID",
            ),
            length_check(
                "token_hash", 64, "workspaces_apitoken_hash_is_sha256", "TOKEN_HASH_INVALID"
            ),
            choices_check(
                "scope", TokenScope, "workspaces_apitoken_scope_valid", "TOKEN_SCOPE_INVALID"
            ),
            set_iff_check(
                "bot",
                "scope",
                TokenScope.BOT,
                "workspaces_apitoken_bot_iff_bot_scope",
                "TOKEN_BOT_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class WrappedDataKey(models.Model):
    """A data key stored only wrapped by the deployment key: a workspace's, and (in memory)
    a space tenant's. What a rotation re-wraps and staff look at, declared once."""

    wrapped_key = WrappedKeyField()
    # Fingerprint of the deployment key that wrapped it: lets a rotation resume where it
    # stopped, and lets staff see which rows still need re-wrapping.
    wrapping_key_id = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)
    rewrapped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        constraints = [
            length_check(
                "wrapping_key_id",
                16,
                "%(app_label)s_%(class)s_wrapping_key_id_valid",
                "KEY_ID_INVALID",
            ),
        ]


class WorkspaceKey(WrappedDataKey):
    """A workspace's data key."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="data_key"
    )

    def __str__(self) -> str:
        return f"data key of workspace {self.workspace_id}"


class File(models.Model):
    """One document of a workspace's versioned, encrypted store (notes and the memory document).

    `current_version` is the compare-and-set point: every write is a conditional UPDATE on
    it (or, for the first revision, an insert guarded by the path's uniqueness).
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1024)
    current_version = models.BigIntegerField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(
                ["workspace", "path"], "workspaces_file_path_unique_in_workspace", "DOCUMENT_EXISTS"
            ),
            minimum_check(
                "current_version", 1, "workspaces_file_current_version_positive", "VERSION_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.current_version}"

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class AuthorKind(models.TextChoices):
    HUMAN = "human", "A person"
    AUTOMATIC = "automatic", "The assistant"
    IMPORT = "import", "An import"


class ChangeKind(models.TextChoices):
    SAVE = "save", "Save"
    CLEAR = "clear", "Clear"
    UNDO = "undo", "Undo"
    CAPTURE = "capture", "Capture"


class FileVersion(models.Model):
    """An immutable revision: ciphertext, its SHA-256, and sizes. Never plaintext, never a diff."""

    AuthorKind = AuthorKind
    ChangeKind = ChangeKind

    file = models.ForeignKey(File, on_delete=models.CASCADE, related_name="versions")
    version = models.BigIntegerField()
    ciphertext = models.BinaryField()
    ciphertext_sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    author_kind = models.CharField(max_length=16, choices=AuthorKind.choices)
    change_kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    author = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(["file", "version"], "workspaces_fileversion_unique", "VERSION_CONFLICT"),
            minimum_check(
                "version", 1, "workspaces_fileversion_version_positive", "VERSION_INVALID"
            ),
            minimum_check(
                "size_bytes", 0, "workspaces_fileversion_size_non_negative", "SIZE_INVALID"
            ),
            length_check(
                "ciphertext_sha256", 64, "workspaces_fileversion_digest_is_sha256", "DIGEST_INVALID"
            ),
            choices_check(
                "author_kind",
                AuthorKind,
                "workspaces_fileversion_author_kind_valid",
                "AUTHOR_KIND_INVALID",
            ),
            choices_check(
                "change_kind",
                ChangeKind,
                "workspaces_fileversion_change_kind_valid",
                "CHANGE_KIND_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.file_id} v{self.version}"


class KeySession(models.Model):
    """A member's time-bounded, revocable authority for the assistant to use a workspace key.

    The row holds no key: `key_session_open` caches it under this id, and
    `key_session_revoke` stamps `revoked_at` here (each says why).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="key_sessions")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="key_sessions")
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The SHA-256 of the browser session that opened it (`browser_session_digest`), empty
    # for one opened with a token: the frame finds its browser's session by it, and sign-out
    # ends them. The session's own key, which judging its end needs, is kept only in the
    # cache entry, beside the data key.
    browser_session = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(
                fields=["browser_session", "workspace"],
                condition=~models.Q(browser_session=""),
                name="workspaces_keysession_browser",
            )
        ]

    def __str__(self) -> str:
        return f"key session {self.id}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def cache_key(self) -> str:
        """Where the cache holds this session's unwrapped data key."""
        return key_session_cache_key(self.pk)


def key_session_cache_key(session_id: object) -> str:
    return f"key-session:{session_id}"


class KeySessionRevocation(models.Model):
    """The durable record that a key session was revoked (idle eviction writes none)."""

    key_session = models.OneToOneField(
        KeySession, on_delete=models.CASCADE, primary_key=True, related_name="revocation"
    )
    revoked_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"revocation of {self.key_session_id}"


class AuditAction(models.TextChoices):
    POLICY_CHANGED = "policy_changed", "Memory mode changed"
    MEMORY_CLEARED = "memory_cleared", "Memory cleared"
    KEY_SESSION_REVOKED = "key_session_revoked", "Key session revoked"
    AI_CONSENT_CHANGED = "ai_consent_changed", "Workspace AI consent changed"
    ORG_QUOTA_CHANGED = "org_quota_changed", "Org memory quota changed"
    ORG_DELETION_REQUESTED = "org_deletion_requested", "Org deletion requested"
    ORG_RESTORED = "org_restored", "Org restored"
    ORG_PURGED = "org_purged", "Org purged"
    TOKEN_CREATED = "token_created", "Personal access token created"
    TOKEN_REVOKED = "token_revoked", "Personal access token revoked"
    SIGN_IN_SUCCEEDED = "sign_in_succeeded", "Signed in"
    SIGN_IN_FAILED = "sign_in_failed", "Sign-in failed"
    SPACE_GLOBAL_WRITTEN = "space_global_written", "Global memory space written"
    SPACE_GLOBAL_DELETED = "space_global_deleted", "Global memory space document deleted"
    SPACE_UNADDRESSABLE_DELETED = (
        "space_unaddressable_deleted",
        "Memory space document under a path no longer valid deleted",
    )
    SPACE_QUOTA_OVERRIDDEN = "space_quota_overridden", "Team memory space quota overridden"
    SPACE_PRIVATE_EXPIRED = "space_private_expired", "Private memory space expired"
    BOT_CREATED = "bot_created", "Bot created"
    BOT_SPEC_CHANGED = "bot_spec_changed", "Bot memory spec changed"
    BOT_TOKEN_ISSUED = "bot_token_issued", "Bot token issued"
    BOT_TOKEN_REVOKED = "bot_token_revoked", "Bot token revoked"
    WORKSPACE_CREATED = "workspace_created", "Workspace created"
    MEMBER_ADDED = "member_added", "Member added"
    MEMBER_REMOVED = "member_removed", "Member removed"
    MEMBER_ROLE_CHANGED = "member_role_changed", "Member role changed"
    ORG_CREATED = "org_created", "Org created"
    ORG_RENAMED = "org_renamed", "Org renamed"
    TEAM_CREATED = "team_created", "Team created"
    TEAM_RENAMED = "team_renamed", "Team renamed"
    USER_CREATED = "user_created", "Person created"
    USER_ACTIVE_CHANGED = "user_active_changed", "Person deactivated or reactivated"
    USER_ACCESS_CHANGED = "user_access_changed", "Person's staff access changed"


class AuditEvent(models.Model):
    """Who did which security-relevant thing to what, and when. Ids and versions only:
    never memory text, never a key or token.

    Target ids are plain values, not foreign keys, so the trail outlives what it
    describes (an org purge removes the org but keeps the record that it was purged).
    """

    Action = AuditAction

    occurred_at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=32, choices=Action.choices)
    org_id = models.BigIntegerField(null=True, blank=True)
    workspace_id = models.BigIntegerField(null=True, blank=True)
    target_type = models.CharField(max_length=32, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            choices_check(
                "action", AuditAction, "workspaces_auditevent_action_valid", "ACTION_INVALID"
            ),
        ]
        indexes = [
            models.Index(fields=["org_id", "-occurred_at"]),
            models.Index(fields=["workspace_id", "-occurred_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} at {self.occurred_at:%Y-%m-%d %H:%M}"
