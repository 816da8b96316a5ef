"""The web frame's memory pages. The JSON routes are in `memory.api.urls`."""

from django.urls import include, path

from memory import views

app_name = "memory"

workspace_pages = [
    path("memory/", views.memory_frame, name="frame"),
    path("changes/", views.memory_changes, name="changes"),
    path("changes/<int:version>/", views.memory_revision, name="revision"),
    path("notes/", views.notes, name="notes"),
    path("notes/edit/", views.note, name="note"),
    path("search/", views.search, name="search"),
]

urlpatterns = [
    path("workspaces/<int:workspace_id>/", include(workspace_pages)),
    path("team/memory/", views.team_memory, name="spaces"),
    path("team/bots/", views.team_bots, name="bots"),
]
