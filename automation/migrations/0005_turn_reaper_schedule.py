"""Schedule the turn reaper every minute in django-celery-beat's tables, where it is visible
and editable in the admin (Periodic tasks)."""

from django.db import migrations

TASK_NAME = "Turn reaper"
TASK = "automation.turn_reap"


def schedule(apps, schema_editor):
    interval_model = apps.get_model("django_celery_beat", "IntervalSchedule")
    task_model = apps.get_model("django_celery_beat", "PeriodicTask")
    interval, _ = interval_model.objects.get_or_create(every=60, period="seconds")
    task_model.objects.get_or_create(
        name=TASK_NAME,
        defaults={"task": TASK, "interval": interval, "enabled": True},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("automation", "0004_nightly_org_purge_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
