"""Export and import of a whole memory space, as one archive of format `iterion.memory.v1`.

The archive is a gzip tar that another product reading the same format can open:

    manifest.json        first: format, space, doc_count, documents (path, size, checksum,
                         revision), unaddressable (paths stored under a spelling no longer
                         valid) and unreadable (stored bodies that are not UTF-8), both
                         listed rather than dropped
    docs/<path>          one per document, sorted by path
    checksums.sha256     last: `<sha256>  docs/<path>` lines, as `sha256sum -c` reads them

The same space exports to the same bytes: every entry has mtime 0, owner 0:0 with no
names, mode 0644, and the gzip header carries no name and mtime 0.

Export reads and scans every document before the first byte of the archive is written, so
a credential (SECRET_DETECTED) or an unreadable document is a refusal, never a cut archive.
The bodies wait in a spooled temporary file, not in memory.

Import is the one door through which untrusted bytes arrive in bulk. The archive is read as
a stream, never extracted to disk, and counted as it is read: more than
MEMORY_IMPORT_MAX_ENTRIES entries or MEMORY_IMPORT_MAX_BYTES decompressed bytes stop it at
the bound (a gzip bomb is not inflated first). Every entry name is judged before anything
else (ARCHIVE_INVALID with `detail.reason` and `detail.entry`), every checksum verified
(ARCHIVE_CHECKSUM_MISMATCH), then every document passes the one write path's refusals
(`memory.spaces.services`) and the store writes them all or none.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import functools
import gzip
import io
import json
import re
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings

from memory.errors import ArchiveChecksumMismatch, ArchiveInvalid
from memory.secrets import secret_refuse
from memory.spaces.handle import SpaceHandle
from memory.spaces.quotas import store_get
from memory.spaces.selectors import stored_text_or_none
from memory.spaces.services import (
    SpaceWriter,
    space_document_write_check,
    space_documents_write_as_read,
    space_write_permit,
)
from memory.spaces.store import DocumentMeta, PendingWrite, StoredDocument, body_checksum
from workspaces.errors import (
    DocumentTooLarge,
    DocumentUnreadable,
    InvalidDocumentPath,
    ValidationFailed,
    VersionConflict,
)
from workspaces.paths import DOCUMENT_SUFFIX, canonical_document_path

FORMAT = "iterion.memory.v1"
MANIFEST = "manifest.json"
CHECKSUMS = "checksums.sha256"
DOCS = "docs/"
MEDIA_TYPE = "application/gzip"
# Bodies of an export wait in memory up to this size, then on disk.
SPOOL_MEMORY_BYTES = 8 * 1024 * 1024
# gzip's fastest level: an export is a move or a backup of notes, read back once; level 6
# took a quarter of an export's time to make the archive about half as large again.
COMPRESS_LEVEL = 1
_ENTRY_MODE = 0o644
# Plans an import makes at most when other writers of the space keep making its plan stale
# (`space_import`): enough for a handful of imports and Saves racing on one space.
IMPORT_PLAN_ATTEMPTS = 8
# Bytes of the decompressed stream read at a time.
_READ_CHUNK = 1024 * 1024
# Bytes of the tar stream gathered before each write to the compressor.
_WRITE_CHUNK = 1024 * 1024
# A segment that starts with a drive prefix (`C:`), anywhere in an entry name.
_DRIVE = re.compile(r"(?:^|/)[A-Za-z]:")
_CHECKSUM_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")

Progress = Callable[[int, int], None]


class ImportStrategy(enum.StrEnum):
    SKIP = "skip"  # an existing document is left as it is (the default)
    OVERWRITE = "overwrite"  # an existing document is replaced
    RENAME = "rename"  # the archive's document is written beside it, `<name>.import.md`


def import_strategy_parse(value: str | None) -> ImportStrategy:
    """The strategy a request names (absent: skip); VALIDATION_FAILED for any other value,
    blank included: `strategy=` is none of the schema's enum, refused as a blank `dryRun=` is."""
    if value is None:
        return ImportStrategy.SKIP
    try:
        return ImportStrategy(value)
    except ValueError:
        choices = ", ".join(strategy.value for strategy in ImportStrategy)
        raise ValidationFailed(fields={"strategy": [f"Must be one of {choices}."]}) from None


@dataclass(frozen=True)
class ExportReport:
    doc_count: int
    doc_bytes: int  # the documents' bytes, before compression
    unaddressable: list[str]
    unreadable: list[str]  # stored bodies that are not UTF-8 (`stored_text`)


class ImportAction(enum.StrEnum):
    CREATE = "create"
    OVERWRITE = "overwrite"
    SKIP = "skip"
    RENAME = "rename"


@dataclass(frozen=True)
class PlannedDocument:
    path: str  # in the archive
    action: ImportAction
    target: str  # where it is written (the path itself, or its new name); "" when skipped


@dataclass(frozen=True)
class ImportReport:
    """Each document of the archive counted once, in one of `imported` (new to the space),
    `replaced` (overwrote the space's document), `skipped` or `renamed` (written beside it),
    so the four add up to the archive's documents; `ignored` names the entries outside docs/
    that were not read."""

    imported: int
    replaced: int
    skipped: int
    renamed: int
    ignored: list[str]
    documents: list[PlannedDocument] = field(default_factory=list)


# Export


def space_export(
    *, handle: SpaceHandle, out: IO[bytes], progress: Progress | None = None
) -> ExportReport:
    """Write the whole space as one archive to `out`. Every document is read and scanned
    first: SecretDetected or DocumentUnreadable is raised before a byte is written.
    `progress(done, total)` is called as documents are read."""
    store = store_get()
    space = {
        "visibility": handle.visibility.value,
        "name": handle.name,
        "project": handle.project,
        "bot": handle.bot,
        "run": handle.run,
    }
    # Listed only to show progress against a total: the export itself reads each once.
    total = len(store.list(handle)) if progress is not None else 0
    return archive_export(
        out=out, space=space, documents=store.read_all(handle), total=total, progress=progress
    )


def archive_export(
    *,
    out: IO[bytes],
    space: dict[str, Any],
    documents: Iterable[StoredDocument],
    total: int = 0,
    progress: Progress | None = None,
) -> ExportReport:
    """Write `documents` (in any order) as one archive whose manifest names `space`, to
    `out`. Every document is scanned first: SecretDetected (or whatever reading
    `documents` raises) comes before a byte is written, so `out` never holds part of an
    archive. A document whose path is no longer canonical is listed as unaddressable."""
    unaddressable: list[str] = []
    unreadable: list[str] = []
    exported: list[tuple[DocumentMeta, int]] = []  # each with its body's offset in the spool
    reading = iter(documents)
    with contextlib.ExitStack() as cleanup:
        # A refusal stops the reading part-way: close the reader now (what it holds open),
        # not whenever the garbage collector reaches it, in some later transaction.
        if isinstance(reading, Generator):
            cleanup.callback(reading.close)
        bodies = cleanup.enter_context(tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES))
        for done, document in enumerate(reading, start=1):
            path = document.meta.path
            if not _addressable(path):
                unaddressable.append(path)
            elif (text := stored_text_or_none(path, document.body)) is None:
                # An import would refuse it: listed, as an unaddressable one is.
                unreadable.append(path)
            else:
                secret_refuse(text, path=path)
                _integrity_require(document)
                exported.append((document.meta, bodies.tell()))
                bodies.write(document.body)
            if progress is not None:
                progress(done, max(total, done))
        exported.sort(key=lambda item: item[0].path)
        unaddressable.sort()
        unreadable.sort()
        _archive_write(
            out,
            space=space,
            documents=exported,
            unaddressable=unaddressable,
            unreadable=unreadable,
            bodies=bodies,
        )
    metas = [meta for meta, _ in exported]
    return ExportReport(
        doc_count=len(metas),
        doc_bytes=sum(meta.size for meta in metas),
        unaddressable=unaddressable,
        unreadable=unreadable,
    )


def _integrity_require(document: StoredDocument) -> None:
    """The archive lists each document's recorded size and checksum: a body that is not the
    one recorded (a file of the filesystem store edited on disk) would make an archive that
    fails its own checks, so it is DOCUMENT_UNREADABLE, as a sealed body that fails its
    authentication is."""
    meta, body = document.meta, document.body
    if len(body) != meta.size or body_checksum(body) != meta.checksum:
        raise DocumentUnreadable(path=meta.path, revision=meta.revision)


def space_export_file_name(handle: SpaceHandle) -> str:
    """A file name naming the space (`file_name_word` of each of its parts)."""
    parts = [handle.visibility.value, handle.project, handle.bot, handle.run, handle.name]
    words = (file_name_word(part) for part in parts if part)
    return "memory-" + "-".join(word for word in words if word) + ".tar.gz"


def file_name_word(text: str) -> str:
    """`text` as part of a downloaded file's name: letters and digits of any script, `.`,
    `_` and `-`, each other run as one `_`, no leading or trailing `.` or `_`. Non-ASCII
    names travel in the header's `filename*` (RFC 6266), so two spaces named in another
    script do not download under one name."""
    return re.sub(r"[^\w.-]+", "_", text).strip("._")


def _addressable(path: str) -> bool:
    try:
        return canonical_document_path(path) == path
    except InvalidDocumentPath:
        return False


def _archive_write(
    out: IO[bytes],
    *,
    space: dict[str, Any],
    documents: Sequence[tuple[DocumentMeta, int]],
    unaddressable: Sequence[str],
    unreadable: Sequence[str],
    bodies: IO[bytes],
) -> None:
    """The archive of `documents` (sorted by path, each with its body's offset in
    `bodies`), written to `out`."""
    metas = [meta for meta, _ in documents]
    listed = [
        {
            "path": meta.path,
            "size": meta.size,
            "checksum": _hex(meta.checksum),
            "revision": meta.revision,
        }
        for meta in metas
    ]
    manifest = {
        "format": FORMAT,
        "space": space,
        "doc_count": len(listed),
        "documents": listed,
        "unaddressable": list(unaddressable),
        "unreadable": list(unreadable),
    }
    checksums = "".join(f"{_hex(meta.checksum)}  {DOCS}{meta.path}\n" for meta in metas)
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=out, mtime=0, compresslevel=COMPRESS_LEVEL
    ) as compressed:
        tar = _TarStream(compressed)
        tar.add(MANIFEST, _json_bytes(manifest))
        for meta, offset in documents:
            bodies.seek(offset)
            tar.add(DOCS + meta.path, bodies.read(meta.size))
        tar.add(CHECKSUMS, checksums.encode())
        tar.close()


class _TarStream:
    """The tar stream of an export, byte for byte what `tarfile` writes in PAX format for
    these entries (mtime 0, owner 0:0 without names, mode 0644), built here because
    `tarfile` spent a third of an export's time on its headers. An entry name that needs a
    PAX header (longer than the ustar field, or not ASCII) still gets tarfile's."""

    def __init__(self, out: io.BufferedIOBase) -> None:
        self.out, self.pending, self.offset = out, bytearray(), 0

    def add(self, name: str, data: bytes) -> None:
        self._put(_tar_header(name, len(data)))
        self._put(data)
        self._put(_ZERO_BLOCK[: -len(data) % tarfile.BLOCKSIZE])
        if len(self.pending) >= _WRITE_CHUNK:
            self._flush()

    def close(self) -> None:
        """The end-of-archive blocks, then zeros to a whole record, as tarfile ends one."""
        self._put(bytes(2 * tarfile.BLOCKSIZE))
        self._put(bytes(-self.offset % tarfile.RECORDSIZE))
        self._flush()

    def _put(self, data: bytes) -> None:
        self.pending += data
        self.offset += len(data)

    def _flush(self) -> None:
        self.out.write(self.pending)
        self.pending.clear()


def _ustar_template() -> bytes:
    """A ustar header of a regular file with every field but the name, size and checksum
    filled as tarfile fills them for an export's entries (the checksum field as spaces)."""
    fields = [
        bytes(100),  # name
        b"%07o\0" % _ENTRY_MODE,
        b"0000000\0",  # uid
        b"0000000\0",  # gid
        bytes(12),  # size
        b"00000000000\0",  # mtime
        b" " * 8,  # checksum, counted as spaces
        tarfile.REGTYPE,
        bytes(100),  # link name
        tarfile.POSIX_MAGIC,
        bytes(32),  # user name
        bytes(32),  # group name
        bytes(16),  # device major and minor: empty for a file that is not a device
    ]
    return b"".join(fields).ljust(tarfile.BLOCKSIZE, b"\0")


_USTAR = _ustar_template()
_USTAR_SUM = sum(_USTAR)
_NAME_FIELD = 100
_SIZE_LIMIT = 8**11  # what the 12-byte octal size field holds


def _tar_header(name: str, size: int) -> bytes:
    encoded = name.encode()
    if not name.isascii() or len(encoded) > _NAME_FIELD or size >= _SIZE_LIMIT:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, 0, _ENTRY_MODE
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    size_field = b"%011o\0" % size
    header = bytearray(_USTAR)
    header[: len(encoded)] = encoded
    header[124:136] = size_field
    # The name and size fields were zeros in the template: its sum plus theirs is the
    # header's (one sum over 512 bytes per entry was a tenth of writing the stream).
    header[148:155] = b"%06o\0" % (_USTAR_SUM + sum(encoded) + sum(size_field))
    return bytes(header)


def _json_bytes(data: dict[str, Any]) -> bytes:
    # Compact: the format fixes no whitespace, and without `indent` json runs its C encoder
    # (indented, a 2,000-document manifest cost an eighth of the export).
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode()


def _hex(checksum: str) -> str:
    return checksum.removeprefix("sha256:")


# Import


def space_import(
    *,
    handle: SpaceHandle,
    archive: IO[bytes],
    strategy: ImportStrategy,
    dry_run: bool,
    writer: SpaceWriter,
) -> ImportReport:
    """Import an archive into the space, all or nothing, and answer what was done; with
    `dry_run`, answer the same plan (every refusal included) and write nothing."""
    space_write_permit(handle=handle, writer=writer)
    # The plan is made against the space as listed, outside the store's locks; the batch's
    # revisions (0 for every new name) make the store refuse a plan another writer made
    # stale meanwhile. That conflict is this import's own, never the person's: `skip` and
    # `rename` exist to meet the documents a Save or another import has just written, and
    # `overwrite` replaces whatever is there. So it plans again against the space as it is
    # now, from the archive as already read. Each new plan follows another writer's commit
    # to the space; one written faster than an import can plan is answered
    # VERSION_CONFLICT after the last attempt.
    batch = _ArchiveBatch(archive=archive, strategy=strategy, handle=handle, writer=writer)
    for attempt in range(1, IMPORT_PLAN_ATTEMPTS + 1):
        batch.existing = {meta.path: meta for meta in store_get().list(handle)}
        try:
            space_documents_write_as_read(
                handle=handle, reader=batch, writer=writer, check_only=dry_run
            )
            break
        except VersionConflict:
            if attempt == IMPORT_PLAN_ATTEMPTS or batch.contents is None:
                raise
    counts = collections.Counter(planned.action for planned in batch.plan)
    return ImportReport(
        imported=counts[ImportAction.CREATE],
        replaced=counts[ImportAction.OVERWRITE],
        skipped=counts[ImportAction.SKIP],
        renamed=counts[ImportAction.RENAME],
        ignored=batch.read_contents.ignored,
        documents=batch.plan,
    )


@dataclass
class _ArchiveBatch:
    """An import's writes (a `BatchReader`): the archive read and judged whole, each
    document new to the space offered as soon as its checksum is known, then the plan's
    writes."""

    archive: IO[bytes]
    strategy: ImportStrategy
    handle: SpaceHandle
    writer: SpaceWriter
    existing: dict[str, DocumentMeta] = field(default_factory=dict)  # as listed for this plan
    contents: _Contents | None = None  # the archive once read: a new plan does not read it again
    plan: list[PlannedDocument] = field(default_factory=list)

    def read(self, offer: Callable[[PendingWrite], None]) -> None:
        existing = self.existing

        def document_read(path: str, body: bytes, checksum: str) -> None:
            if path not in existing:  # planned as a new document, whatever the strategy
                offer(PendingWrite(path=path, body=body, expected_revision=0, checksum=checksum))

        if self.contents is None:
            self.contents = _archive_read(self.archive, document_read)
            return
        for path, body in self.contents.documents.items():
            document_read(path, body, self.contents.checksums[path])

    @property
    def read_contents(self) -> _Contents:
        if self.contents is None:
            raise RuntimeError("the archive is read before the batch's writes are asked for")
        return self.contents

    def writes(self) -> Sequence[PendingWrite]:
        contents, existing = self.read_contents, self.existing
        self.plan = _plan(contents.documents, existing, self.strategy)
        # A document the plan skips is judged as the written ones are (the write path
        # judges those), so whether an archive is refused never depends on what the space
        # holds.
        for planned in self.plan:
            if planned.action is ImportAction.SKIP:
                body = contents.documents[planned.path]
                space_document_write_check(
                    handle=self.handle, path=planned.path, body=body, writer=self.writer
                )
        return [
            PendingWrite(
                path=planned.target,
                body=contents.documents[planned.path],
                expected_revision=(
                    existing[planned.path].revision
                    if planned.action is ImportAction.OVERWRITE
                    else 0
                ),
                checksum=contents.checksums[planned.path],
            )
            for planned in self.plan
            if planned.action is not ImportAction.SKIP
        ]


def _plan(
    documents: dict[str, bytes], existing: dict[str, DocumentMeta], strategy: ImportStrategy
) -> list[PlannedDocument]:
    taken = _taken_names(documents, existing) if strategy is ImportStrategy.RENAME else set()
    plan = []
    for path in sorted(documents):
        if path not in existing:
            plan.append(PlannedDocument(path=path, action=ImportAction.CREATE, target=path))
        elif strategy is ImportStrategy.SKIP:
            plan.append(PlannedDocument(path=path, action=ImportAction.SKIP, target=""))
        elif strategy is ImportStrategy.OVERWRITE:
            plan.append(PlannedDocument(path=path, action=ImportAction.OVERWRITE, target=path))
        else:
            target = _free_name(path, taken)
            _rename_target_require(path, target)
            taken.add(target)
            plan.append(PlannedDocument(path=path, action=ImportAction.RENAME, target=target))
    return plan


def _taken_names(documents: dict[str, bytes], existing: dict[str, DocumentMeta]) -> set[str]:
    """The names a renamed copy may not take: the space's documents, the archive's, and a
    directory of either (a document under its name would be refused whole, path_conflict).
    Only `rename` asks: gathering them cost the other strategies a pass over every path."""
    taken = set(existing) | set(documents)
    taken |= {
        path.rsplit("/", depth)[0] for path in taken for depth in range(1, path.count("/") + 1)
    }
    return taken


def _rename_target_require(path: str, target: str) -> None:
    """A renamed copy's name is judged here, not only by the write: its refusal names the
    archive's document and the name it would have had (a name at the length limits has no
    room for `.import`)."""
    try:
        canonical_document_path(target)
    except InvalidDocumentPath as error:
        raise InvalidDocumentPath(error.message, **error.detail, path=path, target=target) from None


def _free_name(path: str, taken: set[str]) -> str:
    """`<name>.import.md`, else `<name>.import-2.md`, `-3`, ...: the first name that is not
    `taken` (by the space, the archive, an earlier rename, or as a directory of one of
    them). Never an overwrite."""
    stem = path.removesuffix(DOCUMENT_SUFFIX)
    number = 1
    while True:
        suffix = ".import" if number == 1 else f".import-{number}"
        candidate = f"{stem}{suffix}{DOCUMENT_SUFFIX}"
        if candidate not in taken:
            return candidate
        number += 1


@dataclass
class _Contents:
    documents: dict[str, bytes] = field(default_factory=dict)  # path (without docs/): body
    checksums: dict[str, str] = field(default_factory=dict)  # path: its body's body_checksum
    ignored: list[str] = field(default_factory=list)


class _BoundedReader(io.RawIOBase):
    """The decompressed stream, counted as it is read: past `limit` bytes it refuses, so a
    small archive that inflates without end stops at the bound."""

    def __init__(self, source: io.BufferedIOBase, limit: int) -> None:
        self.source, self.limit, self.count = source, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # Never more than one byte past the bound at once: a small entry header can declare
        # gigabytes, and asking for them whole would inflate them before counting.
        data = self.source.read(min(len(buffer), self.limit + 1 - self.count))
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveInvalid(reason="too_large", limitBytes=self.limit)
        buffer[: len(data)] = data
        return len(data)


# What is told of each document as it is read: its path, body and `body_checksum`.
_DocumentRead = Callable[[str, bytes, str], None]


def _archive_read(archive: IO[bytes], document_read: _DocumentRead) -> _Contents:
    """Read and judge the whole archive; ArchiveInvalid, ArchiveChecksumMismatch or
    DocumentTooLarge for the first refusal. `document_read` is told of each document as
    soon as it is read, before the archive is judged whole."""
    head = archive.read(2)
    if head != b"\x1f\x8b":
        raise ArchiveInvalid(reason="not_gzip")
    source = io.BufferedReader(_Prefixed([head], archive))
    # Buffered: the tar reader asks for a header, a body and its padding at a time.
    decompressed = io.BufferedReader(
        _BoundedReader(gzip.GzipFile(fileobj=source, mode="rb"), settings.MEMORY_IMPORT_MAX_BYTES),
        buffer_size=_READ_CHUNK,
    )
    try:
        contents = _entries_read(_tar_entries(decompressed), document_read)
        # Read on to the end of the gzip stream, whose trailer (the CRC and length of all it
        # held) is checked only there: tar stops at its end-of-archive blocks, and without
        # this a cut or altered trailer went unnoticed.
        while decompressed.read(_READ_CHUNK):
            pass
        return contents
    except EOFError:
        raise ArchiveInvalid(reason="truncated") from None
    except (gzip.BadGzipFile, zlib.error, tarfile.TarError):
        raise ArchiveInvalid(reason="corrupt") from None


_Entry = tuple[tarfile.TarInfo, Callable[[], bytes]]  # an entry, and what reads its bytes

# A plain entry's header: ustar magic and version, a regular file or a directory.
_PLAIN_TYPES = (tarfile.REGTYPE, tarfile.DIRTYPE)
_OCTAL_DIGITS = b"01234567"
_ZERO_BLOCK = bytes(tarfile.BLOCKSIZE)


def _tar_entries(stream: io.BufferedIOBase) -> Iterator[_Entry]:
    """The entries of the tar `stream` in order, as it is read, each with what reads its
    bytes (a regular file's, read only when asked: a document over the ceiling is refused
    from its header): entry for entry what `tarfile` reads.

    Plain entries are read here: a ustar header with a valid (unsigned) checksum, a regular
    file (type `0`) or a directory (type `5`, size 0), no prefix, no link name, an octal
    size (what an export writes; `tarfile` spent more than half an import's reading on their
    headers, one attribute at a time). At the first other header (PAX or GNU, a link, a
    device, a cut or damaged one, every hostile kind), `tarfile` reads the stream again
    from its first byte (the bytes read so far, then the rest) and answers the entries
    after those already answered. The bytes kept for that are the bodies, which the import
    holds anyway, the headers, and the bodies of entries it ignores: no more than the
    decompressed bound."""
    consumed: list[bytes] = []  # every byte read so far
    answered = 0
    while True:
        header = stream.read(tarfile.BLOCKSIZE)
        consumed.append(header)
        if header == _ZERO_BLOCK and answered:
            return  # the end of the archive, as `tarfile` ends it
        member = _plain_member(header) if len(header) == tarfile.BLOCKSIZE else None
        if member is None:
            break
        body = _PlainBody(stream, member.size)
        answered += 1
        yield member, body.read
        padding = -member.size % tarfile.BLOCKSIZE
        consumed += (body.read_whole(), stream.read(padding))
        if len(consumed[-2]) + len(consumed[-1]) != member.size + padding:
            break
    replay = io.BufferedReader(_Prefixed(consumed, stream))
    with tarfile.open(fileobj=replay, mode="r|") as tar:
        for index, member in enumerate(tar):
            if index >= answered:
                yield member, functools.partial(_member_bytes, tar, member)


class _PlainBody:
    """The bytes of a plain entry, read from the stream once, when first asked for."""

    def __init__(self, stream: io.BufferedIOBase, size: int) -> None:
        self.stream, self.size = stream, size
        self.data: bytes | None = None

    def read(self) -> bytes:
        """The whole body; EOFError when the stream ends inside it (as `_member_bytes`)."""
        data = self.read_whole()
        if len(data) != self.size:
            raise EOFError
        return data

    def read_whole(self) -> bytes:
        """What the stream holds of the body, all of it unless the stream ends first."""
        if self.data is None:
            self.data = self.stream.read(self.size)
        return self.data


def _plain_member(header: bytes) -> tarfile.TarInfo | None:
    """The member a plain header describes, as `tarfile.TarInfo.frombuf` reads it, or None
    when the header is not plain (see `_tar_entries`)."""
    kind = header[156:157]
    if kind not in _PLAIN_TYPES or header[257:265] != tarfile.POSIX_MAGIC:
        return None
    # No prefix, no link name: every byte of those fields is zero.
    if header.count(0, 345, 500) != 155 or header.count(0, 157, 257) != 100:
        return None
    checksum = _octal_field(header[148:156])
    # The sum of the header's bytes with the checksum field's eight counted as spaces.
    if checksum is None or checksum != _block_sum(header) - sum(header[148:156]) + 256:
        return None
    size = _octal_field(header[124:136])
    if size is None or (kind == tarfile.DIRTYPE and size != 0):
        return None
    name = header[:100].split(b"\0", 1)[0].decode(tarfile.ENCODING, "surrogateescape")
    if kind == tarfile.DIRTYPE:
        name = name.rstrip("/")
    elif name.endswith("/"):
        return None
    member = tarfile.TarInfo(name)
    member.type, member.size = kind, size
    return member


def _block_sum(block: bytes) -> int:
    """`sum(block)` of a 512-byte block, from an Adler-32 of each half: its low 16 bits are 1
    plus the sum of the bytes modulo 65,521, and 256 bytes sum to at most 65,280, so for a
    half that is its sum. (`sum` takes the bytes one at a time: a seventh of reading an
    archive of small documents.)"""
    return (zlib.adler32(block[:256]) & 0xFFFF) + (zlib.adler32(block[256:]) & 0xFFFF) - 2


def _octal_field(field: bytes) -> int | None:
    """A number field as `tarfile.nti` reads an octal one (up to its first NUL, blanks
    stripped), or None for one that is not octal digits."""
    digits = field.split(b"\0", 1)[0].strip()
    # Octal digits only, and at least one: `int` alone would take a sign, `_` or `0o`.
    return int(digits, 8) if digits and not digits.strip(_OCTAL_DIGITS) else None


class _Prefixed(io.RawIOBase):
    """`heads` (bytes already read: the magic number, or what the tar reader read before it
    handed over to `tarfile`), then the rest of `rest`."""

    def __init__(self, heads: Sequence[bytes], rest: IO[bytes] | io.BufferedIOBase) -> None:
        # Views, taken in turn: handing out large heads piece by piece copies each byte once.
        self.heads = [memoryview(head) for head in reversed(heads) if head]
        self.rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.heads:
            head = self.heads.pop()
            size = min(len(buffer), len(head))
            buffer[:size] = head[:size]
            if size < len(head):
                self.heads.append(head[size:])
            return size
        data = self.rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _entries_read(entries: Iterator[_Entry], document_read: _DocumentRead) -> _Contents:
    contents = _Contents()
    names: set[str] = set()
    directories: set[str] = set()
    manifest: dict[str, Any] | None = None
    checksums: dict[str, str] | None = None
    actual: dict[str, str] = {}  # entry name: the sha256 of its bytes
    max_entries, max_document_bytes = (
        settings.MEMORY_IMPORT_MAX_ENTRIES,
        settings.MEMORY_MAX_DOCUMENT_BYTES,
    )
    for count, (member, read) in enumerate(entries, start=1):
        name = member.name
        # First: every refusal below names the entry, and its name must be text to be named.
        _entry_judge(member)
        if count > max_entries:
            raise ArchiveInvalid(reason="too_many_entries", entry=name, limit=max_entries)
        if name in names:
            raise ArchiveInvalid(reason="duplicate", entry=name)
        names.add(name)
        if count == 1 and name != MANIFEST:
            raise ArchiveInvalid(reason="manifest_invalid", entry=name, problem="not_first")
        if member.isdir():
            if name in (MANIFEST, CHECKSUMS):
                raise ArchiveInvalid(reason="directory_trick", entry=name)
            if name + "/" == DOCS or name.startswith(DOCS):
                directories.add(name)
            else:
                contents.ignored.append(name)
            continue
        if name == MANIFEST:
            manifest = _manifest_parse(read())
        elif name == CHECKSUMS:
            checksums = _checksums_parse(read())
        elif name.startswith(DOCS):
            path = _document_path(name)
            if member.size > max_document_bytes:
                raise DocumentTooLarge(limitBytes=max_document_bytes, bytes=member.size, path=path)
            body = read()
            checksum = body_checksum(body)
            contents.documents[path], contents.checksums[path] = body, checksum
            actual[name] = _hex(checksum)
            document_read(path, body, checksum)
        else:
            contents.ignored.append(name)
    for directory in sorted(directories):
        if directory[len(DOCS) :] in contents.documents:
            raise ArchiveInvalid(reason="directory_trick", entry=directory)
    if manifest is None:
        raise ArchiveInvalid(reason="manifest_invalid", problem="missing")
    if checksums is None:
        raise ArchiveInvalid(reason="checksums_invalid", entry=CHECKSUMS, problem="missing")
    _checksums_verify(manifest, checksums, actual)
    _manifest_counts_verify(manifest, contents.documents)
    return contents


def _entry_judge(member: tarfile.TarInfo) -> None:
    """Refuse an entry whose name or kind is not one this format writes."""
    name = member.name
    # The tar readers decode a name's bytes that are not UTF-8 to lone surrogates, which
    # no answer can carry: the refusal names it with those bytes escaped.
    try:
        name.encode()
    except UnicodeEncodeError:
        shown = name.encode(errors="surrogateescape").decode(errors="backslashreplace")
        raise ArchiveInvalid(reason="not_utf8", entry=shown) from None
    segments = name.split("/")
    reason = None
    if name.startswith("/"):
        reason = "absolute"
    elif "\\" in name:
        reason = "backslash"
    elif ":" in name and _DRIVE.search(name):  # most names hold no colon at all
        reason = "drive"
    elif ".." in segments:
        reason = "dot_dot"
    elif "" in segments or "." in segments or "\x00" in name:
        reason = "not_canonical"
    elif member.type not in _PLAIN_TYPES:  # a file or a directory: what an export writes
        reason = _kind_refusal(member)
    if reason is not None:
        raise ArchiveInvalid(reason=reason, entry=name)


def _kind_refusal(member: tarfile.TarInfo) -> str | None:
    """Why an entry of this kind is refused, or None for a regular file or directory."""
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "fifo"
    if not (member.isreg() or member.isdir()):
        return "unsupported_type"
    return None


def _document_path(name: str) -> str:
    """The document path of a `docs/` entry, which must be its canonical spelling."""
    path = name[len(DOCS) :]
    try:
        canonical = canonical_document_path(path)
    except InvalidDocumentPath as error:
        raise ArchiveInvalid(
            reason="not_canonical", entry=name, problem=error.detail.get("reason")
        ) from None
    if canonical != path:
        raise ArchiveInvalid(reason="not_canonical", entry=name, canonical=DOCS + canonical)
    return path


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    extracted = tar.extractfile(member)
    assert extracted is not None  # a regular file
    data = extracted.read()
    if len(data) != member.size:
        raise EOFError  # the stream ended inside the entry
    return data


def _manifest_parse(data: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(data)
    # RecursionError: nested deeper than the parser's recursion reaches.
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ArchiveInvalid(
            reason="manifest_invalid", entry=MANIFEST, problem="not_json"
        ) from None
    if not isinstance(manifest, dict):
        raise ArchiveInvalid(reason="manifest_invalid", entry=MANIFEST, problem="not_an_object")
    # JSON's escapes can spell a lone surrogate (`"\ud800"`), which no answer can carry, and
    # a refusal may quote the manifest's strings. Bytes that are ASCII without a NUL are read
    # as UTF-8 (json tells UTF-16 and UTF-32 by their NULs) and spell no surrogate themselves,
    # so without a `\u` escape the manifest holds none: the manifest of an export, whose
    # encoding whole took longer than its parsing, is not encoded again.
    if not (data.isascii() and b"\0" not in data and b"\\u" not in data):
        try:
            json.dumps(manifest, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise ArchiveInvalid(
                reason="manifest_invalid", entry=MANIFEST, problem="not_unicode"
            ) from None
    if manifest.get("format") != FORMAT:
        raise ArchiveInvalid(
            reason="format_unsupported", entry=MANIFEST, format=str(manifest.get("format"))[:100]
        )
    documents = manifest.get("documents", [])
    if not isinstance(documents, list) or not all(
        isinstance(document, dict) and isinstance(document.get("path"), str)
        for document in documents
    ):
        raise ArchiveInvalid(reason="manifest_invalid", entry=MANIFEST, problem="documents")
    return manifest


def _manifest_counts_verify(manifest: dict[str, Any], documents: dict[str, bytes]) -> None:
    """The manifest's `doc_count` and each document's `size`, where it states them (as it
    may leave out a checksum), are the archive's: a manifest that misstates what it
    describes is not this archive's."""
    if "doc_count" in manifest and not _is_count(manifest["doc_count"], len(documents)):
        raise ArchiveInvalid(
            reason="manifest_invalid",
            entry=MANIFEST,
            problem="doc_count",
            actual=len(documents),
        )
    for document in manifest["documents"]:
        body = documents[document["path"]]
        if "size" in document and not _is_count(document["size"], len(body)):
            raise ArchiveInvalid(
                reason="manifest_invalid",
                entry=DOCS + document["path"],
                problem="size",
                actual=len(body),
            )


def _is_count(value: object, count: int) -> bool:
    # JSON's true is Python's 1, which no count is.
    return isinstance(value, int) and not isinstance(value, bool) and value == count


def _checksums_parse(data: bytes) -> dict[str, str]:
    checksums: dict[str, str] = {}
    try:
        lines = data.decode().splitlines()
    except UnicodeDecodeError:
        raise ArchiveInvalid(
            reason="checksums_invalid", entry=CHECKSUMS, problem="not_text"
        ) from None
    for number, line in enumerate(lines, start=1):
        match = _CHECKSUM_LINE.match(line)
        if match is None or match.group(2) in checksums:
            raise ArchiveInvalid(reason="checksums_invalid", entry=CHECKSUMS, line=number)
        checksums[match.group(2)] = match.group(1)
    return checksums


def _checksums_verify(
    manifest: dict[str, Any], checksums: dict[str, str], actual: dict[str, str]
) -> None:
    """Every document has one checksum line that matches its bytes, no line names an
    absent entry, and the manifest lists exactly the documents present, with their sums."""
    for name in sorted(set(actual) | set(checksums)):
        if checksums.get(name) != actual.get(name):
            raise ArchiveChecksumMismatch(entry=name)
    listed = {DOCS + document["path"]: document for document in manifest["documents"]}
    for name in sorted(set(listed) ^ set(actual)):
        raise ArchiveInvalid(reason="manifest_invalid", entry=name, problem="not_listed")
    for name, document in sorted(listed.items()):
        if _hex(str(document.get("checksum", actual[name]))) != actual[name]:
            raise ArchiveChecksumMismatch(entry=name)
