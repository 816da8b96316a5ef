"""The web frame's memory pages: the Memory frame (with the panels higher apps register in
`memory.panels`, the assistant's among them), Changes, Notes, the team's memory spaces and
its bots.

Thin: resolve the page through `workspace_page` (membership, 404 for another team, the
browser's key session), read through the same selectors the API uses, render. Saves,
Clears, Undos, mode changes and note edits are made by the page script against the JSON
API, one direct compare-and-set request each, so the page knows the exact acknowledged
version. Memory text is rendered into the page for its member and never logged.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from memory.documents import ActorKind, DocumentActor, document_search
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.namespace import is_memory_namespace
from memory.panels import frame_panels
from memory.selectors import (
    memory_current_get,
    memory_policy_get,
    memory_revision_text,
    memory_version_get,
    memory_version_page,
)
from memory.spaces.handle import QUALIFIERS, REQUIRED_QUALIFIERS, Visibility
from workspaces.errors import DocumentUnreadable, InvalidDocumentPath, NotFound, ValidationFailed
from workspaces.models import Bot, FileVersion, User
from workspaces.paths import document_path_require_canonical
from workspaces.selectors import (
    file_get,
    file_list,
    file_read_text,
    team_member_names,
    team_owner_is,
    workspace_data_key,
)
from workspaces.views import WorkspacePage, team_page, workspace_page

CHANGES_PAGE_SIZE = 50
SEARCH_QUERY_MAX_CHARS = 200

# One plain-language sentence per mode, shown beside the mode selector.
MODE_SENTENCES = {
    MemoryPolicy.Mode.OFF: "The assistant is not given memory and cannot change it.",
    MemoryPolicy.Mode.READ_ONLY: (
        "The assistant reads memory; what it wants to remember waits here for you to apply "
        "or dismiss."
    ),
    MemoryPolicy.Mode.AUTO: (
        "The assistant reads memory and may add to it when you ask it to remember something; "
        "each change is a revision you can see in Changes and undo."
    ),
}


@login_required
@require_safe
def memory_frame(request: HttpRequest, workspace_id: int) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    workspace = page.workspace
    policy = memory_policy_get(workspace=workspace)
    try:
        memory = memory_current_get(workspace=workspace)
    except DocumentUnreadable:
        return render(
            request,
            "memory/unreadable.html",
            _page_context(page, "memory"),
            status=422,
        )
    panels = frame_panels()
    urls = _api_urls(workspace.pk) | {"changes": _changes_url(workspace.pk)}
    for panel in panels:
        urls |= panel.api_urls()
    config = {
        "workspaceId": workspace.pk,
        "keySessionId": str(page.key_session_id) if page.key_session_id else None,
        "aiEnabled": workspace.ai_enabled,
        "recallMaxBytes": settings.MEMORY_RECALL_MAX_BYTES,
        "staleDays": settings.MEMORY_STALE_DAYS,
        "memory": {"content": memory.content, "version": memory.version, "bytes": memory.bytes},
        "policy": {"mode": policy.mode, "policyRevision": policy.policy_revision},
        "urls": urls,
    }
    modes = [
        {"value": value, "label": label, "sentence": MODE_SENTENCES[MemoryPolicy.Mode(value)]}
        for value, label in MemoryPolicy.Mode.choices
    ]
    context = _page_context(page, "memory") | {
        "memory": memory,
        "policy": policy,
        "mode_label": MemoryPolicy.Mode(policy.mode).label,
        "modes": modes,
        "recall_max_bytes": settings.MEMORY_RECALL_MAX_BYTES,
        "frame_config": config,
        "frame_panels": panels,
    }
    return render(request, "memory/frame.html", context)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "added", "removed" or "context"
    text: str


@login_required
@require_safe
def memory_changes(request: HttpRequest, workspace_id: int) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    return render(request, "memory/changes.html", _changes_context(request, page))


@login_required
@require_safe
def memory_revision(request: HttpRequest, workspace_id: int, version: int) -> HttpResponse:
    """One revision with its line diff against the previous one: the whole Changes page, or
    only the detail when htmx asks for it (the list stays, the URL is pushed)."""
    page = workspace_page(request, workspace_id)
    try:
        detail = _revision_detail(page, version)
    except NotFound:
        raise Http404("No such revision.") from None
    if request.headers.get("HX-Request") == "true" and not request.headers.get(
        "HX-History-Restore-Request"
    ):
        response = render(
            request, "memory/_revision.html", {"detail": detail, "workspace": page.workspace}
        )
    else:
        context = _changes_context(request, page) | {"detail": detail}
        response = render(request, "memory/changes.html", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
@require_safe
def notes(request: HttpRequest, workspace_id: int) -> HttpResponse:
    page = workspace_page(request, workspace_id)
    files = [
        file
        for file in file_list(workspace=page.workspace, prefix=None, include_deleted=True)
        if not is_memory_namespace(file.path)
    ]
    context = _page_context(page, "notes") | {
        "live_notes": [file for file in files if not file.is_deleted],
        "deleted_notes": [file for file in files if file.is_deleted],
        "frame_config": {
            "workspaceId": page.workspace.pk,
            "urls": _api_urls(page.workspace.pk) | {"note": _note_url(page.workspace.pk)},
        },
    }
    return render(request, "memory/notes.html", context)


@login_required
@require_safe
def note(request: HttpRequest, workspace_id: int) -> HttpResponse:
    """A note's editor. The memory document is never a note: it redirects to the frame."""
    page = workspace_page(request, workspace_id)
    workspace = page.workspace
    raw_path = request.GET.get("path", "")
    if is_memory_namespace(raw_path):
        return redirect("memory:frame", workspace_id=workspace.pk)
    try:
        path = document_path_require_canonical(raw_path)
    except InvalidDocumentPath as invalid:
        canonical = invalid.detail.get("canonical")
        if canonical is None:
            raise Http404("No such note.") from None
        return redirect(_note_url(workspace.pk, canonical))
    file = file_get(workspace=workspace, path=path)
    if file is None:
        raise Http404("No such note.")
    content, version = "", file.current_version
    if not file.is_deleted:
        data_key = workspace_data_key(workspace=workspace)
        if data_key is None:
            raise Http404("No such note.")
        try:
            revision, content = file_read_text(workspace=workspace, path=path, data_key=data_key)
        except DocumentUnreadable:
            return render(
                request, "memory/unreadable.html", _page_context(page, "notes"), status=422
            )
        version = revision.version
    context = _page_context(page, "notes") | {
        "file": file,
        "content": content,
        "version": version,
        "frame_config": {
            "workspaceId": workspace.pk,
            "note": {
                "path": path,
                "content": content,
                "version": version,
                "deleted": file.is_deleted,
            },
            "urls": _api_urls(workspace.pk)
            | {"note": _note_url(workspace.pk), "notes": _notes_url(workspace.pk)},
        },
    }
    return render(request, "memory/note.html", context)


@login_required
@require_safe
def search(request: HttpRequest, workspace_id: int) -> HttpResponse:
    """Notes and memory containing the query, searched as the API's person search does
    (bounded per request, continued by cursor). The query is neither logged nor stored."""
    page = workspace_page(request, workspace_id)
    query = request.GET.get("q", "")[:SEARCH_QUERY_MAX_CHARS]
    cursor = request.GET.get("cursor") or None
    results = None
    refused = False
    if query.strip():
        actor = DocumentActor.of_member(page.membership, ActorKind.PERSON)
        try:
            results = document_search(actor=actor, query=query, cursor=cursor)
        except ValidationFailed:
            # Only the cursor can be refused here (the query is cut to its bound): a link
            # edited by hand or from another search. The page offers the search again.
            refused = True
    context = _page_context(page, "search") | {
        "query": query,
        "results": results,
        "cursor_refused": refused,
        "memory_path": MEMORY_PATH,
        "next_url": (
            f"?{urlencode({'q': query, 'cursor': results.next_cursor})}"
            if results is not None and results.next_cursor
            else None
        ),
    }
    return render(request, "memory/search.html", context, status=400 if refused else 200)


@login_required
@require_safe
def team_memory(request: HttpRequest) -> HttpResponse:
    """The active team's memory spaces. Everything on it is read and written by the page
    script through the space routes, as the session's team: the same tenant the page names."""
    team = team_page(request)
    visibilities = [
        {
            "value": visibility.value,
            "qualifiers": [q for q in QUALIFIERS if q in REQUIRED_QUALIFIERS[visibility]],
        }
        for visibility in Visibility
    ]
    config = {
        "visibilities": visibilities,
        "maxDocumentBytes": settings.MEMORY_MAX_DOCUMENT_BYTES,
        # A document's writer is stored as `user:<id>` (or `import:<id>`); the page shows
        # the member's name. A bot, the mirror and a former member stay as stored.
        "people": {str(pk): name for pk, name in team_member_names(team=team).items()},
        "urls": {
            "usage": reverse("space-usage"),
            "docs": reverse("space-document-list"),
            "doc": reverse("space-document"),
            "export": reverse("space-export"),
            "import": reverse("space-import"),
        },
    }
    context = {
        "team": team,
        "visibilities": visibilities,
        "qualifiers": QUALIFIERS,
        "frame_config": config,
    }
    return render(request, "memory/spaces.html", context)


def _page_context(page: WorkspacePage, active_page: str) -> dict[str, Any]:
    return {
        "workspace": page.workspace,
        "membership": page.membership,
        "key_session_id": page.key_session_id,
        "active_page": active_page,
    }


def _changes_context(request: HttpRequest, page: WorkspacePage) -> dict[str, Any]:
    raw_before = request.GET.get("before", "")
    before = int(raw_before) if raw_before.isascii() and raw_before.isdigit() else None
    revisions = memory_version_page(
        workspace=page.workspace, before=before or None, limit=CHANGES_PAGE_SIZE
    )
    return _page_context(page, "changes") | {
        "revisions": revisions.revisions,
        "next_before": revisions.next_before,
        "is_first_page": before is None,
        "detail": None,
    }


def _revision_detail(page: WorkspacePage, version: int) -> dict[str, Any]:
    workspace = page.workspace
    revision = memory_version_get(workspace=workspace, version=version)
    previous: FileVersion | None = None
    if version > 1:
        previous = memory_version_get(workspace=workspace, version=version - 1)
    try:
        after = memory_revision_text(workspace=workspace, revision=revision).content
        before = (
            memory_revision_text(workspace=workspace, revision=previous).content
            if previous is not None
            else ""
        )
    except DocumentUnreadable:
        return {"revision": revision, "previous": previous, "is_unreadable": True}
    diff = _line_diff(before, after)
    memory_file = file_get(workspace=workspace, path=MEMORY_PATH)
    return {
        # The version a Restore is based on: a newer one saved meanwhile makes it a conflict.
        "current_version": memory_file.current_version if memory_file else 0,
        "revision": revision,
        "previous": previous,
        "is_unreadable": False,
        "diff": diff,
        "has_changes": any(line.kind in ("added", "removed") for line in diff),
        "content": after,
    }


def _line_diff(before: str, after: str) -> list[DiffLine]:
    """A unified line diff (three lines of context), as rows the template can mark up."""
    rows: list[DiffLine] = []
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3)
    # The first two lines are the ---/+++ file headers; a content line may itself start
    # with "--" or "++", so they are skipped by position, not by prefix.
    for index, line in enumerate(lines):
        if index < 2:
            continue
        if line.startswith("@@"):
            rows.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            rows.append(DiffLine("added", line[1:]))
        elif line.startswith("-"):
            rows.append(DiffLine("removed", line[1:]))
        else:
            rows.append(DiffLine("context", line[1:]))
    return rows


def _api_urls(workspace_id: int) -> dict[str, str]:
    return {
        "memory": reverse("memory-document", kwargs={"workspace_id": workspace_id}),
        "versions": reverse("memory-version-list", kwargs={"workspace_id": workspace_id}),
        "policy": reverse("memory-policy", kwargs={"workspace_id": workspace_id}),
        "lint": reverse("memory-lint", kwargs={"workspace_id": workspace_id}),
        "proposals": reverse("memory-proposal-list", kwargs={"workspace_id": workspace_id}),
        "blame": reverse("memory-blame", kwargs={"workspace_id": workspace_id}),
        "reviews": reverse("memory-line-review", kwargs={"workspace_id": workspace_id}),
        "documents": reverse("document", kwargs={"workspace_id": workspace_id}),
        "documentsMove": reverse("document-move", kwargs={"workspace_id": workspace_id}),
        "documentsRestore": reverse("document-restore", kwargs={"workspace_id": workspace_id}),
    }


def _changes_url(workspace_id: int) -> str:
    return reverse("memory:changes", kwargs={"workspace_id": workspace_id})


def _notes_url(workspace_id: int) -> str:
    return reverse("memory:notes", kwargs={"workspace_id": workspace_id})


def _note_url(workspace_id: int, path: str | None = None) -> str:
    url = reverse("memory:note", kwargs={"workspace_id": workspace_id})
    return url if path is None else f"{url}?{urlencode({'path': path})}"


@login_required
@require_safe
def team_bots(request: HttpRequest) -> HttpResponse:
    """The active team's bots. The page script lists, creates and edits them and issues and
    revokes their tokens through the bot routes, as the session's team; the routes decide
    who may change what (owners), the page only leaves out the controls others cannot use."""
    team = team_page(request)
    is_owner = isinstance(request.user, User) and team_owner_is(team=team, user=request.user)
    config = {
        "isOwner": is_owner,
        "urls": {"bots": reverse("bot-list"), "validate": reverse("bot-spec-validate")},
    }
    context = {
        "team": team,
        "is_owner": is_owner,
        "runtimes": Bot.Runtime.choices,
        "frame_config": config,
    }
    return render(request, "memory/bots.html", context)
