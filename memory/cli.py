"""The two ways `manage.py memory` reaches one memory space: here, through the same services
and selectors the REST routes call (`LocalSpaceClient`), or over those routes with a real
HTTP client (`RemoteSpaceClient`). Both answer in the routes' JSON shapes, so the command
renders, and `--json` prints, the same thing whichever way it went.

A refusal is a DomainError locally and a `RemoteRefusal` remotely; both carry the code,
message and detail of the API's error body.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any, BinaryIO, Protocol, cast

import requests

from memory.api.spaces import SpaceDocumentSerializer, SpaceImportApi, SpaceUsageApi
from memory.spaces import selectors, services
from memory.spaces.archive import (
    FORMAT,
    MANIFEST,
    MEDIA_TYPE,
    ImportStrategy,
    space_export,
    space_import,
)
from memory.spaces.handle import SpaceHandle
from memory.spaces.services import SpaceWriter, WriterKind
from workspaces.errors import BaseVersionRequired

# `progress(done, total)`: units of work done so far out of `total` (0: not known).
Progress = Callable[[int, int], None]
# Bytes a download or an upload moves between two progress reports.
CHUNK_BYTES = 64 * 1024
# A request that sends or receives nothing for this long is given up (an archive of the
# largest allowed size still moves in chunks well inside it).
TIMEOUT_SECONDS = 60


class RemoteRefusal(Exception):
    """The server refused: the API's error body, with the HTTP status it came with.
    `routes_missing`: the 404 came from a base URL under which there are no memory routes,
    not from a missing document or space."""

    def __init__(
        self,
        *,
        code: str,
        message: str,
        detail: dict[str, Any],
        status: int,
        routes_missing: bool = False,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.detail, self.status = code, message, detail, status
        self.routes_missing = routes_missing


class RemoteUnreachable(Exception):
    """No answer from the server (refused connection, name not resolved, timeout, TLS, an
    answer cut short), or a success answer that is not the API's (another server's page)."""


@dataclass(frozen=True)
class ArchiveUpload:
    """An archive to import: the open file, its size in bytes, and how to import it."""

    file: BinaryIO
    size: int
    strategy: ImportStrategy
    dry_run: bool

    def counted(self, progress: Progress) -> BinaryIO:
        """The file, reporting each read to `progress` against the size."""
        return cast(BinaryIO, _ReadCounter(self.file, size=self.size, progress=progress))


class SpaceClient(Protocol):
    def usage(self) -> dict[str, Any]: ...

    def documents(self, *, directory: str) -> dict[str, Any]: ...

    def read(self, *, path: str) -> dict[str, Any]: ...

    def write(self, *, path: str, body: bytes, base_version: int | None) -> dict[str, Any]: ...

    def delete(self, *, path: str, base_version: int | None) -> None: ...

    def export(self, *, out: BinaryIO, progress: Progress) -> dict[str, Any]: ...

    def import_archive(self, upload: ArchiveUpload, *, progress: Progress) -> dict[str, Any]: ...


class LocalSpaceClient:
    """The space `handle` through the services; `writer` is the person acting (None: only
    reads, which the command checks before it writes)."""

    def __init__(self, *, handle: SpaceHandle, writer: SpaceWriter | None) -> None:
        self.handle = handle
        self.writer = writer

    def usage(self) -> dict[str, Any]:
        return dict(SpaceUsageApi.OutputSerializer(selectors.space_usage(handle=self.handle)).data)

    def documents(self, *, directory: str) -> dict[str, Any]:
        entries = selectors.space_documents_list(handle=self.handle, directory=directory)
        return {"documents": SpaceDocumentSerializer(entries, many=True).data}

    def read(self, *, path: str) -> dict[str, Any]:
        document = selectors.space_document_read(handle=self.handle, path=path)
        return _document_data(path, document.body, document.meta.revision)

    def write(self, *, path: str, body: bytes, base_version: int | None) -> dict[str, Any]:
        meta = services.space_document_write(
            handle=self.handle,
            path=path,
            body=body,
            expected_revision=_base_version_require(base_version),
            writer=self._writer(),
        )
        return dict(SpaceDocumentSerializer(selectors.space_document_entry(meta, body)).data)

    def delete(self, *, path: str, base_version: int | None) -> None:
        services.space_document_delete(
            handle=self.handle,
            path=path,
            expected_revision=_base_version_require(base_version),
            writer=self._writer(),
        )

    def export(self, *, out: BinaryIO, progress: Progress) -> dict[str, Any]:
        report = space_export(handle=self.handle, out=out, progress=progress)
        return {
            "docCount": report.doc_count,
            "docBytes": report.doc_bytes,
            "unaddressable": report.unaddressable,
            "unreadable": report.unreadable,
        }

    def import_archive(self, upload: ArchiveUpload, *, progress: Progress) -> dict[str, Any]:
        report = space_import(
            handle=self.handle,
            archive=upload.counted(progress),
            strategy=upload.strategy,
            dry_run=upload.dry_run,
            writer=replace(self._writer(), kind=WriterKind.IMPORT),
        )
        data = {**vars(report), "dry_run": upload.dry_run}
        return dict(SpaceImportApi.OutputSerializer(data).data)

    def _writer(self) -> SpaceWriter:
        # The command refuses a write without --user before it builds this client's call.
        assert self.writer is not None
        return self.writer


def _document_data(path: str, body: bytes, revision: int) -> dict[str, Any]:
    # space_document_read refused a body that is not UTF-8 (DOCUMENT_UNREADABLE).
    return {"path": path, "revision": revision, "content": body.decode("utf-8")}


def _base_version_require(base_version: int | None) -> int:
    # The routes refuse a write without X-Base-Version (428); so does the command line.
    if base_version is None:
        raise BaseVersionRequired()
    return base_version


class RemoteSpaceClient:
    """The space the query `space` names, over the REST routes at `base_url`, as the
    person whose personal access token `token` is (sent as a Bearer token, never shown)."""

    def __init__(self, *, base_url: str, token: str, space: dict[str, str]) -> None:
        self.base_url = base_url.rstrip("/") + "/api/v1/memory/"
        self.space = space
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def usage(self) -> dict[str, Any]:
        return self.request_json("GET", "usage")

    def documents(self, *, directory: str) -> dict[str, Any]:
        query = {"dir": directory} if directory else {}
        return self.request_json("GET", "docs", query=query)

    def read(self, *, path: str) -> dict[str, Any]:
        response = self.request("GET", "doc", query={"path": path}, answer="text/markdown")
        revision = response.headers.get("X-Revision", "")
        if not revision.isdigit():
            raise self.not_the_api(response)
        return _document_data(path, response.content, int(revision))

    def write(self, *, path: str, body: bytes, base_version: int | None) -> dict[str, Any]:
        return self.request_json(
            "PUT",
            "doc",
            query={"path": path},
            headers={
                "Content-Type": "text/markdown; charset=utf-8",
                **_base_version_header(base_version),
            },
            data=body,
        )

    def delete(self, *, path: str, base_version: int | None) -> None:
        self.request(
            "DELETE",
            "doc",
            query={"path": path},
            headers=_base_version_header(base_version),
            answer=None,
        )

    def export(self, *, out: BinaryIO, progress: Progress) -> dict[str, Any]:
        response = self.request("GET", "export", stream=True, answer=MEDIA_TYPE)
        with response:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            try:
                for chunk in response.iter_content(CHUNK_BYTES):
                    out.write(chunk)
                    done += len(chunk)
                    progress(done, total)
            except requests.RequestException as error:
                raise RemoteUnreachable(
                    f"the answer from {self.base_url} was cut short: {type(error).__name__}"
                ) from None
        out.flush()
        return _manifest_summary(out)

    def import_archive(self, upload: ArchiveUpload, *, progress: Progress) -> dict[str, Any]:
        query = {"strategy": upload.strategy.value, **({"dryRun": "1"} if upload.dry_run else {})}
        return self.request_json(
            "POST",
            "import",
            query=query,
            headers={"Content-Type": MEDIA_TYPE},
            data=upload.counted(progress),
        )

    def request(
        self,
        method: str,
        route: str,
        *,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        data: bytes | IO[bytes] | None = None,
        stream: bool = False,
        answer: str | None = "application/json",
    ) -> requests.Response:
        """One request to `route` under the base URL, with the space's query, whose success
        is of the media type `answer` (None: no body); a refusal raises RemoteRefusal, no
        answer, or a success of another type, RemoteUnreachable."""
        try:
            response = self.session.request(
                method,
                self.base_url + route,
                params={**self.space, **(query or {})},
                headers=headers,
                data=data,
                stream=stream,
                timeout=TIMEOUT_SECONDS,
                allow_redirects=False,
            )
        except requests.RequestException as error:
            # The exception's text names the host and port, never the Authorization header.
            raise RemoteUnreachable(
                f"no answer from {self.base_url}: {type(error).__name__}"
            ) from None
        if response.status_code >= 300:
            refusal = _refusal(response)
            refusal.routes_missing = response.status_code == 404 and not self.has_memory_routes()
            raise refusal
        received = response.headers.get("Content-Type", "")
        if answer is not None and received.split(";")[0].strip().lower() != answer:
            raise self.not_the_api(response)
        return response

    def request_json(self, method: str, route: str, **arguments: Any) -> dict[str, Any]:
        """`request`'s answer, a JSON object as every route's success is; anything else (a
        body that does not parse, a list, null) is not the API's answer."""
        response = self.request(method, route, **arguments)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise self.not_the_api(response)
        return answer

    def has_memory_routes(self) -> bool:
        """Whether the memory routes are under the base URL, asked after a 404: the API
        answers a missing route and a missing document alike (NOT_FOUND, docs/errors.md).
        Their usage route asked about no space is refused as SPACE_INVALID (or the token's
        refusal) where they are, and is a 404 only where they are not."""
        try:
            with self.session.get(
                self.base_url + "usage", timeout=TIMEOUT_SECONDS, allow_redirects=False
            ) as response:
                return response.status_code != 404
        except requests.RequestException:
            # No way to tell now: the refusal stands as the server gave it.
            return True

    def not_the_api(self, response: requests.Response) -> RemoteUnreachable:
        response.close()
        received = response.headers.get("Content-Type") or "no type"
        return RemoteUnreachable(
            f"{self.base_url} answered {response.status_code} with {received}, not the API's "
            "answer; check --remote"
        )


def _base_version_header(base_version: int | None) -> dict[str, str]:
    # Absent, the server answers 428 BASE_VERSION_REQUIRED, as it does for any client.
    return {} if base_version is None else {"X-Base-Version": str(base_version)}


def _refusal(response: requests.Response) -> RemoteRefusal:
    """The error body's code, message and detail; a body that is not the API's (a proxy's
    page, a redirect) is named by its status alone."""
    try:
        error = response.json()["error"]
        return RemoteRefusal(
            code=str(error["code"]),
            message=str(error["message"]),
            detail=dict(error.get("detail") or {}),
            status=response.status_code,
        )
    except (ValueError, KeyError, TypeError):
        return RemoteRefusal(
            code=f"HTTP_{response.status_code}",
            message=f"The server answered {response.status_code} without the API's error body.",
            detail={},
            status=response.status_code,
        )


def _manifest_summary(archive: BinaryIO) -> dict[str, Any]:
    """What an export wrote, as its manifest (the archive's first entry) tells it: the same
    fields a local export reports."""
    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:gz") as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None else None
        if member is None or member.name != MANIFEST or extracted is None:
            raise ValueError("the archive does not begin with its manifest")
        manifest = json.loads(extracted.read())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"the archive is not of format {FORMAT}")
    return {
        "docCount": manifest["doc_count"],
        "docBytes": sum(document["size"] for document in manifest["documents"]),
        "unaddressable": manifest["unaddressable"],
        # An archive exported before bodies that are not UTF-8 were listed has no such key.
        "unreadable": manifest.get("unreadable", []),
    }


class _ReadCounter(io.RawIOBase):
    """A readable file that reports the bytes read from it to `progress`, and has a length,
    so an upload of it declares its Content-Length instead of being sent chunked."""

    def __init__(self, source: BinaryIO, *, size: int, progress: Progress) -> None:
        self.source, self.size, self.progress, self.done = source, size, progress, 0

    def __len__(self) -> int:
        return self.size

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.done += len(data)
        self.progress(self.done, self.size)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        # What an upload asks before it sends, to find the bytes still to come.
        return self.done
