from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from automation.api.urls import automation_workspace_routes
from memory_project.api.views import SchemaBrowserView, SchemaView

handler400 = "memory_project.api.exceptions.bad_request_view"
handler404 = "memory_project.api.exceptions.not_found_view"
handler500 = "memory_project.api.exceptions.server_error_view"

urlpatterns = [
    # An agent runtime's routes first: a recall runs before every model call, and behind the
    # person API's and memory's routes its resolution went through twelve resolvers, each of
    # their patterns tried (about 6% of a recall's instructions; bench/README.md). No other
    # route begins with this prefix, so the order changes no match.
    path("api/v1/automation/workspaces/<id:workspace_id>/", include(automation_workspace_routes)),
    path("admin/", admin.site.urls),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SchemaBrowserView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("workspaces.api.urls")),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("automation.api.urls")),
    # The web frame: Django templates over the same selectors, services and JSON API.
    path("", RedirectView.as_view(pattern_name="workspaces:list", permanent=False)),
    path("", include("workspaces.urls")),
    path("", include("memory.urls")),
]
