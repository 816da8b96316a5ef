"""The memory document's policy (the document itself is a file of the workspace store), and
the rows of the memory spaces' database adapter."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory.spaces.handle import USER_BOUND, Visibility
from workspaces.constraints import choices_check, minimum_check, set_iff_check, unique
from workspaces.models import ByteCounter, FileVersion, Team, User, Workspace, WrappedDataKey


class MemoryMode(models.TextChoices):
    OFF = "off", "Off"
    READ_ONLY = "read_only", "Read only"
    AUTO = "auto", "Auto"


class MemoryPolicy(models.Model):
    """One row per workspace; a missing row reads as read only, revision 0, generation 0.

    `policy_revision` moves on every mode change and retires admissions taken under the
    previous one; `clear_generation` moves on every Clear and retires everything taken
    before it. Neither ever goes back.
    """

    Mode = MemoryMode

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="memory_policy"
    )
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.READ_ONLY)
    policy_revision = models.BigIntegerField(default=0)
    clear_generation = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name_plural = "memory policies"
        constraints = [
            choices_check("mode", MemoryMode, "memory_memorypolicy_mode_valid", "MODE_INVALID"),
            minimum_check(
                "policy_revision",
                0,
                "memory_memorypolicy_revision_non_negative",
                "REVISION_INVALID",
            ),
            minimum_check(
                "clear_generation",
                0,
                "memory_memorypolicy_generation_non_negative",
                "GENERATION_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_mode_display()} (revision {self.policy_revision})"


# The memory document's place in the workspace's file store. Reserved: only the memory
# routes write it.
MEMORY_PATH = ".zudotext/memory/memory.md"


class ProposalStatus(models.TextChoices):
    OPEN = "open", "Open"
    APPLIED = "applied", "Applied"
    DISMISSED = "dismissed", "Dismissed"


class ProposalReason(models.TextChoices):
    READ_ONLY = "read_only", "Memory is read only"
    VERSION_CONFLICT = "version_conflict", "Memory changed since the assistant read it"
    INSTRUCTION_FLAGGED = "instruction_flagged", "A line reads as an instruction to the assistant"


class Proposal(models.Model):
    """A change the assistant suggested but did not write: in Read only, after a conflict, or
    because a line it adds reads as an instruction to the assistant (even in Auto).

    The changes are memory text, so they are stored sealed under the workspace key, like
    revisions. A proposal carries the Clear generation it was made under: once memory is
    cleared it can no longer be applied.
    """

    Status = ProposalStatus
    Reason = ProposalReason

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="proposals")
    # The admission the proposing turn ran under (an automation id; no foreign key, so
    # that memory does not depend on the app above it).
    admission_id = models.UUIDField()
    changes_ciphertext = models.BinaryField()
    base_version = models.BigIntegerField()
    clear_generation = models.BigIntegerField()
    reason = models.CharField(max_length=32, choices=Reason.choices)
    # The ids of the instruction lint's rules the lines it adds trip (`memory.instruction_lint`),
    # whatever its reason: a person sees the warning before applying any proposal.
    flagged_rules = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            choices_check(
                "status", ProposalStatus, "memory_proposal_status_valid", "STATUS_INVALID"
            ),
            choices_check(
                "reason", ProposalReason, "memory_proposal_reason_valid", "REASON_INVALID"
            ),
            set_iff_check(
                "resolved_at",
                "status",
                ProposalStatus.OPEN,
                "memory_proposal_resolved_iff_closed",
                "STATUS_INVALID",
                is_set=False,
            ),
            minimum_check(
                ("base_version", "clear_generation"),
                0,
                "memory_proposal_versions_non_negative",
                "VERSION_INVALID",
            ),
            # A proposal kept back because of the lint names at least one rule.
            models.CheckConstraint(
                condition=~Q(reason=ProposalReason.INSTRUCTION_FLAGGED) | ~Q(flagged_rules=[]),
                name="memory_proposal_flagged_names_rules",
                violation_error_code="REASON_INVALID",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "status", "-created_at"])]

    def __str__(self) -> str:
        return f"proposal {self.id} ({self.status})"


class LineProvenance(models.Model):
    """Where each line of one memory revision came from: the revision that introduced it and
    its line there, never text (`memory.provenance`).

    A cache derived from the sealed revisions, so it can always be rebuilt: written once, by
    the first blame that needs it, and never changed. `origin_runs` holds runs of lines,
    each `[origin version, index of its first line in that revision, count]`, so a line that
    survives a hundred revisions costs nothing more.
    """

    revision = models.OneToOneField(
        FileVersion, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    line_count = models.BigIntegerField()
    origin_runs = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "line provenances"
        constraints = [
            minimum_check(
                "line_count", 0, "memory_lineprovenance_line_count_non_negative", "LINE_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return f"provenance of revision {self.revision_id} ({self.line_count} lines)"


class LineReview(models.Model):
    """A person's "still true": a line kept on review, recorded without a revision.

    The line is named by where it came from (its origin revision and its index there),
    which it keeps for as long as it stays unchanged, so the review follows it through
    later revisions and lapses with it once it is edited. Every review is kept; the
    latest counts.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    origin = models.ForeignKey(FileVersion, on_delete=models.CASCADE, related_name="+")
    origin_line = models.BigIntegerField()
    # The memory version the person was looking at when they kept the line.
    reviewed_version = models.BigIntegerField()
    reviewer = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reviewed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            minimum_check(
                "origin_line", 0, "memory_linereview_origin_line_non_negative", "LINE_INVALID"
            ),
            minimum_check(
                "reviewed_version", 1, "memory_linereview_version_positive", "VERSION_INVALID"
            ),
        ]
        indexes = [models.Index(fields=["origin", "origin_line", "-reviewed_at"])]

    def __str__(self) -> str:
        return f"review of line {self.origin_line} of revision {self.origin_id}"


# Memory spaces (memory/spaces/): the rows of the database adapter. A body is stored only
# sealed under its tenant's space key; the checksum of a body is sealed too, since a clear
# digest of a short note would let anyone holding the table confirm a guess at its text.


# The handle's visibilities, the one list of them (memory/spaces/handle.py).
_VISIBILITIES = [visibility.value for visibility in Visibility]
_USER_BOUND_VISIBILITIES = sorted(visibility.value for visibility in USER_BOUND)


class MemorySpace(ByteCounter):
    """One memory space: the handle's axes as columns, and the space's byte counter.

    `handle_id` is the handle's deterministic id (`SpaceHandle.id`), the key every lookup
    uses. The row is created by the first write and locked by every write and delete (the
    first lock a change of the space takes). No quota is kept here: quotas are resolved
    at write time from the settings, so changing one applies to existing spaces.
    """

    handle_id = models.CharField(max_length=2048)
    visibility = models.CharField(
        max_length=16, choices=[(value, value.replace("_", " ")) for value in _VISIBILITIES]
    )
    name = models.CharField(max_length=128)
    # The team; None only for the global space, which belongs to the whole deployment.
    tenant = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="memory_spaces"
    )
    project = models.CharField(max_length=128, blank=True, default="")
    bot = models.CharField(max_length=128, blank=True, default="")
    # The person a `private` or `user` space belongs to. A plain id, not a foreign key: the
    # space is named by it, and removing a person must not silently drop documents whose
    # bytes the tenant's counter still holds (the tenant's purge removes them).
    user_id = models.BigIntegerField(null=True, blank=True)
    run = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # When a document of the space was last written or deleted: a `private` space expires
    # MEMORY_PRIVATE_TTL_DAYS after it.
    last_written_at = models.DateTimeField(default=timezone.now)
    # The highest revision a deleted document of the space had: a create starts above it,
    # so no revision of a path is ever answered for two texts (`DocumentMeta.revision`).
    deleted_revision_max = models.BigIntegerField(default=0)

    class Meta(ByteCounter.Meta):
        constraints = [
            unique(["handle_id"], "memory_memoryspace_handle_unique", "SPACE_EXISTS"),
            minimum_check(
                "deleted_revision_max",
                0,
                "memory_memoryspace_deleted_revision_non_negative",
                "REVISION_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(visibility__in=_VISIBILITIES),
                name="memory_memoryspace_visibility_valid",
                violation_error_code="SPACE_INVALID",
            ),
            set_iff_check(
                "tenant",
                "visibility",
                Visibility.GLOBAL.value,
                "memory_memoryspace_tenant_iff_not_global",
                "SPACE_INVALID",
                is_set=False,
            ),
            set_iff_check(
                "user_id",
                "visibility__in",
                _USER_BOUND_VISIBILITIES,
                "memory_memoryspace_user_iff_user_bound",
                "SPACE_INVALID",
            ),
            *ByteCounter.Meta.constraints,
        ]

    def __str__(self) -> str:
        return f"{self.visibility} space {self.name!r} ({self.used_bytes} bytes)"


class SpaceDocument(models.Model):
    """One document of a space: its current revision only, sealed.

    `revision` is the compare-and-set point (a conditional UPDATE on the expected one, or
    an INSERT guarded by the path's uniqueness for a create). `size` is the body's length
    in bytes, which the counters add up; the body and its checksum are ciphertext under the
    tenant's space key, bound to the space, path and revision.
    """

    space = models.ForeignKey(MemorySpace, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=1024)
    revision = models.BigIntegerField()
    size = models.BigIntegerField()
    body_ciphertext = models.BinaryField()
    checksum_ciphertext = models.BinaryField()
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(
                ["space", "path"], "memory_spacedocument_path_unique_in_space", "VERSION_CONFLICT"
            ),
            minimum_check(
                "revision", 1, "memory_spacedocument_revision_positive", "VERSION_INVALID"
            ),
            minimum_check("size", 0, "memory_spacedocument_size_non_negative", "SIZE_INVALID"),
            models.CheckConstraint(
                condition=~Q(updated_by=""),
                name="memory_spacedocument_updated_by_present",
                violation_error_code="ATTRIBUTION_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.revision}"


class TenantSpaceUsage(ByteCounter):
    """The bytes of every memory space of one team, which its space quota bounds.

    Apart from the team's document storage (`workspaces.TeamStorageUsage`): both adapters
    keep this aggregate the same way, and the filesystem one has no workspace documents.
    Changed in the same transaction as each space write and delete, by conditional
    updates; `manage.py memory reconcile` recomputes it from the documents.
    `quota_override_bytes`, when set, replaces MEMORY_QUOTA_TENANT_BYTES for this team
    (0: no cap); staff set it through `space_tenant_quota_override_set`, which audits it.
    """

    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="space_usage"
    )
    quota_override_bytes = models.BigIntegerField(null=True, blank=True)

    class Meta(ByteCounter.Meta):
        constraints = [
            *ByteCounter.Meta.constraints,
            models.CheckConstraint(
                condition=Q(quota_override_bytes__isnull=True) | Q(quota_override_bytes__gte=0),
                name="memory_tenantspaceusage_quota_override_non_negative",
                violation_error_code="QUOTA_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"space usage of team {self.team_id}: {self.used_bytes} bytes"


class SpaceKey(WrappedDataKey):
    """The data key that seals a tenant's space documents. The global space has its own
    key: the row with no tenant. At most one row per tenant, and one for global."""

    tenant = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )

    class Meta(WrappedDataKey.Meta):
        constraints = [
            # Coalesce: a plain unique column lets any number of NULLs through, and the
            # global key must be one row too.
            models.UniqueConstraint(
                Coalesce("tenant", Value(0)),
                name="memory_spacekey_tenant_unique",
                violation_error_code="KEY_EXISTS",
            ),
            *WrappedDataKey.Meta.constraints,
        ]

    def __str__(self) -> str:
        return "space key of global" if self.tenant_id is None else f"space key of {self.tenant_id}"
