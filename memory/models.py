"""The memory document's policy. The document itself is a file of the workspace store."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from workspaces.models import User, Workspace


class MemoryPolicy(models.Model):
    """One row per workspace; a missing row reads as read only, revision 0, generation 0.

    `policy_revision` moves on every mode change and retires admissions taken under the
    previous one; `clear_generation` moves on every Clear and retires everything taken
    before it. Neither ever goes back.
    """

    class Mode(models.TextChoices):
        OFF = "off", "Off"
        READ_ONLY = "read_only", "Read only"
        AUTO = "auto", "Auto"

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
            models.CheckConstraint(
                condition=Q(mode__in=["off", "read_only", "auto"]),
                name="memory_memorypolicy_mode_valid",
                violation_error_code="MODE_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(policy_revision__gte=0),
                name="memory_memorypolicy_revision_non_negative",
                violation_error_code="REVISION_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(clear_generation__gte=0),
                name="memory_memorypolicy_generation_non_negative",
                violation_error_code="GENERATION_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_mode_display()} (revision {self.policy_revision})"


# The memory document's place in the workspace's file store. Reserved: only the memory
# routes write it.
MEMORY_PATH = ".zudotext/memory/memory.md"
