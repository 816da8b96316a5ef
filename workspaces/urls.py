"""The web frame's workspace pages: sign-in, sign-out, the workspace list and Settings.

The memory pages (Memory frame, Changes, Notes) are routed by `memory.urls`, since this
app may not import the memory app (imports point automation -> memory -> workspaces).
"""

from django.urls import include, path

from workspaces import views

app_name = "workspaces"

settings_pages = [
    path("", views.workspace_settings, name="settings"),
    path("ai/", views.workspace_ai_set, name="ai"),
    path("key-sessions/", views.key_session_open, name="key-session-open"),
    path(
        "key-sessions/<uuid:session_id>/revoke/",
        views.key_session_revoke,
        name="key-session-revoke",
    ),
]

urlpatterns = [
    path("accounts/login/", views.SignInView.as_view(), name="sign-in"),
    path("accounts/logout/", views.sign_out, name="sign-out"),
    path("workspaces/", views.workspace_list, name="list"),
    path("workspaces/<int:workspace_id>/settings/", include(settings_pages)),
]
