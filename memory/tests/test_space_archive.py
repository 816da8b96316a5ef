"""Export and import of a memory space (memory.spaces.archive): the format, the round trip
on both stores, the hostile-archive corpus, the strategies and dry run."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest
from django.utils import timezone

from conftest import Tenant, postgres_only, run_concurrently
from memory.errors import (
    ArchiveChecksumMismatch,
    ArchiveInvalid,
    GlobalSpaceWriteDenied,
    SecretDetected,
    SpaceQuotaExceeded,
)
from memory.spaces import archive as space_archive
from memory.spaces.archive import (
    FORMAT,
    ImportStrategy,
    _TarStream,
    archive_export,
    import_strategy_parse,
    space_export,
    space_export_file_name,
    space_import,
)
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, WriterKind, space_document_write
from memory.spaces.store import DocumentMeta, StoredDocument
from memory.tests.secret_corpus import CREDENTIALS
from memory.tests.spaces.conftest import store_write
from workspaces.errors import (
    DocumentTooLarge,
    DocumentUnreadable,
    InvalidDocumentPath,
    InvalidText,
    ValidationFailed,
)
from workspaces.models import AuditEvent, User

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
    documents = (store.read(handle, meta.path) for meta in store.list(handle))
    return {document.meta.path: document.body for document in documents if document is not None}


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


def member_bytes(tar: tarfile.TarFile, name: str) -> bytes:
    extracted = tar.extractfile(name)
    assert extracted is not None
    return extracted.read()


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
        manifest = json.loads(member_bytes(tar, "manifest.json"))
        checksums = member_bytes(tar, "checksums.sha256").decode()
        bodies = {name[5:]: member_bytes(tar, name) for name in names if name.startswith("docs/")}
    assert bodies == DOCUMENTS
    assert manifest["format"] == FORMAT
    assert manifest["doc_count"] == len(DOCUMENTS)
    assert manifest["space"] == {
        "visibility": "org",
        "name": "notes",
        "project": "",
        "bot": "",
        "run": "",
    }
    assert manifest["unaddressable"] == []
    sums = {path: hashlib.sha256(body).hexdigest() for path, body in DOCUMENTS.items()}
    assert [
        (d["path"], d["size"], d["checksum"], d["revision"]) for d in manifest["documents"]
    ] == [(path, len(DOCUMENTS[path]), sums[path], 1) for path in sorted(DOCUMENTS)]
    assert checksums == "".join(f"{sums[path]}  docs/{path}\n" for path in sorted(DOCUMENTS))


@pytest.mark.parametrize(
    "names",
    [
        ["manifest.json", "docs/a.md", "checksums.sha256"],
        ["docs/" + "n" * 92 + ".md"],  # exactly the 100 bytes of the ustar name field
        ["docs/" + "long/" * 30 + "x.md"],  # past it: a PAX header carries the path
        ["docs/caf\u00e9/\u00fcber.md"],  # not ASCII: a PAX header too
    ],
    ids=["plain", "100 bytes", "long", "not ASCII"],
)
@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 20_000])
def test_the_export_tar_stream_is_the_one_tarfile_writes(names, size):
    """The export builds its headers itself; they must stay byte for byte tarfile's (PAX
    format), so that readers of either agree and the same space keeps the same bytes."""
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    ours = io.BytesIO()
    stream = _TarStream(ours)
    theirs = io.BytesIO()
    with tarfile.open(fileobj=theirs, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            stream.add(name, body)
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = size, 0, 0o644
            tar.addfile(info, io.BytesIO(body))
    stream.close()

    assert ours.getvalue() == theirs.getvalue()


def test_the_file_name_names_the_space_safely():
    handle = SpaceHandle(
        visibility=Visibility.BOT, name="my notes/../x", tenant_id=1, project="app", bot="hélper"
    )
    assert space_export_file_name(handle) == "memory-bot-app-hélper-my_notes_.._x.tar.gz"


def test_spaces_named_in_another_script_export_under_their_own_names():
    names = ["ééé", "ààà", "日本", "a\u200bb"]
    file_names = [
        space_export_file_name(SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=1))
        for name in names
    ]
    # A zero-width space is no letter: it becomes a separator, never part of the name.
    assert file_names == [
        "memory-org-ééé.tar.gz",
        "memory-org-ààà.tar.gz",
        "memory-org-日本.tar.gz",
        "memory-org-a_b.tar.gz",
    ]


@pytest.mark.parametrize("credential", CREDENTIALS[:3])
def test_export_of_a_space_holding_a_credential_writes_nothing(tenant, credential):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"fine\n"})
    # Stored before the scanner knew it: written around the write path, straight to the store.
    store_write(store_get(), handle, "z.md", f"key: {credential}\n".encode(), expected=0)
    out = io.BytesIO()

    with pytest.raises(SecretDetected) as refused:
        space_export(handle=handle, out=out)

    assert out.getvalue() == b""
    assert refused.value.detail["path"] == "z.md"


def test_a_refused_export_closes_what_it_was_reading_at_once():
    closed = []

    def reading():
        try:
            for path, body in [("a.md", f"key: {CREDENTIALS[0]}\n"), ("b.md", "fine\n")]:
                meta = DocumentMeta(
                    path=path,
                    size=len(body),
                    checksum="",
                    revision=1,
                    updated_by="user:1",
                    updated_at=timezone.now(),
                )
                yield StoredDocument(meta=meta, body=body.encode())
        finally:
            closed.append(True)

    with pytest.raises(SecretDetected):
        archive_export(out=io.BytesIO(), space={"name": "x"}, documents=reading())

    assert closed == [True]


@pytest.mark.parametrize(
    "stored",
    [b"# A\nfirsT\n", b"# A\n", b"# A\nfirst\nand more\n"],
    ids=["a byte altered", "cut", "longer"],
)
def test_an_export_refuses_a_body_that_is_not_what_its_metadata_says(stored):
    # The filesystem store's bodies are files anyone with the disk can edit: an edited one
    # was exported under a 200 with its sidecar's checksum (an archive that fails its own
    # checks), cut to its recorded size, or padded with the next document's bytes.
    recorded = b"# A\nfirst\n"
    meta = DocumentMeta(
        path="a.md",
        size=len(recorded),
        checksum="sha256:" + hashlib.sha256(recorded).hexdigest(),
        revision=3,
        updated_by="user:1",
        updated_at=timezone.now(),
    )
    out = io.BytesIO()

    with pytest.raises(DocumentUnreadable) as refused:
        archive_export(
            out=out, space={"name": "x"}, documents=[StoredDocument(meta=meta, body=stored)]
        )

    assert refused.value.detail == {"path": "a.md", "revision": 3}
    assert out.getvalue() == b""


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


@pytest.mark.parametrize(
    ("path", "body", "listed_in"),
    [("old/./b.md", b"legacy\n", "unaddressable"), ("b.md", b"caf\xe9\n", "unreadable")],
    ids=["path no longer valid", "body not UTF-8"],
)
def test_a_document_an_import_would_refuse_is_listed_not_dropped(tenant, path, body, listed_in):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"kept\n"})
    # Stored under a spelling the path rule now refuses, or edited on disk past the UTF-8
    # check (the filesystem store): only the store can hold it.
    store_write(store_get(), handle, path, body, expected=0)

    with tarfile.open(fileobj=io.BytesIO(exported(handle)), mode="r:gz") as tar:
        names = tar.getnames()
        manifest = json.loads(member_bytes(tar, "manifest.json"))

    assert names == ["manifest.json", "docs/a.md", "checksums.sha256"]
    assert {key: manifest[key] for key in ("unaddressable", "unreadable")} == {
        key: [path] if key == listed_in else [] for key in ("unaddressable", "unreadable")
    }
    assert manifest["doc_count"] == 1


# ---- the hostile-archive corpus ------------------------------------------------------------

VALID = {"a.md": b"a\n"}


def gzip_bomb(inflated_bytes: int) -> bytes:
    """A small archive in the documented layout up to an (ignored) entry that inflates to
    `inflated_bytes` of zeros."""
    header = tarfile.TarInfo("bomb.bin")
    header.size = inflated_bytes
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    # The valid head, without its end-of-archive blocks.
    head = tar_bytes(layout(VALID)[:2]).rstrip(b"\0")
    head += bytes(-len(head) % tarfile.BLOCKSIZE)
    parts = [compressor.compress(head + header.tobuf(format=tarfile.PAX_FORMAT))]
    chunk = bytes(1024 * 1024)
    for _ in range(inflated_bytes // len(chunk)):
        parts.append(compressor.compress(chunk))
    parts.append(compressor.flush())
    return b"".join(parts)


def many_entries(count: int) -> bytes:
    return archive_of(layout(VALID, extra=[Entry(f"extra/{n}.txt") for n in range(count)]))


def with_manifest(manifest: bytes) -> bytes:
    entries = layout(VALID)
    return archive_of([Entry("manifest.json", manifest), *entries[1:]])


def with_manifest_field(field: str, value: object, *, document: bool = False) -> bytes:
    """The valid archive whose manifest says `value` for `field` (of its one document's)."""
    manifest = json.loads(layout(VALID)[0].data)
    (manifest["documents"][0] if document else manifest)[field] = value
    return archive_of(layout(VALID, manifest=manifest))


def device(kind: bytes, name: str = "docs/x.md") -> bytes:
    return archive_of(layout(VALID, extra=[Entry(name, kind=kind)]))


def hostile(name: str, data: bytes = b"evil\n") -> bytes:
    return archive_of(layout(VALID, extra=[Entry(name, data)]))


FULL = archive_of(layout(VALID))

# (case, the archive, the refusal's code, its detail.reason or None, its detail.entry)
HOSTILE: list[tuple[str, Callable[[], bytes], str, str | None, str | None]] = [
    (
        "traversal",
        lambda: hostile("docs/../../evil.md"),
        "ARCHIVE_INVALID",
        "dot_dot",
        "docs/../../evil.md",
    ),
    ("absolute", lambda: hostile("/etc/x.md"), "ARCHIVE_INVALID", "absolute", "/etc/x.md"),
    ("drive", lambda: hostile("docs/C:/x.md"), "ARCHIVE_INVALID", "drive", "docs/C:/x.md"),
    ("backslash", lambda: hostile("docs\\x.md"), "ARCHIVE_INVALID", "backslash", "docs\\x.md"),
    (
        "symlink",
        lambda: archive_of(
            layout(VALID, extra=[Entry("docs/l.md", kind=tarfile.SYMTYPE, link="/etc/passwd")])
        ),
        "ARCHIVE_INVALID",
        "symlink",
        "docs/l.md",
    ),
    (
        "hardlink",
        lambda: archive_of(
            layout(VALID, extra=[Entry("docs/h.md", kind=tarfile.LNKTYPE, link="docs/a.md")])
        ),
        "ARCHIVE_INVALID",
        "hardlink",
        "docs/h.md",
    ),
    ("fifo", lambda: device(tarfile.FIFOTYPE), "ARCHIVE_INVALID", "fifo", "docs/x.md"),
    ("character device", lambda: device(tarfile.CHRTYPE), "ARCHIVE_INVALID", "device", "docs/x.md"),
    ("block device", lambda: device(tarfile.BLKTYPE), "ARCHIVE_INVALID", "device", "docs/x.md"),
    (
        "duplicate",
        lambda: hostile("docs/a.md", b"again\n"),
        "ARCHIVE_INVALID",
        "duplicate",
        "docs/a.md",
    ),
    (
        "dot segment",
        lambda: hostile("docs/./a.md"),
        "ARCHIVE_INVALID",
        "not_canonical",
        "docs/./a.md",
    ),
    (
        "empty segment",
        lambda: hostile("docs//b.md"),
        "ARCHIVE_INVALID",
        "not_canonical",
        "docs//b.md",
    ),
    (
        "another spelling",
        lambda: hostile("docs/%61.md"),
        "ARCHIVE_INVALID",
        "not_canonical",
        "docs/%61.md",
    ),
    (
        "directory over a document",
        lambda: device(tarfile.DIRTYPE, "docs/a.md"),
        "ARCHIVE_INVALID",
        "duplicate",
        "docs/a.md",
    ),
    (
        "directory as the checksums",
        lambda: archive_of([layout(VALID)[0], Entry("checksums.sha256", kind=tarfile.DIRTYPE)]),
        "ARCHIVE_INVALID",
        "directory_trick",
        "checksums.sha256",
    ),
    ("gzip bomb", lambda: gzip_bomb(128 * 1024 * 1024), "ARCHIVE_INVALID", "too_large", None),
    (
        "10,001 entries",
        lambda: many_entries(10_001),
        "ARCHIVE_INVALID",
        "too_many_entries",
        "extra/9998.txt",
    ),
    (
        "wrong checksum",
        lambda: archive_of(layout(VALID, checksums=f"{'0' * 64}  docs/a.md\n")),
        "ARCHIVE_CHECKSUM_MISMATCH",
        None,
        "docs/a.md",
    ),
    (
        "checksum missing",
        lambda: archive_of(layout(VALID, checksums="")),
        "ARCHIVE_CHECKSUM_MISMATCH",
        None,
        "docs/a.md",
    ),
    (
        "another format",
        lambda: with_manifest(json.dumps({"format": "iterion.memory.v2"}).encode()),
        "ARCHIVE_INVALID",
        "format_unsupported",
        "manifest.json",
    ),
    (
        # Deeper than the parser's recursion: once a RecursionError, a 500.
        "manifest nested past the stack",
        lambda: with_manifest(b"[" * 100_000 + b"]" * 100_000),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "manifest.json",
    ),
    (
        "manifest not JSON",
        lambda: with_manifest(b"{not json"),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "manifest.json",
    ),
    # The manifest must describe the documents present: it was read for its paths and sums only.
    (
        "manifest size wrong",
        lambda: with_manifest_field("size", 3, document=True),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "docs/a.md",
    ),
    (
        "manifest size not a number",
        lambda: with_manifest_field("size", "2", document=True),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "docs/a.md",
    ),
    (
        "manifest doc_count wrong",
        lambda: with_manifest_field("doc_count", 2),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "manifest.json",
    ),
    (
        "manifest doc_count true",
        lambda: with_manifest_field("doc_count", True),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "manifest.json",
    ),
    (
        "manifest not first",
        lambda: archive_of(list(reversed(layout(VALID)))),
        "ARCHIVE_INVALID",
        "manifest_invalid",
        "checksums.sha256",
    ),
    ("not gzip", lambda: tar_bytes(layout(VALID)), "ARCHIVE_INVALID", "not_gzip", None),
    ("empty body", lambda: b"", "ARCHIVE_INVALID", "not_gzip", None),
    ("truncated gzip", lambda: FULL[: len(FULL) // 2], "ARCHIVE_INVALID", "truncated", None),
    # The tar inside is whole: only the gzip trailer (CRC and length) is cut or wrong.
    ("gzip trailer cut", lambda: FULL[:-8], "ARCHIVE_INVALID", "truncated", None),
    (
        "gzip checksum wrong",
        lambda: FULL[:-8] + bytes(byte ^ 0xFF for byte in FULL[-8:-4]) + FULL[-4:],
        "ARCHIVE_INVALID",
        "corrupt",
        None,
    ),
    (
        "not a tar",
        lambda: gzip.compress(b"plain text, not a tar archive\n" * 40),
        "ARCHIVE_INVALID",
        "corrupt",
        None,
    ),
    (
        "over the ceiling",
        lambda: archive_of(layout({"big.md": b"x" * (2 * 1024 * 1024 + 1)})),
        "DOCUMENT_TOO_LARGE",
        None,
        None,
    ),
    (
        "a credential",
        lambda: archive_of(layout({"creds.md": f"token {CREDENTIALS[0]}\n".encode()})),
        "SECRET_DETECTED",
        None,
        None,
    ),
    (
        "not Markdown",
        lambda: hostile("docs/x.png"),
        "ARCHIVE_INVALID",
        "not_canonical",
        "docs/x.png",
    ),
]


@pytest.mark.parametrize(
    ("archive", "code", "reason", "entry"),
    [case[1:] for case in HOSTILE],
    ids=[case[0] for case in HOSTILE],
)
def test_a_hostile_archive_is_refused_with_its_code_and_nothing_is_written(
    tenant, archive, code, reason, entry
):
    handle = space(tenant)
    fill(tenant, handle, {"keep.md": b"kept\n"})
    before = (contents(handle), store_get().usage(handle))

    with pytest.raises(
        (ArchiveInvalid, ArchiveChecksumMismatch, DocumentTooLarge, SecretDetected)
    ) as refused:
        run_import(tenant, handle, archive(), ImportStrategy.OVERWRITE)

    assert refused.value.code == code
    if reason is not None:
        assert refused.value.detail["reason"] == reason
    if entry is not None:
        assert refused.value.detail["entry"] == entry
    assert (contents(handle), store_get().usage(handle)) == before


@pytest.mark.parametrize(
    ("field", "value", "document", "detail"),
    [
        ("size", 3, True, {"entry": "docs/a.md", "problem": "size", "actual": 2}),
        ("doc_count", 0, False, {"entry": "manifest.json", "problem": "doc_count"}),
    ],
    ids=["size", "doc_count"],
)
def test_a_manifest_that_misstates_the_archive_is_refused_naming_what(
    tenant, field, value, document, detail
):
    with pytest.raises(ArchiveInvalid) as refused:
        run_import(
            tenant,
            space(tenant),
            with_manifest_field(field, value, document=document),
            ImportStrategy.SKIP,
        )

    assert refused.value.detail == {"reason": "manifest_invalid", "actual": 1, **detail}
    assert contents(space(tenant)) == {}


@pytest.mark.parametrize(
    "manifest",
    [
        b'{"format": "\\ud800"}',
        # ASCII bytes, but UTF-16: the escape's `\` and `u` are apart.
        '{"format": "\\ud800"}'.encode("utf-16-le"),
        # No escape: json reads a surrogate's UTF-8 spelling as the surrogate.
        '{"format": "\ud800"}'.encode("utf-8", "surrogatepass"),
    ],
    ids=["escaped", "escaped in UTF-16", "UTF-8 bytes"],
)
def test_a_manifest_holding_a_lone_surrogate_is_refused_however_spelled(tenant, manifest):
    with pytest.raises(ArchiveInvalid) as refused:
        run_import(tenant, space(tenant), with_manifest(manifest))

    assert refused.value.detail == {
        "reason": "manifest_invalid",
        "entry": "manifest.json",
        "problem": "not_unicode",
    }


def test_a_gzip_bomb_stops_at_the_bound_without_reading_it_all(tenant):
    bomb = gzip_bomb(256 * 1024 * 1024)
    source = io.BytesIO(bomb)

    with pytest.raises(ArchiveInvalid) as refused:
        space_import(
            handle=space(tenant),
            archive=source,
            strategy=ImportStrategy.SKIP,
            dry_run=False,
            writer=importer(tenant),
        )

    assert refused.value.detail == {"reason": "too_large", "limitBytes": 64 * 1024 * 1024}
    # 64 MiB of the 256 inflated: about a quarter of the compressed bytes were read.
    assert source.tell() < len(bomb) // 2


def test_ten_thousand_entries_are_within_the_bound(tenant):
    # The manifest, the document and the checksums are three: 9,997 more make 10,000.
    report = run_import(tenant, space(tenant), many_entries(9_997))

    assert report.imported == 1
    assert len(report.ignored) == 9_997


def test_a_name_starting_with_two_dots_is_a_name_and_imports(tenant):
    handle = space(tenant)

    report = run_import(
        tenant, handle, archive_of(layout({"..notes.md": b"n\n", "d/..x.md": b"x\n"}))
    )

    assert report.imported == 2
    assert contents(handle) == {"..notes.md": b"n\n", "d/..x.md": b"x\n"}


# ---- strategies and dry run ----------------------------------------------------------------

INCOMING = {"a.md": b"new a\n", "b.md": b"new b\n"}


def strategy_outcomes(held: bytes) -> list[tuple[ImportStrategy, tuple[int, ...], dict]]:
    """Each strategy, its counts (imported, replaced, skipped, renamed) and the space after
    importing INCOMING into a space whose `a.md` holds `held`."""
    return [
        (ImportStrategy.SKIP, (1, 0, 1, 0), {"a.md": held, "b.md": b"new b\n"}),
        (ImportStrategy.OVERWRITE, (1, 1, 0, 0), {"a.md": b"new a\n", "b.md": b"new b\n"}),
        (
            ImportStrategy.RENAME,
            (1, 0, 0, 1),
            {"a.md": held, "a.import.md": b"new a\n", "b.md": b"new b\n"},
        ),
    ]


@pytest.mark.parametrize(("strategy", "counts", "after"), strategy_outcomes(b"old a\n"))
def test_each_strategy_counts_each_document_once(tenant, strategy, counts, after):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})

    report = run_import(tenant, handle, archive_of(layout(INCOMING)), strategy)

    # imported, replaced, skipped, renamed: one count each, adding up to the archive's two.
    assert (report.imported, report.replaced, report.skipped, report.renamed) == counts
    assert contents(handle) == after


def test_rename_never_overwrites_a_renamed_copy(tenant):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})
    archive = archive_of(layout(INCOMING))

    first = run_import(tenant, handle, archive, ImportStrategy.RENAME)
    second = run_import(tenant, handle, archive, ImportStrategy.RENAME)
    third = run_import(tenant, handle, archive, ImportStrategy.RENAME)

    assert (first.imported, first.renamed) == (1, 1)
    assert (second.imported, second.renamed) == (0, 2)
    assert [(d.path, d.target) for d in third.documents] == [
        ("a.md", "a.import-3.md"),
        ("b.md", "b.import-2.md"),
    ]
    assert contents(handle) == {
        "a.md": b"old a\n",
        "a.import.md": b"new a\n",
        "a.import-2.md": b"new a\n",
        "a.import-3.md": b"new a\n",
        "b.md": b"new b\n",
        "b.import.md": b"new b\n",
        "b.import-2.md": b"new b\n",
    }


def test_rename_steps_over_a_name_the_archive_itself_brings(tenant):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})

    report = run_import(
        tenant,
        handle,
        archive_of(layout({"a.md": b"new\n", "a.import.md": b"mine\n"})),
        ImportStrategy.RENAME,
    )

    assert (report.imported, report.renamed) == (1, 1)
    assert contents(handle) == {
        "a.md": b"old a\n",
        "a.import.md": b"mine\n",
        "a.import-2.md": b"new\n",
    }


@pytest.mark.parametrize(
    ("held", "archive"),
    [
        ({"a.md": b"old a\n", "a.import.md/note.md": b"n\n"}, {"a.md": b"new\n"}),
        ({"a.md": b"old a\n"}, {"a.md": b"new\n", "a.import.md/note.md": b"n\n"}),
    ],
    ids=["the space's", "the archive's"],
)
def test_rename_steps_over_a_name_that_is_a_directory(tenant, held, archive):
    # `a.import.md` names a directory here: once chosen all the same, the whole import was
    # refused (INVALID_DOCUMENT_PATH, path_conflict) though `a.import-2.md` was free.
    handle = space(tenant)
    fill(tenant, handle, held)

    report = run_import(tenant, handle, archive_of(layout(archive)), ImportStrategy.RENAME)

    assert [(d.path, d.target) for d in report.documents if d.path == "a.md"] == [
        ("a.md", "a.import-2.md")
    ]
    assert contents(handle)["a.import-2.md"] == b"new\n"


@pytest.mark.parametrize(("strategy", "counts", "after"), strategy_outcomes(b"mine\n"))
def test_a_save_between_an_imports_plan_and_its_write_is_met_by_the_strategy(
    tenant, monkeypatch, strategy, counts, after
):
    # The import plans against the space as listed, then writes: a person's Save of `a.md`
    # in between made the plan stale, and every strategy answered 409 VERSION_CONFLICT,
    # though `skip` and `rename` exist to meet a document already there.
    handle = space(tenant)
    _save_before_the_imports_first_write(monkeypatch, tenant, handle, {"a.md": b"mine\n"})

    report = run_import(tenant, handle, archive_of(layout(INCOMING)), strategy)

    assert (report.imported, report.replaced, report.skipped, report.renamed) == counts
    assert contents(handle) == after
    assert store_get().usage(handle).used_bytes == sum(map(len, after.values()))


def test_a_renamed_copys_name_taken_before_the_import_writes_steps_to_the_next(tenant, monkeypatch):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})
    _save_before_the_imports_first_write(monkeypatch, tenant, handle, {"a.import.md": b"mine\n"})

    report = run_import(
        tenant, handle, archive_of(layout({"a.md": b"new\n"})), ImportStrategy.RENAME
    )

    assert [(d.path, d.target) for d in report.documents] == [("a.md", "a.import-2.md")]
    assert contents(handle) == {
        "a.md": b"old a\n",
        "a.import.md": b"mine\n",
        "a.import-2.md": b"new\n",
    }


def _save_before_the_imports_first_write(
    monkeypatch, tenant: Tenant, handle: SpaceHandle, documents: dict[str, bytes]
) -> None:
    """Have a person save `documents` after the next import has planned, before it writes."""
    write_many = space_archive.space_documents_write_as_read
    pending = [documents]

    def saved_first(**batch):
        if pending:
            fill(tenant, handle, pending.pop())
        return write_many(**batch)

    monkeypatch.setattr(space_archive, "space_documents_write_as_read", saved_first)


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", list(ImportStrategy))
def test_imports_racing_into_one_space_each_meet_the_others_by_their_strategy(
    make_tenant, strategy
):
    tenant = make_tenant()
    handle = space(tenant)
    data = archive_of(layout(INCOMING))

    reports = run_concurrently(
        *(lambda: run_import(tenant, handle, data, strategy) for _ in range(6))
    )

    assert not [report for report in reports if isinstance(report, BaseException)], reports
    first_imports = [report for report in reports if report.imported == 2]
    assert len(first_imports) == 1, reports
    held = contents(handle)
    expected = {
        ImportStrategy.SKIP: {"a.md", "b.md"},
        ImportStrategy.OVERWRITE: {"a.md", "b.md"},
        ImportStrategy.RENAME: {"a.md", "b.md"}
        | {f"{name}.import{suffix}.md" for name in "ab" for suffix in ("", "-2", "-3", "-4", "-5")},
    }[strategy]
    assert set(held) == expected
    assert store_get().usage(handle).used_bytes == sum(map(len, held.values()))
    assert {drift.drift for drift in store_get().reconcile()} == {0}


def test_a_renamed_copy_whose_name_would_be_too_long_is_refused_naming_it(tenant):
    # A name at the segment limit has no room for `.import`: the refusal once gave only the
    # reason, leaving the person to find which of the archive's documents it meant.
    longest = "n" * 252 + ".md"
    handle = space(tenant)
    fill(tenant, handle, {longest: b"old\n"})

    with pytest.raises(InvalidDocumentPath) as refused:
        run_import(tenant, handle, archive_of(layout({longest: b"new\n"})), ImportStrategy.RENAME)

    assert refused.value.detail == {
        "reason": "segment_too_long",
        "limitBytes": 255,
        "path": longest,
        "target": "n" * 252 + ".import.md",
    }
    assert contents(handle) == {longest: b"old\n"}


@pytest.mark.parametrize("strategy", list(ImportStrategy))
def test_dry_run_answers_the_same_plan_and_writes_nothing(tenant, strategy):
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})
    archive = archive_of(layout(INCOMING, extra=[Entry("notes.txt", b"x")]))
    before = (contents(handle), store_get().usage(handle))

    planned = run_import(tenant, handle, archive, strategy, dry_run=True)
    unchanged = (contents(handle), store_get().usage(handle))
    done = run_import(tenant, handle, archive, strategy)

    assert unchanged == before
    assert planned == done


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (f"token {CREDENTIALS[0]}\n".encode(), SecretDetected),
        (b"not UTF-8 \xff\n", InvalidText),
    ],
    ids=["credential", "not UTF-8"],
)
def test_a_document_the_plan_skips_is_judged_like_the_others(tenant, body, refusal):
    # The same archive is refused whatever the space holds: a skipped document was once
    # never judged, so this one imported into a space that had a.md and was refused
    # into one that had not.
    handle = space(tenant)
    fill(tenant, handle, {"a.md": b"old a\n"})

    with pytest.raises(refusal):
        run_import(tenant, handle, archive_of(layout({"a.md": body, "b.md": b"b\n"})))

    assert contents(handle) == {"a.md": b"old a\n"}


def test_dry_run_refuses_what_the_import_would(tenant, settings):
    handle = space(tenant)
    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "org": 10}

    with pytest.raises(SpaceQuotaExceeded):
        run_import(tenant, handle, archive_of(layout(INCOMING)), dry_run=True)


def test_an_import_past_the_quota_is_refused_as_one_delta_and_writes_nothing(tenant, settings):
    handle = space(tenant)
    fill(tenant, handle, {"keep.md": b"12345"})
    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "org": 16}

    with pytest.raises(SpaceQuotaExceeded) as refused:
        run_import(tenant, handle, archive_of(layout(INCOMING)))

    assert refused.value.detail == {"usedBytes": 5, "deltaBytes": 12, "quotaBytes": 16}
    assert contents(handle) == {"keep.md": b"12345"}


def test_importing_into_global_needs_a_superuser(tenant):
    handle = SpaceHandle(visibility=Visibility.GLOBAL, name="handbook", tenant_id=None)

    with pytest.raises(GlobalSpaceWriteDenied):
        run_import(tenant, handle, b"not even read")

    assert contents(handle) == {}
    tenant.admin.is_superuser = True
    report = space_import(
        handle=handle,
        archive=io.BytesIO(archive_of(layout(INCOMING))),
        strategy=ImportStrategy.SKIP,
        dry_run=False,
        writer=importer(tenant, tenant.admin),
    )
    assert report.imported == 2
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SPACE_GLOBAL_WRITTEN).count() == 2


@pytest.mark.parametrize(("value", "strategy"), [(None, "skip"), ("rename", "rename")])
def test_the_strategy_defaults_to_skip(value, strategy):
    assert import_strategy_parse(value) == strategy


# Blank is a value, not the parameter's absence: none of the schema's enum, refused as a blank
# `dryRun=` or `purpose=` is (and as the command line refuses `--strategy ""`).
@pytest.mark.parametrize("value", ["merge", "SKIP", "skip ", ""])
def test_an_unknown_strategy_is_validation_failed(value):
    with pytest.raises(ValidationFailed) as refused:
        import_strategy_parse(value)

    assert "strategy" in refused.value.detail["fields"]
