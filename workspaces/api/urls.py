"""Tenancy's routes: sign-in, tokens, workspaces and their members, consent and key sessions."""

from django.urls import include, path

from memory_project.api import converters  # noqa: F401 (registers `<id:...>`)
from workspaces.api import views

# Below `workspaces/<id>/`.
workspace_routes = [
    path("members", views.WorkspaceMemberListApi.as_view(), name="workspace-member-list"),
    path("members/<id:user_id>", views.WorkspaceMemberApi.as_view(), name="workspace-member"),
    path("ai", views.WorkspaceAiConsentApi.as_view(), name="workspace-ai"),
    path("key-sessions", views.KeySessionListCreateApi.as_view(), name="key-session-list"),
]

urlpatterns = [
    path("ping", views.PingApi.as_view(), name="ping"),
    path("auth/jwt", views.JwtIssueApi.as_view(), name="auth-jwt"),
    path("tokens", views.TokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<id:token_id>", views.TokenRevokeApi.as_view(), name="token-revoke"),
    path("workspaces", views.WorkspaceListApi.as_view(), name="workspace-list"),
    path("workspaces/<id:workspace_id>/", include(workspace_routes)),
    path(
        "automation/key-sessions/<uuid:session_id>",
        views.KeySessionRevokeApi.as_view(),
        name="key-session-revoke",
    ),
]
