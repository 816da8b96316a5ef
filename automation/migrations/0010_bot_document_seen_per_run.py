# What a bot saw is kept per run: rows from before belong to calls without a run, whose
# digest is SHA-256 of the empty string.

import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models

NO_RUN_DIGEST = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class Migration(migrations.Migration):

    dependencies = [
        ('automation', '0009_purge_receipt'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='botdocumentseen',
            name='automation_botdocumentseen_unique',
        ),
        migrations.AddField(
            model_name='botdocumentseen',
            name='run_digest',
            field=models.CharField(default=NO_RUN_DIGEST, max_length=64),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name='botdocumentseen',
            constraint=models.UniqueConstraint(fields=('bot', 'space_digest', 'run_digest', 'path'), name='automation_botdocumentseen_unique', violation_error_code='SEEN_TAKEN'),
        ),
        migrations.AddConstraint(
            model_name='botdocumentseen',
            constraint=models.CheckConstraint(condition=django.db.models.lookups.Exact(django.db.models.functions.text.Length('run_digest'), 64), name='automation_botdocumentseen_run_digest_length', violation_error_code='DIGEST_INVALID'),
        ),
    ]
