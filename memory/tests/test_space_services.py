"""The one write path of a memory space (memory.spaces.services): its order, attribution,
the global gate and its audit, and the secret corpus on every writer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlencode

import pytest

from conftest import Tenant, assert_error
from memory.errors import GlobalSpaceWriteDenied, SecretDetected, SpaceQuotaExceeded
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import (
    SpaceWriter,
    WriterKind,
    space_document_delete,
    space_document_write,
    space_document_write_admit,
)
from memory.tests.secret_corpus import CREDENTIALS, PROSE
from workspaces.errors import (
    DocumentTooLarge,
    InvalidDocumentPath,
    InvalidText,
    NotFound,
    VersionConflict,
)
from workspaces.models import AuditEvent

# Every behaviour, on both stores: the write path is the same whichever holds the bytes.
pytestmark = pytest.mark.usefixtures("every_store")

GLOBAL = SpaceHandle(visibility=Visibility.GLOBAL, name="handbook", tenant_id=None)


def org_space(tenant: Tenant) -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)


def writer_of(kind: WriterKind, tenant: Tenant) -> SpaceWriter:
    """A writer of `kind` in the tenant: people act for user and import, a bot (id "7")
    for bot and mirror."""
    if kind in {WriterKind.USER, WriterKind.IMPORT}:
        ident, user = str(tenant.member.pk), tenant.member
    else:
        ident, user = "7", None
    return SpaceWriter(kind=kind, ident=ident, tenant_id=tenant.team.pk, user=user)


def write(tenant: Tenant, writer: SpaceWriter, body: bytes, path: str = "a.md", base: int = 0):
    return space_document_write(
        handle=org_space(tenant), path=path, body=body, expected_revision=base, writer=writer
    )


# ---- attribution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (WriterKind.USER, "user:{member}"),
        (WriterKind.BOT, "bot:7"),
        (WriterKind.IMPORT, "import:{member}"),
        (WriterKind.MIRROR, "mirror:7"),
    ],
)
def test_every_writer_is_attributed_by_kind_and_id(tenant, kind, expected):
    meta = write(tenant, writer_of(kind, tenant), b"# A\n")

    attribution = expected.format(member=tenant.member.pk)
    assert meta.updated_by == attribution
    stored = store_get().read(org_space(tenant), "a.md")
    assert stored is not None
    assert stored.meta.updated_by == attribution


# ---- the order -----------------------------------------------------------------------------


def test_another_tenants_space_is_not_found_to_a_writer(make_tenant):
    first, second = make_tenant(), make_tenant()

    with pytest.raises(NotFound):
        write(first, writer_of(WriterKind.BOT, second), b"# A\n")
    assert store_get().list(org_space(first)) == []


def test_the_global_gate_comes_before_the_path_and_the_ceiling(tenant, settings):
    writer = writer_of(WriterKind.USER, tenant)
    oversize = b"x" * (settings.MEMORY_MAX_DOCUMENT_BYTES + 1)

    with pytest.raises(GlobalSpaceWriteDenied):
        space_document_write(
            handle=GLOBAL, path="../bad", body=oversize, expected_revision=0, writer=writer
        )
    with pytest.raises(GlobalSpaceWriteDenied):
        space_document_delete(handle=GLOBAL, path="../bad", expected_revision=1, writer=writer)


def test_no_person_acting_cannot_write_global(tenant):
    bot = writer_of(WriterKind.BOT, tenant)

    with pytest.raises(GlobalSpaceWriteDenied):
        space_document_write(handle=GLOBAL, path="a.md", body=b"x", expected_revision=0, writer=bot)
    assert store_get().list(GLOBAL) == []


def test_the_path_comes_before_the_ceiling(tenant, settings):
    oversize = b"x" * (settings.MEMORY_MAX_DOCUMENT_BYTES + 1)

    with pytest.raises(InvalidDocumentPath):
        write(tenant, writer_of(WriterKind.USER, tenant), oversize, path="a.txt")


def test_the_ceiling_comes_before_the_text(tenant, settings):
    oversize = b"\xff" * (settings.MEMORY_MAX_DOCUMENT_BYTES + 1)

    with pytest.raises(DocumentTooLarge) as refused:
        write(tenant, writer_of(WriterKind.IMPORT, tenant), oversize)
    assert refused.value.detail["bytes"] == settings.MEMORY_MAX_DOCUMENT_BYTES + 1


def test_the_admission_refuses_a_declared_size_over_the_ceiling(tenant, settings):
    with pytest.raises(DocumentTooLarge):
        space_document_write_admit(
            handle=org_space(tenant),
            path="a.md",
            size=settings.MEMORY_MAX_DOCUMENT_BYTES + 1,
            writer=writer_of(WriterKind.USER, tenant),
        )


def test_the_text_comes_before_the_secret_scan(tenant):
    secret = CREDENTIALS[0].line.encode()

    with pytest.raises(InvalidText):
        write(tenant, writer_of(WriterKind.MIRROR, tenant), secret + b"\xff")


def test_the_secret_scan_comes_before_the_quotas(tenant, settings):
    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "org": 1}

    with pytest.raises(SecretDetected):
        write(tenant, writer_of(WriterKind.BOT, tenant), CREDENTIALS[0].line.encode())
    with pytest.raises(SpaceQuotaExceeded):
        write(tenant, writer_of(WriterKind.BOT, tenant), b"plain prose\n")


def test_memory_text_is_never_logged(tenant, caplog):
    caplog.set_level(logging.DEBUG)
    marker = "zebra-marker-3141"
    writer = writer_of(WriterKind.USER, tenant)

    write(tenant, writer, f"# {marker}\n".encode())
    with pytest.raises(SecretDetected):
        write(tenant, writer, f"{marker}\n{CREDENTIALS[0].line}\n".encode(), path="b.md")

    assert marker not in caplog.text
    assert CREDENTIALS[0].line not in caplog.text


# ---- the global gate -----------------------------------------------------------------------


def test_a_superusers_global_write_and_delete_are_audited_with_the_document(tenant):
    tenant.admin.is_superuser = True
    writer = SpaceWriter.of_user(tenant.admin, tenant_id=tenant.team.pk)

    meta = space_document_write(
        handle=GLOBAL, path="a.md", body=b"one\n", expected_revision=0, writer=writer
    )
    space_document_delete(handle=GLOBAL, path="a.md", expected_revision=1, writer=writer)

    events = AuditEvent.objects.filter(target_type="memory_space").order_by("pk")
    assert [(event.action, event.detail["path"]) for event in events] == [
        (AuditEvent.Action.SPACE_GLOBAL_WRITTEN, "a.md"),
        (AuditEvent.Action.SPACE_GLOBAL_DELETED, "a.md"),
    ]
    assert events[0].detail["revision"] == meta.revision
    assert store_get().list(GLOBAL) == []


def test_a_refused_global_write_leaves_no_audit_row(tenant):
    tenant.admin.is_superuser = True
    writer = SpaceWriter.of_user(tenant.admin, tenant_id=tenant.team.pk)
    space_document_write(handle=GLOBAL, path="a.md", body=b"1", expected_revision=0, writer=writer)

    with pytest.raises(VersionConflict):
        space_document_write(
            handle=GLOBAL, path="a.md", body=b"2", expected_revision=0, writer=writer
        )

    assert AuditEvent.objects.filter(action=AuditEvent.Action.SPACE_GLOBAL_WRITTEN).count() == 1


# ---- the secret corpus, on every writer ------------------------------------------------------


def rest_writer(tenant: Tenant) -> Callable[[bytes], dict[str, object] | None]:
    """PUT over REST: the refusal's detail, or None when written."""
    client = tenant.client_for(tenant.member)

    def put(body: bytes) -> dict[str, object] | None:
        query = urlencode({"visibility": "org", "name": "notes", "path": "a.md"})
        response = client.put(
            f"/api/v1/memory/doc?{query}",
            body,
            content_type="text/markdown; charset=utf-8",
            HTTP_X_BASE_VERSION="0",
        )
        if response.status_code == 200:
            return None
        return assert_error(response, 422, "SECRET_DETECTED")["detail"]

    return put


def service_writer(kind: WriterKind) -> Callable[[Tenant], Callable[[bytes], object]]:
    def make(tenant: Tenant) -> Callable[[bytes], dict[str, object] | None]:
        def put(body: bytes) -> dict[str, object] | None:
            try:
                write(tenant, writer_of(kind, tenant), body)
            except SecretDetected as refused:
                return refused.detail
            return None

        return put

    return make


WRITERS = {"rest": rest_writer} | {f"service-{kind}": service_writer(kind) for kind in WriterKind}


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    "credential", CREDENTIALS, ids=[f"{c.rule}-{i}" for i, c in enumerate(CREDENTIALS)]
)
def test_a_credential_is_refused_by_every_writer_and_nothing_moves(tenant, writer, credential):
    put = WRITERS[writer](tenant)
    body = f"# Notes\nSome context.\n{credential.line}\n".encode()

    detail = put(body)

    assert detail == {"path": "a.md", "rule": credential.rule, "line": 3}
    assert store_get().list(org_space(tenant)) == []
    usage = store_get().usage(org_space(tenant))
    assert (usage.used_bytes, usage.tenant_used_bytes) == (0, 0)


@pytest.mark.parametrize("writer", WRITERS)
def test_prose_is_accepted_by_every_writer(tenant, writer):
    put = WRITERS[writer](tenant)
    body = "\n".join(["# Prose", *PROSE]).encode()

    assert put(body) is None
    stored = store_get().read(org_space(tenant), "a.md")
    assert stored is not None
    assert stored.body == body
