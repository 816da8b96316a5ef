"""Reads of a memory space. The handle is the caller's (the routes build it from the
credential), so every read is already bounded by its tenancy; `global` has no tenant and
reads of it are open to every authenticated caller."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from memory.spaces.handle import SpaceHandle
from memory.spaces.index import document_index_fields
from memory.spaces.quotas import quotas_for, store_get
from memory.spaces.store import DocumentMeta, StoredDocument
from workspaces.errors import DocumentUnreadable, NotFound
from workspaces.paths import directory_path_require_canonical, document_path_require_canonical


@dataclass(frozen=True)
class SpaceDocumentEntry:
    """A document's metadata with its index fields (front matter, else the first H1)."""

    meta: DocumentMeta
    title: str
    description: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class SpaceUsageReport:
    handle: SpaceHandle
    used_bytes: int
    quota_bytes: int  # 0: no cap
    tenant_used_bytes: int  # 0 for a space with no tenant
    tenant_quota_bytes: int  # 0: no cap, and for a space with no tenant


def stored_text(path: str, body: bytes) -> str:
    """A stored body as text. The write path refuses a body that is not UTF-8, but the
    filesystem store's files can be edited on disk: such a body is DocumentUnreadable
    (`detail.reason` not_utf8) wherever one document is read, and listed as `unreadable`
    where many are, never a 500 and never text with U+FFFD in place of its bytes."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentUnreadable(
            "The stored document is not valid UTF-8 and cannot be read; write it again "
            "or delete it.",
            reason="not_utf8",
            path=path,
        ) from None


def stored_text_or_none(path: str, body: bytes) -> str | None:
    """`stored_text`, or None for a body a bulk read lists as `unreadable`."""
    try:
        return stored_text(path, body)
    except DocumentUnreadable:
        return None


def space_document_entry(meta: DocumentMeta, body: bytes) -> SpaceDocumentEntry:
    # A body that is not UTF-8 is still listed (it holds quota; it can be deleted), with no
    # index fields rather than text guessed from its bytes.
    text = stored_text_or_none(meta.path, body)
    fields = None if text is None else document_index_fields(meta.path, text)
    if fields is None:
        return SpaceDocumentEntry(meta=meta, title="", description="", tags=())
    return SpaceDocumentEntry(
        meta=meta, title=fields.title, description=fields.description, tags=tuple(fields.tags)
    )


def space_document_read(*, handle: SpaceHandle, path: str) -> StoredDocument:
    """The document at `path` (its canonical spelling only), or NotFound; a body that is
    not UTF-8 is DocumentUnreadable (`stored_text`), so every reader of it gets text."""
    document = store_get().read(handle, document_path_require_canonical(path))
    if document is None:
        raise NotFound()
    stored_text(document.meta.path, document.body)
    return document


def space_documents_list(*, handle: SpaceHandle, directory: str) -> list[SpaceDocumentEntry]:
    """Every document under `directory` ("" for the whole space), recursively, by path.

    The bodies are sealed at rest, so the index fields are read from each body in turn: one
    read per document, bounded by the space's quota.
    """
    store = store_get()
    entries = []
    for meta in space_document_metas(handle=handle, directory=directory):
        document = store.read(handle, meta.path)
        if document is not None:  # deleted between the listing and the read
            entries.append(space_document_entry(document.meta, document.body))
    return entries


def space_document_metas(*, handle: SpaceHandle, directory: str) -> Sequence[DocumentMeta]:
    """The metadata of every document under `directory` ("" for the whole space),
    recursively, by path; no body is read."""
    return store_get().list(handle, prefix=directory_path_require_canonical(directory))


def space_documents_index(
    *, handle: SpaceHandle, bodies_of: Set[str]
) -> tuple[list[SpaceDocumentEntry], dict[str, bytes]]:
    """Every document's index entry, by path, and the bodies of those at `bodies_of`, in
    one pass over the space (a bot's context blocks); other bodies are not kept."""
    entries = []
    bodies = {}
    for document in store_get().read_all(handle):
        entries.append(space_document_entry(document.meta, document.body))
        if document.meta.path in bodies_of:
            bodies[document.meta.path] = document.body
    entries.sort(key=lambda entry: entry.meta.path)
    return entries, bodies


def space_usage(*, handle: SpaceHandle) -> SpaceUsageReport:
    """The space's and its tenant's used bytes against the quotas a write would meet now: a
    space never written answers 0 and the quota an existing one would get."""
    usage = store_get().usage(handle)
    quotas = quotas_for(handle)
    return SpaceUsageReport(
        handle=handle,
        used_bytes=usage.used_bytes,
        quota_bytes=quotas.space_bytes,
        tenant_used_bytes=usage.tenant_used_bytes,
        tenant_quota_bytes=0 if handle.is_global else quotas.tenant_bytes,
    )


def space_usages_of_tenant(*, tenant_id: int) -> list[SpaceUsageReport]:
    """The usage of every space of the team that holds a document, by handle id."""
    return [space_usage(handle=handle) for handle in store_get().spaces(tenant_id)]
