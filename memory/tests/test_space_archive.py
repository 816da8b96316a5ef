"""Export and import of a memory space (memory.spaces.archive): the format, the round trip
on both stores, the hostile-archive corpus, the strategies and dry run."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from conftest import Tenant
from memory.errors import (
    SecretDetected,
)
from memory.spaces.archive import (
    FORMAT,
    ImportStrategy,
    space_export,
    space_export_file_name,
    space_import,
)
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, WriterKind, space_document_write
from memory.spaces.store import Quotas
from memory.tests.secret_corpus import CREDENTIALS
from workspaces.models import User

# Every behaviour, on both stores.
pytestmark = pytest.mark.usefixtures("every_store")

DOCUMENTS = {
    "a.md": b"# A\nfirst\n",
    "notes/b.md": "# B\nsecond, caf\u00e9\n".encode(),
    "notes/deep/c.md": b"",
    "..notes.md": b"dots are a name, not a segment\n",
}


def space(tenant: Tenant, name: str = "notes") -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=tenant.team.pk)


def importer(tenant: Tenant, user: User | None = None) -> SpaceWriter:
    user = user or tenant.member
    return SpaceWriter(
        kind=WriterKind.IMPORT, ident=str(user.pk), tenant_id=tenant.team.pk, user=user
    )


def fill(tenant: Tenant, handle: SpaceHandle, documents: dict[str, bytes]) -> None:
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    for path, body in documents.items():
        space_document_write(
            handle=handle, path=path, body=body, expected_revision=None, writer=writer
        )


def contents(handle: SpaceHandle) -> dict[str, bytes]:
    store = store_get()
    return {meta.path: store.read(handle, meta.path).body for meta in store.list(handle)}


def exported(handle: SpaceHandle) -> bytes:
    out = io.BytesIO()
    space_export(handle=handle, out=out)
    return out.getvalue()


def run_import(
    tenant: Tenant,
    handle: SpaceHandle,
    data: bytes,
    strategy: ImportStrategy = ImportStrategy.SKIP,
    *,
    dry_run: bool = False,
):
    return space_import(
        handle=handle,
        archive=io.BytesIO(data),
        strategy=strategy,
        dry_run=dry_run,
        writer=importer(tenant),
    )


# ---- building archives by hand -----------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    link: str = ""
    size: int | None = None  # a declared size other than the data's


def tar_bytes(entries: Iterable[Entry], *, tar_format: int = tarfile.PAX_FORMAT) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = entry.kind
            info.linkname = entry.link
            info.size = len(entry.data) if entry.kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(entry.data) if info.size else None)
    return raw.getvalue()


def layout(
    documents: dict[str, bytes],
    *,
    manifest: dict[str, object] | None = None,
    checksums: str | None = None,
    extra: Iterable[Entry] = (),
) -> list[Entry]:
    """The documented layout of `documents`: manifest first, docs sorted, checksums last."""
    sums = {path: hashlib.sha256(body).hexdigest() for path, body in documents.items()}
    if manifest is None:
        manifest = {
            "format": FORMAT,
            "space": {"visibility": "org", "name": "elsewhere"},
            "doc_count": len(documents),
            "documents": [
                {"path": path, "size": len(body), "checksum": sums[path], "revision": 1}
                for path, body in sorted(documents.items())
            ],
            "unaddressable": [],
        }
    if checksums is None:
        checksums = "".join(f"{sums[path]}  docs/{path}\n" for path in sorted(documents))
    return [
        Entry("manifest.json", json.dumps(manifest).encode()),
        *(Entry(f"docs/{path}", body) for path, body in sorted(documents.items())),
        *extra,
        Entry("checksums.sha256", checksums.encode()),
    ]


def archive_of(entries: Iterable[Entry]) -> bytes:
    return gzip.compress(tar_bytes(entries))


# ---- export --------------------------------------------------------------------------------


def test_export_writes_the_documented_layout_deterministically(tenant):
    handle = space(tenant)
    fill(tenant, handle, DOCUMENTS)

    first, second = exported(handle), exported(handle)

    assert first == second
    assert first[:2] == b"\x1f\x8b"
    assert first[4:8] == b"\0\0\0\0"  # the gzip header's mtime
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        members = tar.getmembers()
        names = [member.name for member in members]
        assert names == [
            "manifest.json",
            *(f"docs/{path}" for path in sorted(DOCUMENTS)),
            "checksums.sha256",
        ]
        assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {
            (0, 0, 0, "", "", 0o644)
        }
        manifest = json.loads(tar.extractfile("manifest.json").read())
        checksums = tar.extractfile("checksums.sha256").read().decode()
        bodies = {
            name[5:]: tar.extractfile(name).read() for name in names if name.startswith("docs/")
        }
    assert bodies == DOCUMENTS
    assert manifest["format"] == FORMAT
    assert manifest["doc_count"] == len(DOCUMENTS)
    assert manifest["space"]["visibility"] == "org" and manifest["space"]["name"] == "notes"
    assert manifest["unaddressable"] == []
    sums = {path: hashlib.sha256(body).hexdigest() for path, body in DOCUMENTS.items()}
    assert [
        (d["path"], d["size"], d["checksum"], d["revision"]) for d in manifest["documents"]
    ] == [(path, len(DOCUMENTS[path]), sums[path], 1) for path in sorted(DOCUMENTS)]
    assert checksums == "".join(f"{sums[path]}  docs/{path}\n" for path in sorted(DOCUMENTS))


def test_the_file_name_names_the_space_safely():
    handle = SpaceHandle(
        visibility=Visibility.BOT, name="my notes/../x", tenant_id=1, project="app", bot="hélper"
    )
    assert space_export_file_name(handle) == "memory-bot-app-h_lper-my_notes_.._x.tar.gz"


@pytest.mark.parametrize("credential", CREDENTIALS[:3])
def test_export_of_a_space_holding_a_credential_writes_nothing(tenant, credential):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"fine\n"})
    # Stored before the scanner knew it: written around the write path, straight to the store.
    writer = importer(tenant)
    store_get().write(
        handle,
        "z.md",
        f"key: {credential}\n".encode(),
        expected_revision=0,
        updated_by=writer.attribution,
        quotas=Quotas(space_bytes=0, tenant_bytes=0),
        deadline=time.monotonic() + 5,
    )
    out = io.BytesIO()

    with pytest.raises(SecretDetected) as refused:
        space_export(handle=handle, out=out)

    assert out.getvalue() == b""
    assert refused.value.detail["path"] == "z.md"


# ---- round trip ----------------------------------------------------------------------------


def test_round_trip_gives_identical_bodies_and_checksums(tenant):
    source, target = space(tenant), space(tenant, "copy")
    fill(tenant, source, DOCUMENTS)

    report = run_import(tenant, target, exported(source))

    assert (report.imported, report.skipped, report.renamed, report.ignored) == (4, 0, 0, [])
    assert contents(target) == contents(source)
    store = store_get()
    assert [(m.path, m.checksum, m.size) for m in store.list(target)] == [
        (m.path, m.checksum, m.size) for m in store.list(source)
    ]
    assert {m.updated_by for m in store.list(target)} == {f"import:{tenant.member.pk}"}
    assert store.usage(target).used_bytes == sum(len(body) for body in DOCUMENTS.values())


def test_an_archive_built_by_hand_in_the_documented_layout_imports(tenant):
    handle = space(tenant)

    report = run_import(
        tenant, handle, archive_of(layout(DOCUMENTS, extra=[Entry("README.txt", b"hi")]))
    )

    assert (report.imported, report.ignored) == (4, ["README.txt"])
    assert contents(handle) == DOCUMENTS
