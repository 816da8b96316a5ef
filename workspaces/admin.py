from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from workspaces.models import (
    ApiToken,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.services import api_token_revoke


@admin.register(User)
class WorkspaceUserAdmin(UserAdmin):
    list_display = ("username", "email", "is_active", "is_super_admin", "is_staff")
    list_filter = ("is_active", "is_super_admin", "is_staff")
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Product", {"fields": ("is_super_admin",)}))


@admin.register(Org)
class OrgAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "deletion_due_at", "memory_quota_bytes", "created_at")
    list_filter = ("status",)
    search_fields = ("name",)
    readonly_fields = ("created_at",)


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "org", "created_at")
    list_select_related = ("org",)
    search_fields = ("name", "org__name")
    raw_id_fields = ("org",)


@admin.register(TeamMembership)
class TeamMembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "team", "role", "created_at")
    list_select_related = ("user", "team")
    list_filter = ("role",)
    search_fields = ("user__username", "team__name")
    raw_id_fields = ("user", "team")


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "ai_enabled", "ai_consent_revision", "created_at")
    list_select_related = ("team",)
    list_filter = ("ai_enabled",)
    search_fields = ("name", "team__name")
    raw_id_fields = ("team",)
    # Consent changes go through the compare-and-set service so the revision moves.
    readonly_fields = ("ai_enabled", "ai_consent_revision", "created_at")


@admin.register(WorkspaceMembership)
class WorkspaceMembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "workspace", "role", "created_at")
    list_select_related = ("user", "workspace")
    list_filter = ("role",)
    search_fields = ("user__username", "workspace__name")
    raw_id_fields = ("user", "workspace")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "team", "created_at", "expires_at", "revoked_at")
    list_select_related = ("user", "team")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "user__username", "team__name")
    # The hash is never shown; staff can only inspect and revoke.
    fields = ("name", "user", "team", "created_at", "expires_at", "revoked_at")
    readonly_fields = fields
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            api_token_revoke(token=token)
