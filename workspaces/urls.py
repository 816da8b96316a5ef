"""The web frame's workspace pages: sign-in, sign-out, the workspace list and Settings.

The memory pages (Memory frame, Changes, Notes) are routed by `memory.urls`, since this
app may not import the memory app (imports point automation -> memory -> workspaces).
"""

from django.urls import path

from workspaces import views

app_name = "workspaces"

urlpatterns = [
    path("accounts/login/", views.SignInView.as_view(), name="sign-in"),
    path("accounts/logout/", views.sign_out, name="sign-out"),
    path("workspaces/", views.workspace_list, name="list"),
    path("workspaces/<int:workspace_id>/settings/", views.workspace_settings, name="settings"),
    path("workspaces/<int:workspace_id>/settings/ai/", views.workspace_ai_set, name="ai"),
    path(
        "workspaces/<int:workspace_id>/settings/key-sessions/",
        views.key_session_open,
        name="key-session-open",
    ),
    path(
        "workspaces/<int:workspace_id>/settings/key-sessions/<uuid:session_id>/revoke/",
        views.key_session_revoke,
        name="key-session-revoke",
    ),
]
