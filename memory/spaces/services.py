"""The one write path of a memory space: every writer (people over REST, a bot's memory
tool, archive import, the mirror of an agent runtime's notes) calls these functions, so
every byte passes the same refusals whichever door it came in by.

A write is judged in this order; the first refusal answers and nothing is written:

1. tenancy: a space with a tenant belongs to the writer's team (`NOT_FOUND` otherwise; the
   routes build the handle from the credential, so they never meet it);
2. the global write gate: writing or deleting in `global` needs a superuser acting
   (`GLOBAL_SPACE_WRITE_DENIED`); every global write or delete that passes is audited in
   the same transaction as the document, when the store shares the database; a space
   named `auto-memory` takes only the mirror's writes (`AUTO_MEMORY_SPACE_RESERVED`);
3. the path: its one canonical spelling (`INVALID_DOCUMENT_PATH`, `workspaces.paths`);
4. the ceiling `MEMORY_MAX_DOCUMENT_BYTES` (`DOCUMENT_TOO_LARGE`; nothing is truncated);
5. the text: UTF-8 (`INVALID_TEXT`);
6. the secret scan (`SECRET_DETECTED`, `memory.secrets`);
7. the quotas, resolved now from the settings (`memory.spaces.quotas.quotas_for`), and
   the store's write under a deadline: revision compare-and-set, counters and bytes in
   one step (`VERSION_CONFLICT`, `SPACE_QUOTA_EXCEEDED`, `TENANT_QUOTA_EXCEEDED`,
   `STORE_BUSY`, `STORE_UNAVAILABLE`);
8. attribution: the store records `writer.attribution` as the document's `updatedBy`.

A batch still being read (an archive import, `space_documents_write_as_read`) takes the
store's locks before it is read, so that the store can write while it reads: StoreBusy and
StoreUnavailable can then answer before the reading's and steps 3 to 6's refusals; the
store's judgement (revisions, paths, quotas) still comes after them.

Steps 1 to 4 need no body: a route runs them first (`space_document_write_admit`) from the
declared length, so an over-size body is refused before it is read. A delete passes steps
1 to 3, then the store. Memory text is never logged.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.errors import AutoMemorySpaceReserved, GlobalSpaceWriteDenied
from memory.secrets import secret_refuse
from memory.spaces.handle import SpaceHandle
from memory.spaces.quotas import quotas_for, store_get
from memory.spaces.store import (
    BatchReader,
    DocumentMeta,
    DocumentWrite,
    ExpiredSpace,
    PendingWrite,
    WriteBatch,
)
from workspaces.errors import DocumentTooLarge, InvalidDocumentPath, InvalidText, NotFound
from workspaces.models import AuditEvent, Team, User
from workspaces.paths import document_path_require_canonical
from workspaces.services import audit_record, document_nul_refuse, org_active_hold

# The auto-memory mirror's space name: in any visibility, only the mirror writes it.
AUTO_MEMORY_SPACE_NAME = "auto-memory"


class WriterKind(enum.StrEnum):
    USER = "user"  # a person, over REST or the web frame
    BOT = "bot"  # a bot's memory tool
    IMPORT = "import"  # an archive import, by the person who runs it
    MIRROR = "mirror"  # the mirror of a bot's runtime notes


@dataclass(frozen=True)
class SpaceWriter:
    """Who writes: `ident` is the user's id for `user` and `import`, the bot's for `bot`
    and `mirror`; `tenant_id` the writer's team (None only for a deployment-wide job);
    `user` the person acting, whom the global gate judges (None when no person acts)."""

    kind: WriterKind
    ident: str
    tenant_id: int | None
    user: User | None

    @classmethod
    def of_user(cls, user: User, *, tenant_id: int) -> SpaceWriter:
        return cls(kind=WriterKind.USER, ident=str(user.pk), tenant_id=tenant_id, user=user)

    @property
    def attribution(self) -> str:
        return f"{self.kind}:{self.ident}"


def space_write_permit(*, handle: SpaceHandle, writer: SpaceWriter) -> None:
    """Steps 1 and 2 of the module's order: may `writer` change this space at all. An
    import asks before it reads a byte of its archive. A space named `auto-memory` is the
    mirror's alone (`AUTO_MEMORY_SPACE_RESERVED` for every other writer)."""
    if not handle.is_global and handle.tenant_id != writer.tenant_id:
        raise NotFound()
    if handle.name == AUTO_MEMORY_SPACE_NAME and writer.kind is not WriterKind.MIRROR:
        raise AutoMemorySpaceReserved()
    if handle.is_global and not (writer.user is not None and writer.user.is_superuser):
        raise GlobalSpaceWriteDenied()


def _admit(*, handle: SpaceHandle, path: str, writer: SpaceWriter) -> str:
    """Steps 1 to 3 of the module's order; return the canonical path."""
    space_write_permit(handle=handle, writer=writer)
    return document_path_require_canonical(path)


def _ceiling_require(size: int) -> None:
    limit = settings.MEMORY_MAX_DOCUMENT_BYTES
    if size > limit:
        raise DocumentTooLarge(limitBytes=limit, bytes=size)


def space_document_write_admit(
    *, handle: SpaceHandle, path: str, size: int, writer: SpaceWriter
) -> None:
    """Run the refusals that need no body (steps 1 to 4) for a body of `size` bytes, so
    that a route can refuse an over-size body from its Content-Length, before reading it.
    `space_document_write` runs them again; this only answers earlier."""
    _admit(handle=handle, path=path, writer=writer)
    _ceiling_require(size)


def space_document_write(
    *,
    handle: SpaceHandle,
    path: str,
    body: bytes,
    expected_revision: int | None,
    writer: SpaceWriter,
) -> DocumentMeta:
    """Create or replace one document of a space, in the module's order.

    `expected_revision` 0 creates only, N replaces revision N only, None replaces whatever
    is current (import and the mirror, which judge conflicts themselves).
    """
    path = space_document_write_check(handle=handle, path=path, body=body, writer=writer)
    with _change_transaction(handle):
        request = DocumentWrite(
            path=path,
            body=body,
            expected_revision=expected_revision,
            updated_by=writer.attribution,
            quotas=quotas_for(handle),
            deadline=_deadline(),
        )
        meta = store_get().write(handle, request)
        _global_audit(
            action=AuditEvent.Action.SPACE_GLOBAL_WRITTEN,
            handle=handle,
            writer=writer,
            detail={"path": path, "revision": meta.revision, "bytes": meta.size},
        )
    return meta


def space_document_write_check(
    *, handle: SpaceHandle, path: str, body: bytes, writer: SpaceWriter
) -> str:
    """Run every refusal short of the store's (steps 1 to 6) for one body; return the
    canonical path. A batch (an archive import) checks each of its documents with this
    before it writes any."""
    path = _admit(handle=handle, path=path, writer=writer)
    _ceiling_require(len(body))
    document_nul_refuse(body, path=path)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # The path: a batch's refusal must say which of its documents.
        raise InvalidText(
            "The document is not valid UTF-8; nothing was written.", path=path
        ) from None
    secret_refuse(text, path=path)
    return path


def space_documents_write_many(
    *,
    handle: SpaceHandle,
    writes: Sequence[PendingWrite],
    writer: SpaceWriter,
    check_only: bool = False,
) -> Sequence[DocumentMeta]:
    """Create or replace several documents of one space, all or none, in the module's
    order: every document passes steps 1 to 6 before the store is asked, then the store
    writes them together, charging the quotas with their one total delta. With
    `check_only` the store judges the batch (quotas, revisions, paths) and writes nothing.
    """
    for write in writes:
        # The path comes back as it was sent, or is refused: the batch goes on as it is.
        space_document_write_check(handle=handle, path=write.path, body=write.body, writer=writer)
    with _change_transaction(handle):
        metas = store_get().write_many(
            handle,
            WriteBatch(
                writes=writes,
                updated_by=writer.attribution,
                quotas=quotas_for(handle),
                deadline=_deadline(),
                check_only=check_only,
            ),
        )
        if not check_only:
            _global_audit_written(handle, writer, metas)
    return metas


def space_documents_write_as_read(
    *,
    handle: SpaceHandle,
    reader: BatchReader,
    writer: SpaceWriter,
    check_only: bool = False,
) -> Sequence[DocumentMeta]:
    """`space_documents_write_many` of a batch still being read (an archive import): the
    store may write the new documents `reader` offers as they come, inside the batch's one
    transaction; once read, every document of the batch passes steps 1 to 6, then the store
    judges and writes it whole. Any refusal leaves nothing written."""
    space_write_permit(handle=handle, writer=writer)
    with _change_transaction(handle):
        metas = store_get().write_many_as_read(
            handle,
            WriteBatch(
                writes=(),
                updated_by=writer.attribution,
                quotas=quotas_for(handle),
                deadline=_deadline(),
                check_only=check_only,
            ),
            _Checked(reader, handle=handle, writer=writer),
        )
        if not check_only:
            _global_audit_written(handle, writer, metas)
    return metas


@dataclass(frozen=True)
class _Checked:
    """`reader`, whose writes pass steps 1 to 6 before the store judges them."""

    reader: BatchReader
    handle: SpaceHandle
    writer: SpaceWriter

    def read(self, offer: Callable[[PendingWrite], None]) -> None:
        self.reader.read(offer)

    def writes(self) -> Sequence[PendingWrite]:
        writes = self.reader.writes()
        for write in writes:
            space_document_write_check(
                handle=self.handle, path=write.path, body=write.body, writer=self.writer
            )
        return writes


def space_document_delete(
    *, handle: SpaceHandle, path: str, expected_revision: int | None, writer: SpaceWriter
) -> None:
    """Delete one document of a space and free its bytes (steps 1 to 3, then the store):
    NotFound when absent, VersionConflict when `expected_revision` is stale.

    A document stored under a spelling the path rule now refuses (written before the rule,
    or onto the filesystem store's disk; listings show it, an export lists it in
    `unaddressable`) can be read or written by no spelling, so it is deleted by the one it
    is listed under, and audited (`space_unaddressable_deleted`): nothing else would ever
    free its bytes. A refused spelling that names no stored document stays refused."""
    space_write_permit(handle=handle, writer=writer)
    try:
        canonical = document_path_require_canonical(path)
    except InvalidDocumentPath:
        if path not in {meta.path for meta in store_get().list(handle)}:
            raise
        canonical = None
    with _change_transaction(handle):
        store_get().delete(
            handle,
            path if canonical is None else canonical,
            expected_revision=expected_revision,
            deadline=_deadline(),
        )
        detail: dict[str, object] = {"path": path, "expectedRevision": expected_revision}
        if canonical is None:
            _unaddressable_deleted_audit(handle=handle, writer=writer, detail=detail)
        else:
            _global_audit(
                action=AuditEvent.Action.SPACE_GLOBAL_DELETED,
                handle=handle,
                writer=writer,
                detail=detail,
            )


def _unaddressable_deleted_audit(
    *, handle: SpaceHandle, writer: SpaceWriter, detail: dict[str, object]
) -> None:
    """Audit the deletion of a document stored under a path no longer valid, in any space:
    it is the one change of a team's space the audit records, as a repair of what no
    route could reach."""
    org_id = (
        None
        if handle.tenant_id is None
        else Team.objects.filter(pk=handle.tenant_id).values_list("org_id", flat=True).first()
    )
    audit_record(
        actor=writer.user,
        action=AuditEvent.Action.SPACE_UNADDRESSABLE_DELETED,
        org_id=org_id,
        target_type="memory_space",
        # As _global_audit's: the space id can be longer than the target column.
        detail={"space": handle.id, "updatedBy": writer.attribution, **detail},
    )


def _deadline() -> float:
    return time.monotonic() + settings.MEMORY_STORE_WAIT_SECONDS


@contextmanager
def _change_transaction(handle: SpaceHandle) -> Iterator[None]:
    """The transaction a change of a space runs in, on either store. A team's space holds
    its org's row while the org is active (`org_active_hold`, OrgPendingDeletion
    otherwise) until the store has written: an org deletion request that commits first
    refuses the change, and one that comes later waits for it (docs/architecture.md, "Lock
    order"). The global space, which no org owns, shares it with its audit row instead,
    so that with the database store both commit or neither does. (The filesystem store
    issues no query: only the hold, or the audit insert, runs in it.)
    """
    with transaction.atomic():
        if handle.tenant_id is not None:
            org_active_hold(team_id=handle.tenant_id)
        yield


def _global_audit_written(
    handle: SpaceHandle, writer: SpaceWriter, metas: Sequence[DocumentMeta]
) -> None:
    """Audit each document a batch wrote in the global space."""
    for meta in metas:
        _global_audit(
            action=AuditEvent.Action.SPACE_GLOBAL_WRITTEN,
            handle=handle,
            writer=writer,
            detail={"path": meta.path, "revision": meta.revision, "bytes": meta.size},
        )


def _global_audit(
    *, action: str, handle: SpaceHandle, writer: SpaceWriter, detail: dict[str, object]
) -> None:
    """Audit a change of the global space (no other space is audited)."""
    if not handle.is_global:
        return
    # The space id can be longer than the audit row's target column, so it travels in the
    # detail, with the path (a name, never text) and the writer's attribution.
    audit_record(
        actor=writer.user,
        action=action,
        org_id=None,
        target_type="memory_space",
        detail={"space": handle.id, "updatedBy": writer.attribution, **detail},
    )


def space_private_expire(*, now: datetime | None = None) -> Sequence[ExpiredSpace]:
    """Remove every `private` space not written for MEMORY_PRIVATE_TTL_DAYS (the nightly
    expiry) and audit each (`space_private_expired`: the space, its team and person, what it
    held; never a path or a body). Idempotent: a second run finds nothing more.

    The store removes each space in its own step, so the audit row follows the removal
    rather than sharing its transaction: a failure between them loses a record, never
    keeps a space past its lifetime."""
    moment = now or timezone.now()
    written_before = moment - timedelta(days=settings.MEMORY_PRIVATE_TTL_DAYS)
    expired = store_get().private_spaces_expire(written_before=written_before)
    tenant_ids = [each.handle.tenant_id for each in expired]
    orgs: dict[int | None, int] = dict(
        Team.objects.filter(pk__in=[pk for pk in tenant_ids if pk is not None]).values_list(
            "pk", "org_id"
        )
    )
    for each in expired:
        audit_record(
            actor=None,
            action=AuditEvent.Action.SPACE_PRIVATE_EXPIRED,
            org_id=orgs.get(each.handle.tenant_id),
            target_type="memory_space",
            # The space id can be longer than the target column: it travels in the detail.
            detail={
                "space": each.handle.id,
                "teamId": each.handle.tenant_id,
                "userId": each.handle.user_id,
                "documents": each.documents,
                "freedBytes": each.freed_bytes,
                "writtenBefore": written_before.isoformat(),
            },
        )
    return expired
