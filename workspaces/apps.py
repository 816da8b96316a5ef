from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"
    verbose_name = "Tenancy and workspaces"

    def ready(self) -> None:
        # Registers the OpenAPI descriptions of this app's credentials.
        from workspaces.api import schema  # noqa: F401
