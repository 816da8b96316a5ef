"""Staff inspection of memory policies and proposals. Both are view-only: the mode moves
only by the compare-and-set service (which audits it), and a proposal is history whose
changes are memory text, so its sealed body is never shown or loaded."""

from __future__ import annotations

from typing import ClassVar

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from memory.models import MemoryPolicy, Proposal
from workspaces.admin import ViewOnlyAdmin


@admin.register(MemoryPolicy)
class MemoryPolicyAdmin(ViewOnlyAdmin):
    fields = (
        "workspace",
        "mode",
        "policy_revision",
        "clear_generation",
        "updated_at",
        "updated_by",
    )
    list_display = fields
    list_select_related = ("workspace", "updated_by")
    list_filter = ("mode", "updated_at")
    search_fields = ("workspace__name", "workspace__id__exact")


@admin.register(Proposal)
class ProposalAdmin(ViewOnlyAdmin):
    # Never `changes_ciphertext`.
    fields: ClassVar[tuple[str, ...]] = (
        "id",
        "workspace",
        "reason",
        "status",
        "base_version",
        "clear_generation",
        "created_at",
        "resolved_at",
        "resolved_by",
    )
    list_display = ("id", "workspace", "reason", "status", "base_version", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("status", "reason", "created_at")
    search_fields = ("=id", "=admission_id", "workspace__name", "workspace__id__exact")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Proposal]:
        return super().get_queryset(request).defer("changes_ciphertext")
