"""The memory app's API, grouped by what its routes hang from: a workspace (its memory document
and notes), the team's memory spaces, a bot's auto-memory mirror, and the team's bots. Each
group's prefix is written once; the route names are what callers reverse."""

from django.urls import URLPattern, URLResolver, include, path

from memory.api import blame, bots, documents, export, mirror, search, spaces, views
from memory_project.api import converters  # noqa: F401 (registers `<id:...>`)

# Below `workspaces/<id>/memory/proposals/<id>/`: what a person does with one proposal.
proposal_routes = [
    path("apply", views.ProposalApplyApi.as_view(), name="memory-proposal-apply"),
    path("dismiss", views.ProposalDismissApi.as_view(), name="memory-proposal-dismiss"),
]

# Below `workspaces/<id>/memory/`: the memory document's versions, line history and mode,
# and the proposals the assistant left for a person.
memory_document_routes: list[URLPattern | URLResolver] = [
    path("export", views.MemoryExportApi.as_view(), name="memory-export"),
    path("lint", views.MemoryLintApi.as_view(), name="memory-lint"),
    path("versions", views.MemoryVersionListApi.as_view(), name="memory-version-list"),
    path(
        "versions/<id:version>",
        views.MemoryVersionDetailApi.as_view(),
        name="memory-version-detail",
    ),
    path("blame", blame.MemoryBlameApi.as_view(), name="memory-blame"),
    path("reviews", blame.MemoryLineReviewApi.as_view(), name="memory-line-review"),
    path("policy", views.MemoryPolicyApi.as_view(), name="memory-policy"),
    path("proposals", views.ProposalListApi.as_view(), name="memory-proposal-list"),
    path("proposals/<uuid:proposal_id>/", include(proposal_routes)),
]

# Below `workspaces/<id>/documents/`: what changes or exports the workspace's notes at once.
document_routes = [
    path("move", documents.DocumentMoveApi.as_view(), name="document-move"),
    path("restore", documents.DocumentRestoreApi.as_view(), name="document-restore"),
    path("export", export.NotesExportApi.as_view(), name="document-export"),
]

workspace_routes: list[URLPattern | URLResolver] = [
    path("memory", views.MemoryDocumentApi.as_view(), name="memory-document"),
    path("memory/", include(memory_document_routes)),
    path("documents", documents.DocumentApi.as_view(), name="document"),
    path("documents/", include(document_routes)),
    path("search", search.WorkspaceSearchApi.as_view(), name="workspace-search"),
]

space_routes = [
    path("usage", spaces.SpaceUsageApi.as_view(), name="space-usage"),
    path("docs", spaces.SpaceDocumentListApi.as_view(), name="space-document-list"),
    path("doc", spaces.SpaceDocumentApi.as_view(), name="space-document"),
    path("export", spaces.SpaceExportApi.as_view(), name="space-export"),
    path("import", spaces.SpaceImportApi.as_view(), name="space-import"),
]

mirror_routes = [
    path("space", mirror.MirrorBotApi.as_view(), name="mirror-space"),
    path("docs", mirror.MirrorDocumentListApi.as_view(), name="mirror-document-list"),
    path("doc", mirror.MirrorDocumentApi.as_view(), name="mirror-document"),
]

# Below `bots/<id>/`: the bot's tokens.
bot_token_routes = [
    path("tokens", bots.BotTokenIssueApi.as_view(), name="bot-token-issue"),
    path("tokens/<id:token_id>", bots.BotTokenRevokeApi.as_view(), name="bot-token-revoke"),
]

urlpatterns = [
    path("workspaces/<id:workspace_id>/", include(workspace_routes)),
    path("memory/", include(space_routes)),
    path("mirror/", include(mirror_routes)),
    path("bots", bots.BotListCreateApi.as_view(), name="bot-list"),
    path("bots/validate", bots.BotSpecValidateApi.as_view(), name="bot-spec-validate"),
    path("bots/<slug:bot_id>", bots.BotDetailApi.as_view(), name="bot-detail"),
    path("bots/<slug:bot_id>/", include(bot_token_routes)),
]
