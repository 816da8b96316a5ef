from django.apps import AppConfig


class AutomationConfig(AppConfig):
    name = "automation"
    verbose_name = "Assistant automation"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web included), so that a task can
        # be looked up by name and run eagerly when no broker is configured.
        from automation import tasks  # noqa: F401
        from automation.api import schema  # noqa: F401
        from automation.panels import ASSISTANT_PANEL, MEMORY_PREVIEW_PANEL
        from automation.selectors import capture_links_for_revisions
        from memory.panels import frame_panel_register
        from memory.provenance import capture_links_register

        frame_panel_register(ASSISTANT_PANEL)
        frame_panel_register(MEMORY_PREVIEW_PANEL)
        # Blame names the turn behind each line a capture wrote.
        capture_links_register(capture_links_for_revisions)
