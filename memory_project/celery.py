import os
import sys
from typing import Any

from celery import Celery
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_project.settings")

app = Celery("memory_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect
def _settings_or_refuse(**_: Any) -> None:
    # The worker and beat read the settings first here. A malformed one stops them with
    # its message alone, as it stops manage.py and gunicorn, not under a traceback through
    # Celery's command line.
    try:
        settings.INSTALLED_APPS  # noqa: B018 (evaluates the settings module)
    except ImproperlyConfigured as error:
        sys.exit(f"Configuration error: {error}")
