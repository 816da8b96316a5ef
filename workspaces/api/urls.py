from django.urls import path

from workspaces.api import views

urlpatterns = [
    path("ping", views.PingApi.as_view(), name="ping"),
    path("auth/jwt", views.JwtIssueApi.as_view(), name="auth-jwt"),
    path("tokens", views.TokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<int:token_id>", views.TokenRevokeApi.as_view(), name="token-revoke"),
    path("workspaces", views.WorkspaceListApi.as_view(), name="workspace-list"),
    path(
        "workspaces/<int:workspace_id>/members",
        views.WorkspaceMemberListApi.as_view(),
        name="workspace-member-list",
    ),
    path(
        "workspaces/<int:workspace_id>/members/<int:user_id>",
        views.WorkspaceMemberApi.as_view(),
        name="workspace-member",
    ),
    path(
        "workspaces/<int:workspace_id>/ai",
        views.WorkspaceAiConsentApi.as_view(),
        name="workspace-ai",
    ),
    path(
        "workspaces/<int:workspace_id>/key-sessions",
        views.KeySessionListCreateApi.as_view(),
        name="key-session-list",
    ),
    path(
        "automation/key-sessions/<uuid:session_id>",
        views.KeySessionRevokeApi.as_view(),
        name="key-session-revoke",
    ),
]
