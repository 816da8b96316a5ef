from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Workspace memory"

    def ready(self) -> None:
        # Parsed by the one auto-memory parser, which needs the models: so here, at start-up,
        # rather than in settings.
        from memory.bots import auto_memory_parse

        try:
            auto_memory_parse(settings.AUTO_MEMORY)
        except ValueError:
            raise ImproperlyConfigured(
                "AUTO_MEMORY must be on, off, true, false, 1, 0 or blank (C131)"
            ) from None
