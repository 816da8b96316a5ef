"""A space document's sealed body is stored out of line without compression.

AES-GCM ciphertext does not compress, but PostgreSQL tries pglz on every value over about
2 kB before it moves it out of line (the column's default storage, EXTENDED). EXTERNAL
skips the attempt: a binary COPY of an import's 2,000 bodies of 4 kB took about a quarter
less of the server's CPU (bench/README.md, archive). Rows written before keep their storage
until rewritten. Other databases have no such setting, and nothing is done there.
"""

from django.db import migrations

_TABLE, _COLUMN = "memory_spacedocument", "body_ciphertext"


def _storage_set(schema_editor, storage: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"ALTER TABLE {quote(_TABLE)} ALTER COLUMN {quote(_COLUMN)} SET STORAGE {storage}"
    )


def external(apps, schema_editor) -> None:
    _storage_set(schema_editor, "EXTERNAL")


def extended(apps, schema_editor) -> None:
    _storage_set(schema_editor, "EXTENDED")


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_proposal_flagged_rules")]

    operations = [migrations.RunPython(external, extended)]
