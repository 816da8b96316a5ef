import os
import sys
from typing import Any

from celery import Celery
from celery.signals import beat_init, worker_init
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


@worker_init.connect
@beat_init.connect
def _broker_or_refuse(**_: Any) -> None:
    # Without a broker the web process runs every task itself (CELERY_TASK_ALWAYS_EAGER),
    # and a worker or beat would talk to an in-memory transport no other process shares:
    # running, receiving nothing, its beat's nightly purge lost.
    if settings.CELERY_TASK_ALWAYS_EAGER:
        sys.exit(
            "Configuration error: CELERY_BROKER_URL is not set, so the web process runs "
            "every task itself; set it to run a worker or beat"
        )
