"""The web frame's memory pages. The JSON routes are in `memory.api.urls`."""

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("workspaces/<int:workspace_id>/memory/", views.memory_frame, name="frame"),
    path("workspaces/<int:workspace_id>/changes/", views.memory_changes, name="changes"),
    path(
        "workspaces/<int:workspace_id>/changes/<int:version>/",
        views.memory_revision,
        name="revision",
    ),
    path("workspaces/<int:workspace_id>/notes/", views.notes, name="notes"),
    path("workspaces/<int:workspace_id>/notes/edit/", views.note, name="note"),
    path("team/memory/", views.team_memory, name="spaces"),
    path("team/bots/", views.team_bots, name="bots"),
]
