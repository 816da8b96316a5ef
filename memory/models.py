"""The memory document's policy. The document itself is a file of the workspace store."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from workspaces.constraints import choices_check, minimum_check
from workspaces.models import User, Workspace


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


class Proposal(models.Model):
    """A change the assistant suggested but did not write: in Read only, or after a conflict.

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
            models.CheckConstraint(
                condition=Q(status=ProposalStatus.OPEN, resolved_at__isnull=True)
                | (~Q(status=ProposalStatus.OPEN) & Q(resolved_at__isnull=False)),
                name="memory_proposal_resolved_iff_closed",
                violation_error_code="STATUS_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(base_version__gte=0) & Q(clear_generation__gte=0),
                name="memory_proposal_versions_non_negative",
                violation_error_code="VERSION_INVALID",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "status", "-created_at"])]

    def __str__(self) -> str:
        return f"proposal {self.id} ({self.status})"
