"""Human Save of a 4 KiB document: the service function vs the same SQL in raw psycopg.

The service side calls `memory.services.memory_save`, which reads and unwraps the
workspace data key, does the compare-and-set UPDATE on the file row (returning it), seals
the text with AES-GCM and inserts the revision.

The raw side issues the same statements (captured from the service with
CaptureQueriesContext) on its own psycopg connection, in one transaction per save,
against the file of a second workspace. It skips the ORM and the encryption: the
revision gets 4096 + 28 random bytes (AES-GCM adds a 12-byte nonce and a 16-byte tag)
and their SHA-256. The ratio is therefore what the ORM and the cryptography cost.

The two sides run interleaved in blocks so machine noise falls on both alike.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from typing import Any

import figures
import psycopg
from django.db import connection
from django.test.utils import CaptureQueriesContext
from figures import p90

from memory.models import MEMORY_PATH
from memory.services import memory_save
from workspaces.models import File, FileVersion, Org, Team, User, Workspace
from workspaces.services import workspace_create

NAME = "memory_save_4k_service_vs_raw_psycopg"
DOCUMENT_BYTES = 4096
# AES-GCM as sealed by workspaces.crypto.seal: 12-byte nonce + 16-byte tag.
SEAL_OVERHEAD_BYTES = 28
WARMUP_SAVES = 30
MEASURED_SAVES = 400
BLOCK = 20

# The statements memory_save issues for a save to an existing document (captured with
# CaptureQueriesContext). The raw side replays them in the order captured from the
# service at the start of each run, savepoints included; a statement it cannot mirror
# stops the benchmark instead of comparing different work.
SQL_KEY = (
    'SELECT "workspaces_workspacekey"."workspace_id", "workspaces_workspacekey"."wrapped_key", '
    '"workspaces_workspacekey"."wrapping_key_id", "workspaces_workspacekey"."created_at", '
    '"workspaces_workspacekey"."rewrapped_at" FROM "workspaces_workspacekey" '
    'WHERE "workspaces_workspacekey"."workspace_id" = %s '
    'ORDER BY "workspaces_workspacekey"."workspace_id" ASC LIMIT 1'
)
SQL_BUMP = (
    'UPDATE "workspaces_file" SET current_version = current_version + 1, updated_at = %s '
    "WHERE workspace_id = %s AND path = %s AND current_version = %s "
    "AND deleted_at IS NULL RETURNING id, current_version"
)
SQL_REVISION = (
    'INSERT INTO "workspaces_fileversion" ("file_id", "version", "ciphertext", '
    '"ciphertext_sha256", "size_bytes", "author_kind", "change_kind", "author_id", '
    '"created_at") VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) '
    'RETURNING "workspaces_fileversion"."id"'
)

_PARAGRAPHS = (
    "- Prefers **short** answers; cite `docs/errors.md` when an error code comes up.\n",
    "- The team ships on Thursdays (UTC); freeze starts Wednesday 18:00.\n",
    "> Decision 2024-03: keep revisions encrypted at rest, one data key per workspace.\n",
    "1. Run `make test` before review.\n2. Link the ticket, e.g. [WM-142](#wm-142).\n",
    "| area | owner | status |\n|------|-------|--------|\n| memory | ana | ok |\n",
    "```python\nresult = memory_save(workspace=ws, author=me, base_version=v, content=t)\n```\n",
)


def document(counter: int) -> str:
    """4096 bytes of mixed-ASCII Markdown, different for every `counter`."""
    parts = [f"# Workspace memory (save {counter:09d})\n\n"]
    size = len(parts[0])
    index = 0
    while size < DOCUMENT_BYTES:
        heading = f"## Note {index} of save {counter}\n"
        text = heading + _PARAGRAPHS[(counter + index) % len(_PARAGRAPHS)] + "\n"
        parts.append(text)
        size += len(text)
        index += 1
    text = "".join(parts)[:DOCUMENT_BYTES]
    assert len(text.encode()) == DOCUMENT_BYTES
    return text


# Captured statement prefix -> step the raw side replays. BEGIN needs no step: psycopg
# sends it before the first statement of each transaction, so both sides make the same
# number of round trips (the service reads the key just before its BEGIN, in autocommit).
_STEPS = (
    ('SELECT "workspaces_workspacekey"', "key"),
    ("BEGIN", "begin"),
    ("SAVEPOINT", "savepoint"),
    ('UPDATE "workspaces_file"', "bump"),
    ('INSERT INTO "workspaces_fileversion"', "revision"),
    ("RELEASE SAVEPOINT", "release"),
    ("COMMIT", "commit"),
)


def plan_from_capture(statements: list[str]) -> list[str]:
    """The raw side's steps for the captured statements, in their order."""
    plan: list[str] = []
    for statement in statements:
        step = next((step for prefix, step in _STEPS if statement.startswith(prefix)), None)
        if step is None:
            raise RuntimeError(
                f"{NAME}: memory_save issues a statement the raw baseline does not mirror; "
                f"update bench/bench_memory_save.py: {statement[:200]}"
            )
        plan.append(step)
    for step in ("key", "bump", "revision", "commit"):
        if plan.count(step) != 1:
            raise RuntimeError(f"{NAME}: expected one {step!r} statement per save, got {plan}")
    if plan[-1] != "commit" or plan.count("savepoint") != plan.count("release"):
        raise RuntimeError(f"{NAME}: unexpected transaction shape {plan}")
    return plan


class ServiceSide:
    def __init__(self, *, workspace: Workspace, author: User) -> None:
        self.workspace = workspace
        self.author = author
        self.version = 0

    def save(self, counter: int) -> None:
        revision: FileVersion = memory_save(
            workspace=self.workspace,
            author=self.author,
            base_version=self.version,
            content=document(counter),
        )
        self.version = revision.version


class RawSide:
    """The service's statements on a separate psycopg connection, one transaction per save."""

    def __init__(
        self,
        *,
        conn: psycopg.Connection[Any],
        workspace: Workspace,
        author: User,
        plan: list[str],
    ) -> None:
        self.conn = conn
        self.workspace_id = workspace.pk
        self.author_id = author.pk
        self.plan = plan
        file = File.objects.get(workspace=workspace, path=MEMORY_PATH)
        self.version = file.current_version

    def save(self, counter: int) -> None:
        encoded = document(counter).encode()
        now = datetime.now(UTC)
        file_id = version = 0
        with self.conn.cursor() as cur:
            for step in self.plan:
                if step == "key":
                    cur.execute(SQL_KEY, (self.workspace_id,))
                    if cur.fetchone() is None:
                        raise RuntimeError("raw side: workspace key missing")
                elif step == "savepoint":
                    cur.execute("SAVEPOINT bench_s1")
                elif step == "bump":
                    cur.execute(SQL_BUMP, (now, self.workspace_id, MEMORY_PATH, self.version))
                    bumped = cur.fetchone()
                    if bumped is None:
                        raise RuntimeError(f"raw side: version {self.version} is not current")
                    file_id, version = bumped
                elif step == "revision":
                    ciphertext = os.urandom(len(encoded) + SEAL_OVERHEAD_BYTES)
                    cur.execute(
                        SQL_REVISION,
                        (
                            file_id,
                            version,
                            ciphertext,
                            hashlib.sha256(ciphertext).hexdigest(),
                            len(encoded),
                            FileVersion.AuthorKind.HUMAN.value,
                            FileVersion.ChangeKind.SAVE.value,
                            self.author_id,
                            now,
                        ),
                    )
                    cur.fetchone()
                elif step == "release":
                    cur.execute("RELEASE SAVEPOINT bench_s1")
                elif step == "commit":
                    self.conn.commit()
        self.version = version


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench org")
    team = Team.objects.create(org=org, name="bench team")
    author = User.objects.create_user(username="bench", password="bench-password-unused")
    service_ws = workspace_create(team=team, name="bench service", admin=author)
    raw_ws = workspace_create(team=team, name="bench raw", admin=author)

    service = ServiceSide(workspace=service_ws, author=author)
    service.save(0)  # creates the document (version 1)
    # One untimed save to the existing document, captured: the raw side mirrors it.
    with CaptureQueriesContext(connection) as captured:
        service.save(0)
    statements = [query["sql"] for query in captured.captured_queries]
    plan = plan_from_capture(statements)
    # The raw side's workspace key and file row come from a first save through the
    # service; every later raw save updates that existing document.
    memory_save(workspace=raw_ws, author=author, base_version=0, content=document(0))

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=False) as conn:
        raw = RawSide(conn=conn, workspace=raw_ws, author=author, plan=plan)
        service_ms, raw_ms = figures.interleaved_samples(
            service.save, raw.save, warmup=WARMUP_SAVES, measured=MEASURED_SAVES, block=BLOCK
        )

    # Version 1 is each document's creation; the service also made the captured save.
    expected_raw = 1 + WARMUP_SAVES + MEASURED_SAVES
    if service.version != expected_raw + 1 or raw.version != expected_raw:
        raise RuntimeError(
            f"unexpected versions: service {service.version} (expected {expected_raw + 1}), "
            f"raw {raw.version} (expected {expected_raw})"
        )

    notes = (
        f"{MEASURED_SAVES} saves per side after {WARMUP_SAVES} warm-up, interleaved in blocks "
        f"of {BLOCK}; p90 service {p90(service_ms):.3f} ms, raw {p90(raw_ms):.3f} ms; "
        f"both sides issue {len(plan)} statements per save ({' '.join(plan)}); "
        "raw side skips the ORM, key unwrapping and AES-GCM sealing"
    )
    return [
        figures.service_vs_raw_result(
            name=NAME,
            per="save",
            service_ms=service_ms,
            raw_ms=raw_ms,
            notes=notes,
        )
    ]
