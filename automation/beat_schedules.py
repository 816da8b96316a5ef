"""Beat schedules kept in django-celery-beat's tables, for the data migrations that add
them (visible and editable in the admin, Periodic tasks). They take the migration's `apps`,
so they build the historical models a migration must use."""

from __future__ import annotations

from typing import Any


def nightly_task_schedule(apps: Any, *, name: str, task: str, hour: int) -> None:
    """Schedule `task` as the periodic task `name`, every day at `hour`:00 UTC."""
    crontab_model = apps.get_model("django_celery_beat", "CrontabSchedule")
    task_model = apps.get_model("django_celery_beat", "PeriodicTask")
    crontab, _ = crontab_model.objects.get_or_create(
        minute="0",
        hour=str(hour),
        day_of_week="*",
        day_of_month="*",
        month_of_year="*",
        timezone="UTC",
    )
    task_model.objects.get_or_create(
        name=name, defaults={"task": task, "crontab": crontab, "enabled": True}
    )


def task_unschedule(apps: Any, *, name: str) -> None:
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=name).delete()
