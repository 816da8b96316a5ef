"""`manage.py memory`: every subcommand locally against the database (and the filesystem
store where the store matters), and remotely against a live server with a real token; the
exit codes end to end in a subprocess."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import pty
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import DEFAULT_DB_ALIAS, connections

from conftest import Tenant
from memory.models import SpaceDocument
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.selectors import space_document_read
from memory.spaces.store import body_checksum
from memory.tests.secret_corpus import CREDENTIALS
from memory.tests.spaces.conftest import store_write
from workspaces.errors import VersionConflict
from workspaces.services import api_token_create

BASE_DIR = Path(settings.BASE_DIR)


def memory(*args: str, **kwargs: Any) -> str:
    """Run `manage.py memory ARGS` in this process; return its stdout."""
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO(), **kwargs)
    return out.getvalue()


def memory_json(*args: str) -> Any:
    return json.loads(memory(*args, "--json"))


def refused(*args: str) -> tuple[int, str, str]:
    """Run a command that must fail; return its exit code, message and stdout."""
    out = io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return failure.value.returncode, str(failure.value), out.getvalue()


def org_space(tenant: Tenant, name: str = "notes") -> list[str]:
    return ["--team", str(tenant.team.pk), "--visibility", "org", "--name", name]


def handle_of(tenant: Tenant, name: str = "notes") -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=tenant.team.pk)


def put(
    tenant: Tenant, path: str, body: bytes, base: int, tmp_path: Path, name: str = "notes"
) -> Any:
    source = tmp_path / "body.md"
    source.write_bytes(body)
    return memory_json(
        "put", path, *org_space(tenant, name), "--user", tenant.member.username,
        "--file", str(source), "--base-version", str(base),
    )  # fmt: skip


# Local mode


@pytest.mark.usefixtures("every_store")
def test_put_cat_ls_du_rm_round_trip_locally(tenant, tmp_path):
    space = [*org_space(tenant), "--user", tenant.member.username]

    written = put(tenant, "notes/a.md", b"# Alpha\nfirst\n", 0, tmp_path)
    rewritten = put(tenant, "notes/a.md", b"# Alpha\nsecond\n", 1, tmp_path)
    shown = memory("cat", "notes/a.md", *space)
    listing = memory_json("ls", *space, "--dir", "notes")
    usage = memory_json("du", *space)
    table = memory("ls", *space)

    assert written["revision"] == 1
    assert rewritten["revision"] == 2
    assert rewritten["updatedBy"] == f"user:{tenant.member.pk}"
    assert shown == "# Alpha\nsecond\n"
    assert [(doc["path"], doc["revision"], doc["title"]) for doc in listing["documents"]] == [
        ("notes/a.md", 2, "Alpha")
    ]
    assert "notes/a.md  2    15" in table
    assert usage["usedBytes"] == 15
    assert usage["quotaBytes"] == settings.MEMORY_QUOTA_SPACE_BYTES["org"]
    assert usage["space"]["id"] == handle_of(tenant).id

    removed = memory("rm", "notes/a.md", *space, "--base-version", "2")

    assert removed == "deleted notes/a.md\n"
    assert store_get().read(handle_of(tenant), "notes/a.md") is None
    assert store_get().usage(handle_of(tenant)).used_bytes == 0


@pytest.mark.django_db
def test_a_stale_base_version_is_refused_with_the_revision_to_retry_with(tenant, tmp_path):
    put(tenant, "a.md", b"one\n", 0, tmp_path)
    put(tenant, "a.md", b"two\n", 1, tmp_path)
    put(tenant, "a.md", b"three\n", 2, tmp_path)
    (tmp_path / "late.md").write_bytes(b"late\n")

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", tenant.member.username,
        "--file", str(tmp_path / "late.md"), "--base-version", "1",
    )  # fmt: skip

    assert code == 1
    assert message == (
        "VERSION_CONFLICT: the document is at revision 3; re-read it and retry with "
        "--base-version 3"
    )
    assert space_document_read(handle=handle_of(tenant), path="a.md").body == b"three\n"


@pytest.mark.django_db
def test_a_write_without_a_base_version_is_refused_as_over_rest(tenant, tmp_path):
    (tmp_path / "a.md").write_bytes(b"text\n")

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", tenant.member.username,
        "--file", str(tmp_path / "a.md"),
    )  # fmt: skip

    assert code == 1
    assert message.startswith("BASE_VERSION_REQUIRED: pass --base-version N")
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
def test_a_credential_is_refused_with_its_line_and_nothing_is_written(tenant, tmp_path):
    body = _file(tmp_path, f"# keys\n{CREDENTIALS[0].line}\n".encode())

    code, message, out = refused(
        "put", "keys.md", *org_space(tenant), "--user", tenant.member.username,
        "--file", body, "--base-version", "0", "--json",
    )  # fmt: skip

    assert code == 1
    assert message.startswith("SECRET_DETECTED: keys.md line 2 looks like a credential")
    assert json.loads(out)["error"]["code"] == "SECRET_DETECTED"
    assert CREDENTIALS[0].line not in message + out
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
def test_the_global_space_refuses_a_writer_who_is_not_a_superuser(tenant, tmp_path):
    code, message, out = refused(
        "put", "a.md", "--visibility", "global", "--name", "shared",
        "--user", tenant.member.username, "--file", _file(tmp_path, b"x\n"),
        "--base-version", "0", "--json",
    )  # fmt: skip

    assert code == 1
    assert message.startswith("GLOBAL_SPACE_WRITE_DENIED:")
    assert json.loads(out)["error"]["code"] == "GLOBAL_SPACE_WRITE_DENIED"
    global_space = SpaceHandle(visibility=Visibility.GLOBAL, name="shared", tenant_id=None)
    assert store_get().list(global_space) == []


@pytest.mark.django_db
def test_a_user_outside_the_team_is_refused_and_nothing_is_written(make_tenant, tmp_path):
    tenant, stranger = make_tenant(), make_tenant().member

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", stranger.username,
        "--file", _file(tmp_path, b"x\n"), "--base-version", "0",
    )  # fmt: skip

    assert code == 1
    assert message == (
        f"NOT_FOUND: {stranger.username} is not a member of team {tenant.team.pk}; act as "
        "a member with --user."
    )
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--visibility", "galaxy", "--name", "n"], "SPACE_INVALID"),
        (["--visibility", "org", "--name", "n", "--run", "r"], "SPACE_INVALID"),
        (["--visibility", "org", "--name", "a/b"], "SPACE_INVALID"),
        (["--visibility", "org", "--name", "n"], "--team ID names the team"),
        (["--visibility", "user", "--name", "n"], "--user USERNAME names whose user space"),
    ],
)
def test_invalid_space_flags_are_a_usage_error(flags, message):
    code, text, _ = refused("ls", *flags)

    assert code == 2
    assert message in text


@pytest.mark.django_db
def test_a_local_write_needs_the_person_acting(tenant, tmp_path):
    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--file", _file(tmp_path, b"x\n"), "--base-version", "0"
    )

    assert code == 2
    assert "--user USERNAME names who writes" in message
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
def test_a_user_space_is_the_acting_users_own(tenant, tmp_path):
    mine = ["--team", str(tenant.team.pk), "--visibility", "user", "--name", "me"]
    memory(
        "put", "a.md", *mine, "--user", tenant.member.username,
        "--file", _file(tmp_path, b"mine\n"), "--base-version", "0",
    )  # fmt: skip

    theirs = memory_json("ls", *mine, "--user", tenant.admin.username)
    own = memory_json("ls", *mine, "--user", tenant.member.username)

    assert theirs == {"documents": []}
    assert [document["path"] for document in own["documents"]] == ["a.md"]


@pytest.mark.usefixtures("every_store")
def test_du_of_a_team_lists_every_space_holding_a_document(make_tenant, tmp_path):
    tenant, other = make_tenant(), make_tenant()
    put(tenant, "a.md", b"12345", 0, tmp_path, name="alpha")
    put(tenant, "b.md", b"123", 0, tmp_path, name="beta")
    put(other, "c.md", b"theirs", 0, tmp_path)
    private = ["--team", str(tenant.team.pk), "--visibility", "private", "--name", "p"]
    memory(
        "put", "p.md", *private, "--run", "run-1", "--user", tenant.member.username,
        "--file", _file(tmp_path, b"1"), "--base-version", "0",
    )  # fmt: skip

    report = memory_json("du", "--team", str(tenant.team.pk))
    table = memory("du", "--team", str(tenant.team.pk))

    assert report["team"] == tenant.team.pk
    assert sorted((space["space"]["name"], space["usedBytes"]) for space in report["spaces"]) == [
        ("alpha", 5),
        ("beta", 3),
        ("p", 1),
    ]
    assert {space["tenantUsedBytes"] for space in report["spaces"]} == {9}
    assert f"run=run-1 user={tenant.member.pk}" in table
    assert f"team {tenant.team.pk}: 9 of" in table


@pytest.mark.usefixtures("every_store")
def test_export_then_import_into_another_space_gives_the_same_documents(tenant, tmp_path):
    documents = {"a.md": b"# A\n", "notes/b.md": "# B caf\u00e9\n".encode(), "empty.md": b""}
    for path, body in documents.items():
        put(tenant, path, body, 0, tmp_path)
    archive = tmp_path / "space.tar.gz"
    user = ["--user", tenant.member.username]

    exported = memory_json("export", *org_space(tenant), *user, "--out", str(archive))
    planned = memory_json(
        "import", *org_space(tenant, "copy"), *user, "--in", str(archive), "--dry-run"
    )
    nothing_yet = store_get().list(handle_of(tenant, "copy"))
    imported = memory_json("import", *org_space(tenant, "copy"), *user, "--in", str(archive))
    again = memory_json(
        "import", *org_space(tenant, "copy"), *user, "--in", str(archive), "--strategy", "rename"
    )

    assert exported["docCount"] == 3
    assert exported["docBytes"] == sum(len(body) for body in documents.values())
    assert exported["archiveBytes"] == archive.stat().st_size
    assert (planned["imported"], planned["skipped"], planned["renamed"]) == (3, 0, 0)
    assert planned["dryRun"] is True
    assert nothing_yet == []
    assert {**imported, "dryRun": True} == planned
    assert {(document["path"], document["action"]) for document in imported["documents"]} == {
        (path, "create") for path in documents
    }
    assert again["renamed"] == 3
    copy = {meta.path: meta for meta in store_get().list(handle_of(tenant, "copy"))}
    for path, body in documents.items():
        assert copy[path].checksum == body_checksum(body)
        assert copy[path].updated_by == f"import:{tenant.member.pk}"
    assert "a.import.md" in copy


class _Stream(io.TextIOWrapper):
    """A text stream over bytes, as sys.stdout or sys.stdin is, that can say it is a
    terminal."""

    def __init__(self, raw: Any, *, terminal: bool = False) -> None:
        super().__init__(raw)
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.django_db
def test_export_to_stdout_then_import_from_stdin_gives_the_same_documents(
    tenant, tmp_path, monkeypatch
):
    documents = {"a.md": b"# A\n", "notes/b.md": b"# B\n"}
    for path, body in documents.items():
        put(tenant, path, body, 0, tmp_path)
    user = ["--user", tenant.member.username]
    archive = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", _Stream(archive))
    said = io.StringIO()
    call_command(
        "memory", "export", *org_space(tenant), *user, "--out", "-", stdout=said, stderr=said
    )
    sys.stdout.flush()
    # A pipe, as a shell gives stdin: its size is unknown until it is read.
    read_end, write_end = os.pipe()
    os.write(write_end, archive.getvalue())
    os.close(write_end)
    monkeypatch.setattr(sys, "stdin", _Stream(os.fdopen(read_end, "rb")))

    imported = memory_json("import", *org_space(tenant, "copy"), *user, "--in", "-")

    assert archive.getvalue()[:2] == b"\x1f\x8b"
    doc_bytes = sum(len(body) for body in documents.values())
    summary = (
        f"exported 2 document(s), {doc_bytes} bytes, to stdout ({len(archive.getvalue())} bytes)"
    )
    assert said.getvalue() == summary + "\n"
    assert imported["imported"] == 2
    copy = {meta.path: meta.checksum for meta in store_get().list(handle_of(tenant, "copy"))}
    assert copy == {path: body_checksum(body) for path, body in documents.items()}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "terminal", "why"),
    [
        (["export", "--out", "-", "--json"], False, "--json writes its report to stdout"),
        (["export", "--out", "-"], True, "will not write an archive to a terminal"),
        (["import", "--in", "-"], True, "will not read an archive from a terminal"),
    ],
    ids=["json", "stdout-terminal", "stdin-terminal"],
)
def test_stdio_archives_refuse_what_would_mix_or_hang(tenant, monkeypatch, args, terminal, why):
    sent = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", _Stream(sent, terminal=terminal))
    monkeypatch.setattr(sys, "stdin", _Stream(io.BytesIO(), terminal=terminal))

    code, message, _ = refused(*args, *org_space(tenant), "--user", tenant.member.username)

    assert code == 2
    assert message.startswith(why)
    assert sent.getvalue() == b""
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
def test_a_refused_export_leaves_no_file(tenant, tmp_path):
    # Put past the write path, as a document stored before the scanner knew the rule.
    store_write(store_get(), handle_of(tenant), "keys.md", f"{CREDENTIALS[0].line}\n".encode())
    archive = tmp_path / "space.tar.gz"

    code, message, _ = refused("export", *org_space(tenant), "--out", str(archive))

    assert code == 1
    assert message.startswith("SECRET_DETECTED:")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_an_export_of_a_damaged_document_names_it_and_what_to_do(tenant, tmp_path):
    store_write(store_get(), handle_of(tenant), "a.md", b"# A\n")
    row = SpaceDocument.objects.get()
    tampered = bytearray(row.body_ciphertext)
    tampered[20] ^= 0x01
    SpaceDocument.objects.filter(pk=row.pk).update(body_ciphertext=bytes(tampered))
    archive = tmp_path / "space.tar.gz"

    code, message, _ = refused("export", *org_space(tenant), "--out", str(archive))

    assert code == 1
    assert message == (
        "DOCUMENT_UNREADABLE: a.md at revision 1 fails its integrity check (altered where it "
        "is stored); put a good copy over it, or remove it (`memory rm`), and retry"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_writing_the_mirrors_space_is_refused_with_what_to_do(tenant, tmp_path):
    code, message, _ = refused(
        "put", "a.md", *org_space(tenant, "auto-memory"), "--user", tenant.member.username,
        "--file", _file(tmp_path, b"x\n"), "--base-version", "0",
    )  # fmt: skip

    assert code == 1
    assert message == (
        "AUTO_MEMORY_SPACE_RESERVED: only the auto-memory mirror writes a space named "
        "auto-memory; choose another --name"
    )


@pytest.mark.django_db
def test_an_export_to_a_directory_that_does_not_exist_is_a_usage_error(tenant, tmp_path):
    code, message, _ = refused("export", *org_space(tenant), "--out", str(tmp_path / "no" / "x"))

    assert code == 2
    assert message == f"cannot write {tmp_path / 'no' / 'x'}: No such file or directory"


@pytest.mark.django_db
def test_an_export_to_a_directory_is_a_usage_error_and_leaves_no_file(tenant, tmp_path):
    put(tenant, "a.md", b"# A\n", 0, tmp_path)
    target = tmp_path / "exports"
    target.mkdir()
    before = sorted(tmp_path.iterdir())

    # Once an OSError out of the final rename: a traceback, and exit 1.
    code, message, _ = refused("export", *org_space(tenant), "--out", str(target))

    assert code == 2
    assert message == f"cannot write {target}: not a regular file"
    assert sorted(tmp_path.iterdir()) == before
    assert list(target.iterdir()) == []


@pytest.mark.django_db
def test_an_export_to_something_that_is_not_a_file_is_a_usage_error(tenant, tmp_path):
    # The export is renamed over its target: over /dev/stdout, for root (who can write in
    # /dev), that replaced the device's link with a file; here, a FIFO with one.
    fifo = tmp_path / "archive.fifo"
    os.mkfifo(fifo)

    code, message, _ = refused("export", *org_space(tenant), "--out", str(fifo))

    assert code == 2
    assert message == f"cannot write {fifo}: not a regular file"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(tmp_path.iterdir()) == [fifo]


@pytest.mark.django_db
def test_an_import_overtaken_by_another_write_says_to_run_it_again(tenant, tmp_path, monkeypatch):
    # What two imports at once into one space meet: the import has no --base-version, which
    # the refusal once told the person to pass.
    def overtaken(**_: Any) -> None:
        raise VersionConflict(currentVersion=2, path="a.md")

    monkeypatch.setattr("memory.cli.space_import", overtaken)

    code, message, _ = refused(
        "import", *org_space(tenant), "--user", tenant.member.username,
        "--in", _file(tmp_path, b"any archive"),
    )  # fmt: skip

    assert code == 1
    assert message == (
        "VERSION_CONFLICT: a.md changed while the archive was being imported; nothing was "
        "imported; run the import again"
    )


@pytest.mark.django_db
def test_a_quota_refusal_says_what_the_space_holds(tenant, tmp_path, settings):
    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "org": 3}
    source = tmp_path / "body.md"
    source.write_bytes(b"# A\n")

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", tenant.member.username,
        "--file", str(source), "--base-version", "0",
    )  # fmt: skip

    assert code == 1
    assert message.startswith(
        "SPACE_QUOTA_EXCEEDED: the space holds 0 of 3 bytes and this adds 4; "
    )


@pytest.mark.django_db
def test_an_archive_that_is_not_gzip_is_refused_and_nothing_is_imported(tenant, tmp_path):
    code, message, _ = refused(
        "import", *org_space(tenant), "--user", tenant.member.username,
        "--in", _file(tmp_path, b"not an archive"),
    )  # fmt: skip

    assert code == 1
    assert message.startswith("ARCHIVE_INVALID: the archive is refused (not_gzip)")
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db
def test_reconcile_answers_json():
    report = memory_json("reconcile")

    assert report == {"counters": [], "fixed": 0}


# Remote mode, against a live server


@pytest.fixture
def remote(live_server, settings, make_tenant, monkeypatch) -> tuple[Tenant, list[str]]:
    """A tenant, and the flags that reach its org space `notes` over the live server with a
    fresh personal access token of its member."""
    # The client keeps its HTTP connection alive, so a live-server thread could sit between
    # two requests holding a persistent PostgreSQL connection, which would block the test
    # database's flush and drop. Close it after each request.
    monkeypatch.setitem(connections.settings[DEFAULT_DB_ALIAS], "CONN_MAX_AGE", 0)
    settings.ALLOWED_HOSTS = ["*"]
    tenant = make_tenant()
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    flags = [
        "--remote",
        live_server.url,
        "--token",
        token,
        "--visibility",
        "org",
        "--name",
        "notes",
    ]
    return tenant, flags


@pytest.mark.django_db(transaction=True)
def test_put_cat_ls_du_rm_round_trip_remotely(remote, tmp_path):
    tenant, flags = remote

    written = memory_json(
        "put", "a.md", *flags, "--file", _file(tmp_path, b"# A\nx\n"), "--base-version", "0"
    )
    shown = memory("cat", "a.md", *flags)
    shown_json = memory_json("cat", "a.md", *flags)
    listing = memory_json("ls", *flags)
    usage = memory_json("du", *flags)
    removed = memory_json("rm", "a.md", *flags, "--base-version", "1")

    assert written["revision"] == 1
    assert written["updatedBy"] == f"user:{tenant.member.pk}"
    assert shown == "# A\nx\n"
    assert shown_json == {"path": "a.md", "revision": 1, "content": "# A\nx\n"}
    assert [document["path"] for document in listing["documents"]] == ["a.md"]
    assert usage["usedBytes"] == 6
    assert usage["space"]["id"] == handle_of(tenant).id
    assert removed == {"path": "a.md", "deleted": True}
    assert store_get().list(handle_of(tenant)) == []


@pytest.mark.django_db(transaction=True)
def test_a_remote_refusal_names_its_code_and_what_to_do(remote, tmp_path):
    tenant, flags = remote
    memory("put", "a.md", *flags, "--file", _file(tmp_path, b"one\n"), "--base-version", "0")

    code, message, out = refused(
        "put", "a.md", *flags, "--file", _file(tmp_path, b"two\n"), "--base-version", "0", "--json"
    )

    assert code == 1
    assert message == (
        "VERSION_CONFLICT: the document is at revision 1; re-read it and retry with "
        "--base-version 1"
    )
    assert json.loads(out)["error"]["detail"] == {"currentVersion": 1}
    assert space_document_read(handle=handle_of(tenant), path="a.md").body == b"one\n"


@pytest.mark.django_db(transaction=True)
def test_a_bad_token_is_refused_without_being_shown(remote):
    _, flags = remote
    token = flags[flags.index("--token") + 1]
    flags[flags.index("--token") + 1] = token + "x"

    code, message, _ = refused("ls", *flags)

    assert code == 1
    assert message.startswith("TOKEN_INVALID: check --token or MEMORY_REMOTE_TOKEN")
    assert token not in message


@pytest.mark.django_db(transaction=True)
def test_remote_export_then_import_round_trip(remote, tmp_path):
    tenant, flags = remote
    for path, body in {"a.md": b"# A\n", "b/c.md": b"# C\n"}.items():
        memory("put", path, *flags, "--file", _file(tmp_path, body), "--base-version", "0")
    archive = tmp_path / "space.tar.gz"
    copy = [*flags[:4], "--visibility", "org", "--name", "copy"]

    exported = memory_json("export", *flags, "--out", str(archive))
    planned = memory_json("import", *copy, "--in", str(archive), "--dry-run")
    imported = memory_json("import", *copy, "--in", str(archive), "--strategy", "overwrite")

    assert exported["docCount"] == 2
    assert exported["archiveBytes"] == archive.stat().st_size
    assert (planned["imported"], planned["replaced"]) == (2, 0)
    assert (imported["imported"], imported["replaced"]) == (2, 0)
    copied = store_get().list(handle_of(tenant, "copy"))
    assert [(meta.path, meta.checksum) for meta in copied] == [
        ("a.md", body_checksum(b"# A\n")),
        ("b/c.md", body_checksum(b"# C\n")),
    ]


@pytest.mark.django_db(transaction=True)
def test_an_archive_from_a_pipe_imports_remotely_as_locally(remote, tmp_path):
    # A pipe's size is 0 to fstat: the upload once declared Content-Length 0, and the server
    # refused an empty body (not_gzip) that the local import read whole.
    tenant, flags = remote
    memory("put", "a.md", *flags, "--file", _file(tmp_path, b"# A\n"), "--base-version", "0")
    archive = tmp_path / "space.tar.gz"
    memory_json("export", *flags, "--out", str(archive))
    fifo = tmp_path / "archive.fifo"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: fifo.write_bytes(archive.read_bytes()))
    feeder.start()

    try:
        imported = memory_json("import", *flags[:4], "--visibility", "org", "--name", "copy",
                               "--in", str(fifo))  # fmt: skip
    finally:
        feeder.join()

    assert imported["imported"] == 1
    assert [meta.path for meta in store_get().list(handle_of(tenant, "copy"))] == ["a.md"]


@pytest.mark.django_db
def test_an_endless_pipe_is_refused_at_the_bound(tenant, tmp_path, settings):
    # `--in /dev/zero`, or a pipe that never ends: its copy stops past what any archive
    # within the import's bound can be, instead of filling the disk.
    settings.MEMORY_IMPORT_MAX_BYTES = 3 * 1024 * 1024
    fifo = tmp_path / "endless.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as pipe:
            pipe.write(b"\x1f\x8b")  # gzip's magic number, then no end of bytes
            for _ in range(64):  # 64 MiB, far past the bound
                pipe.write(bytes(1024 * 1024))

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        code, message, _ = refused(
            "import", *org_space(tenant), "--user", tenant.member.username, "--in", str(fifo)
        )
    finally:
        feeder.join()

    assert code == 1
    assert message.startswith("ARCHIVE_INVALID: the archive is refused (too_large)")


def test_remote_mode_refuses_the_local_only_flags_as_usage():
    code, message, _ = refused(
        "ls", "--remote", "http://127.0.0.1:9", "--token", "t", "--team", "1",
        "--visibility", "org", "--name", "n",
    )  # fmt: skip

    assert code == 2
    assert "--team and --user are for local mode" in message


def test_an_unreachable_server_is_a_refusal():
    # Port 9 (discard) has no listener on a test machine: the connection is refused.
    code, message, _ = refused(
        "ls", "--remote", "http://127.0.0.1:9", "--token", "t", "--visibility", "org", "--name", "n"
    )

    assert code == 1
    assert message.startswith("cannot reach the server: no answer from http://127.0.0.1:9/")


@pytest.fixture
def not_the_api(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL of a server that answers every request 200 with a page of its own (a
    sign-in portal, or --remote naming the wrong host); parametrized, with this media type
    and body."""
    media_type, body = getattr(request, "param", ("text/html", b"<html>Sign in</html>"))

    class Page(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("subcommand", ["export", "import", "ls"])
def test_an_answer_that_is_not_the_apis_is_a_refusal(not_the_api, subcommand, tmp_path):
    # Once a traceback: a 200 page read as JSON, or as an archive whose manifest it wanted.
    args = {
        "export": ["--out", str(tmp_path / "x.tar.gz")],
        "import": ["--in", _file(tmp_path, b"any archive")],
        "ls": [],
    }[subcommand]

    code, message, _ = refused(
        subcommand, "--remote", not_the_api, "--token", "t",
        "--visibility", "org", "--name", "n", *args,
    )  # fmt: skip

    assert code == 1
    assert message == (
        f"cannot reach the server: {not_the_api}/api/v1/memory/ answered 200 with text/html, "
        "not the API's answer; check --remote"
    )
    assert not (tmp_path / "x.tar.gz").exists()


@pytest.mark.parametrize(
    ("not_the_api", "subcommand"),
    [
        (("application/json", b"{not json"), ["ls"]),
        (("application/json", b"[1, 2]"), ["du"]),
        (("application/json", b"null"), ["put", "a.md", "--file", "/dev/null"]),
        (("text/markdown", b"# no X-Revision"), ["cat", "a.md"]),
    ],
    indirect=["not_the_api"],
    ids=["not-json", "not-an-object", "null", "no-revision"],
)
def test_an_answer_of_the_apis_type_but_not_its_shape_is_a_refusal(not_the_api, subcommand):
    # Once a traceback (JSONDecodeError, TypeError, KeyError): the media type was all it checked.
    code, message, _ = refused(
        *subcommand, "--remote", not_the_api, "--token", "t",
        "--visibility", "org", "--name", "n", "--base-version", "0",
    ) if subcommand[0] == "put" else refused(
        *subcommand, "--remote", not_the_api, "--token", "t", "--visibility", "org", "--name", "n",
    )  # fmt: skip

    assert code == 1
    assert message.startswith(f"cannot reach the server: {not_the_api}/api/v1/memory/ answered 200")
    assert message.endswith("not the API's answer; check --remote")


# Exit codes end to end


def run_manage(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "memory", *args],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "memory_project.settings", **environ},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_usage_errors_exit_2_from_a_shell():
    missing_out = run_manage("export", "--visibility", "org", "--name", "n")
    bad_space = run_manage("ls", "--visibility", "galaxy", "--name", "n")

    assert missing_out.returncode == 2
    assert "the following arguments are required: --out" in missing_out.stderr
    assert bad_space.returncode == 2
    assert "SPACE_INVALID" in bad_space.stderr


@pytest.mark.parametrize(
    "mode",
    [
        ["--team", "1", "--user", "someone"],
        ["--remote", "http://127.0.0.1:9", "--token", "t"],
    ],
    ids=["local", "remote"],
)
def test_an_unknown_strategy_is_a_usage_error_from_a_shell_in_both_modes(mode, tmp_path):
    archive = tmp_path / "notes.tar.gz"
    archive.write_bytes(b"")

    result = run_manage(
        "import", *mode, "--visibility", "org", "--name", "n", "--in", str(archive),
        "--strategy", "merge",
    )  # fmt: skip

    assert result.returncode == 2
    assert "--strategy: invalid choice: 'merge'" in result.stderr
    assert "choose from 'skip', 'overwrite', 'rename'" in result.stderr


@pytest.mark.parametrize("subcommand", ["put", "rm"])
@pytest.mark.parametrize("version", ["-1", str(2**63)])
@pytest.mark.parametrize(
    "mode",
    [
        ["--team", "1", "--user", "someone"],
        ["--remote", "http://127.0.0.1:9", "--token", "t"],
    ],
    ids=["local", "remote"],
)
def test_a_base_version_that_is_no_revision_is_a_usage_error_in_both_modes(
    subcommand, version, mode
):
    # Locally -1 was a VERSION_CONFLICT and remotely INVALID_HEADER: the same input, two answers.
    result = run_manage(
        subcommand, "a.md", *mode, "--visibility", "org", "--name", "n",
        "--base-version", version,
    )  # fmt: skip

    assert result.returncode == 2
    assert "--base-version: a revision is a whole number from 0" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_a_refusal_exits_1_from_a_shell_and_json_goes_to_stdout(remote, tmp_path):
    _, flags = remote
    body = _file(tmp_path, b"x\n")
    run_manage("put", "a.md", *flags, "--file", body, "--base-version", "0")

    conflict = run_manage("put", "a.md", *flags, "--file", body, "--base-version", "0", "--json")

    assert conflict.returncode == 1
    assert json.loads(conflict.stdout)["error"]["code"] == "VERSION_CONFLICT"
    assert "VERSION_CONFLICT: the document is at revision 1" in conflict.stderr
    assert flags[flags.index("--token") + 1] not in conflict.stdout + conflict.stderr


def _file(tmp_path: Path, body: bytes) -> str:
    path = tmp_path / f"body-{len(list(tmp_path.iterdir()))}.md"
    path.write_bytes(body)
    return str(path)


def run_manage_on_a_terminal(*args: str) -> str:
    """Run `manage.py memory ARGS` with stdout and stderr on a pseudo-terminal; return all it
    wrote there."""
    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "memory", *args],
            cwd=BASE_DIR,
            env={
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "memory_project.settings",
                "TERM": "xterm",
            },
            stdin=subprocess.DEVNULL,
            stdout=secondary,
            stderr=secondary,
        )
        os.close(secondary)
        written = bytearray()
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal's other end closed: the process is done
                break
            if not chunk:
                break
            written += chunk
        assert process.wait(timeout=120) == 0, written.decode(errors="replace")
    finally:
        os.close(primary)
    return written.decode(errors="replace")


@pytest.mark.django_db(transaction=True)
def test_export_and_import_show_progress_on_a_terminal_only(remote, tmp_path):
    _, flags = remote
    memory("put", "a.md", *flags, "--file", _file(tmp_path, b"# A\n"), "--base-version", "0")
    archive = str(tmp_path / "space.tar.gz")
    copy = [*flags[:4], "--visibility", "org", "--name", "copy"]

    on_terminal = run_manage_on_a_terminal("export", *flags, "--out", archive)
    piped = run_manage("import", *copy, "--in", archive)
    imported_on_terminal = run_manage_on_a_terminal("import", *copy, "--in", archive)

    # The bar's label (rich draws it on the terminal, then clears it), then the result.
    assert "export" in on_terminal.split("exported 1 document(s)")[0]
    assert "import" in imported_on_terminal.split("imported 0, replaced 0")[0]
    assert (piped.returncode, piped.stderr) == (0, "")
    assert piped.stdout == "imported 1, replaced 0, skipped 0, renamed 0\n"


# Ending early: no traceback


class _Interrupted(io.BytesIO):
    def read(self, size: int | None = -1) -> bytes:
        raise KeyboardInterrupt


@pytest.mark.django_db
def test_ctrl_c_ends_the_command_with_a_message_and_exit_130(tenant, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(_Interrupted()))

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", tenant.member.username, "--base-version", "0"
    )

    assert code == 130
    assert "interrupted" in message


@pytest.mark.django_db(transaction=True)
def test_a_stdout_closed_early_ends_the_command_without_a_traceback(remote, tmp_path):
    # As `memory export --out - | head -c 1` does: the reader is gone before the archive is out.
    _, flags = remote
    run_manage(
        "put", "a.md", *flags, "--file", _file(tmp_path, b"x\n" * 100_000), "--base-version", "0"
    )
    command = [sys.executable, "manage.py", "memory", "export", *flags, "--out", "-"]
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memory_project.settings"}
    with subprocess.Popen(
        command, cwd=BASE_DIR, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        errors = process.stderr.read().decode()

    assert process.returncode == 1
    assert "Traceback" not in errors
    assert "stdout was closed before all the output was written" in errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stdout", ["closed", "full"])
@pytest.mark.parametrize(
    "subcommand", [["ls"], ["cat", "a.md"], ["export", "--out", "-"]], ids=" ".join
)
def test_a_stdout_closed_or_full_is_one_line_and_exit_1(remote, tmp_path, subcommand, stdout):
    # `>&-` left sys.stdout None and `> /dev/full` failed each write: both were a traceback.
    _, flags = remote
    run_manage("put", "a.md", *flags, "--file", _file(tmp_path, b"x\n"), "--base-version", "0")
    command = [sys.executable, "manage.py", "memory", *subcommand, *flags]
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memory_project.settings"}

    with open(os.devnull if stdout == "closed" else "/dev/full", "wb") as target:
        result = subprocess.run(
            ["sh", "-c", '"$@" >&-', "sh", *command] if stdout == "closed" else command,
            cwd=BASE_DIR, env=environment, stdout=target, stderr=subprocess.PIPE, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    reason = "stdout is closed" if stdout == "closed" else "cannot write to stdout"
    assert reason in result.stderr


# A NOT_FOUND says what was not found


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("subcommand", ["ls", "du"])
def test_a_remote_url_with_no_memory_routes_says_to_check_it(remote, subcommand):
    # `--remote https://host/api/v1` reaches /api/v1/api/v1/memory/, whose 404 is the API's body:
    # "no such document in this space" sent the operator after a document ls never named.
    _, flags = remote
    flags = [flag + "/api/v1" if flag.startswith("http") else flag for flag in flags]

    code, message, _ = refused(subcommand, *flags)

    assert code == 1
    assert message.startswith("NOT_FOUND: the server has no memory routes under")
    assert "check --remote" in message


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("base_path", ["/api/v1", "/elsewhere"])
@pytest.mark.parametrize(
    "command",
    [
        ["cat", "a.md"],
        ["put", "a.md", "--base-version", "0"],
        ["rm", "a.md", "--base-version", "1"],
    ],
    ids=lambda command: command[0],
)
def test_a_remote_url_with_no_memory_routes_is_no_missing_document(
    remote, tmp_path, command, base_path
):
    # It said "no such document in this space", as a document's NOT_FOUND.
    _, flags = remote
    put_body = ["--file", _file(tmp_path, b"x\n")] if command[0] == "put" else []
    memory("put", "a.md", *flags, "--file", _file(tmp_path, b"x\n"), "--base-version", "0")
    flags = [flag + base_path if flag.startswith("http") else flag for flag in flags]

    code, message, _ = refused(*command, *put_body, *flags)

    # Under /elsewhere the answer is the web frame's page, not the API's body: HTTP_404.
    assert code == 1
    assert "the server has no memory routes under that URL: it is not this API" in message
    assert "check --remote" in message


@pytest.mark.django_db(transaction=True)
def test_a_missing_document_remotely_is_still_said_to_be_missing(remote):
    _, flags = remote

    code, message, _ = refused("cat", "nosuch.md", *flags)

    assert code == 1
    assert message.startswith("NOT_FOUND: no such document in this space")


@pytest.mark.django_db
def test_a_mirror_of_a_bot_that_does_not_exist_says_so(tenant, tmp_path):
    code, message, _ = refused(
        "mirror", "hydrate", "--team", str(tenant.team.pk), "--bot", "nosuch", "--project", "p",
        "--state-dir", str(tmp_path),
    )  # fmt: skip

    assert code == 1
    assert message == "NOT_FOUND: No such bot."


def test_a_malformed_remote_url_in_the_environment_is_one_line():
    # The settings refuse it at start-up, as every setting: that was a Python traceback.
    result = run_manage("ls", "--visibility", "org", "--name", "n", MEMORY_REMOTE_URL="ftp://x")

    assert result.returncode == 1
    assert result.stderr == (
        "Configuration error: MEMORY_REMOTE_URL is not a base URL: it must look like "
        "https://host[:port][/path]\n"
    )


@pytest.mark.usefixtures("every_store")
def test_rm_deletes_a_document_under_a_path_no_longer_valid_by_its_listed_spelling(tenant):
    space = [*org_space(tenant), "--user", tenant.member.username]
    store_write(store_get(), handle_of(tenant), "old/./b.md", b"legacy\n")

    removed = memory("rm", "old/./b.md", *space, "--base-version", "1")

    assert removed == "deleted old/./b.md\n"
    assert store_get().list(handle_of(tenant)) == []
    assert store_get().usage(handle_of(tenant)).used_bytes == 0


@pytest.mark.usefixtures("every_store")
def test_cat_of_a_stored_body_that_is_not_utf8_is_refused_as_unreadable(tenant):
    # The write path refuses it; a filesystem store's file can be edited on disk.
    store_write(store_get(), handle_of(tenant), "bad.md", b"caf\xe9\n")

    space = [*org_space(tenant), "--user", tenant.member.username]

    code, message, out = refused("cat", "bad.md", *space)

    assert code == 1
    assert message.startswith("DOCUMENT_UNREADABLE")
    assert out == ""
