"""Schedule the nightly expiry of private memory spaces at 02:00 UTC in django-celery-beat's
tables, where it is visible and editable in the admin (Periodic tasks)."""

from django.db import migrations

from automation.beat_schedules import nightly_task_schedule, task_unschedule

TASK_NAME = "Nightly private memory space expiry"


def schedule(apps, schema_editor):
    nightly_task_schedule(apps, name=TASK_NAME, task="automation.space_private_expire", hour=2)


def unschedule(apps, schema_editor):
    task_unschedule(apps, name=TASK_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("automation", "0007_bot_document_seen"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
