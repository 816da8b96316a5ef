"""Schedule the nightly org purge at 02:00 UTC in django-celery-beat's tables, where it is
visible and editable in the admin (Periodic tasks)."""

from django.db import migrations

TASK_NAME = "Nightly org purge"
TASK = "automation.org_purge_sweep"


def schedule(apps, schema_editor):
    crontab_model = apps.get_model("django_celery_beat", "CrontabSchedule")
    task_model = apps.get_model("django_celery_beat", "PeriodicTask")
    crontab, _ = crontab_model.objects.get_or_create(
        minute="0",
        hour="2",
        day_of_week="*",
        day_of_month="*",
        month_of_year="*",
        timezone="UTC",
    )
    task_model.objects.get_or_create(
        name=TASK_NAME,
        defaults={"task": TASK, "crontab": crontab, "enabled": True},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("automation", "0003_capture_refusal_receipt"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
