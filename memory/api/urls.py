from django.urls import path

from memory.api import blame, bots, documents, export, mirror, search, spaces, views

urlpatterns = [
    path(
        "workspaces/<int:workspace_id>/memory",
        views.MemoryDocumentApi.as_view(),
        name="memory-document",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/export",
        views.MemoryExportApi.as_view(),
        name="memory-export",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/lint",
        views.MemoryLintApi.as_view(),
        name="memory-lint",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/versions",
        views.MemoryVersionListApi.as_view(),
        name="memory-version-list",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/versions/<int:version>",
        views.MemoryVersionDetailApi.as_view(),
        name="memory-version-detail",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/blame",
        blame.MemoryBlameApi.as_view(),
        name="memory-blame",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/reviews",
        blame.MemoryLineReviewApi.as_view(),
        name="memory-line-review",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/policy",
        views.MemoryPolicyApi.as_view(),
        name="memory-policy",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/proposals",
        views.ProposalListApi.as_view(),
        name="memory-proposal-list",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/proposals/<uuid:proposal_id>/apply",
        views.ProposalApplyApi.as_view(),
        name="memory-proposal-apply",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/proposals/<uuid:proposal_id>/dismiss",
        views.ProposalDismissApi.as_view(),
        name="memory-proposal-dismiss",
    ),
    path(
        "workspaces/<int:workspace_id>/documents",
        documents.DocumentApi.as_view(),
        name="document",
    ),
    path(
        "workspaces/<int:workspace_id>/documents/move",
        documents.DocumentMoveApi.as_view(),
        name="document-move",
    ),
    path(
        "workspaces/<int:workspace_id>/documents/restore",
        documents.DocumentRestoreApi.as_view(),
        name="document-restore",
    ),
    path(
        "workspaces/<int:workspace_id>/documents/export",
        export.NotesExportApi.as_view(),
        name="document-export",
    ),
    path(
        "workspaces/<int:workspace_id>/search",
        search.WorkspaceSearchApi.as_view(),
        name="workspace-search",
    ),
    path("memory/usage", spaces.SpaceUsageApi.as_view(), name="space-usage"),
    path("memory/docs", spaces.SpaceDocumentListApi.as_view(), name="space-document-list"),
    path("memory/doc", spaces.SpaceDocumentApi.as_view(), name="space-document"),
    path("memory/export", spaces.SpaceExportApi.as_view(), name="space-export"),
    path("memory/import", spaces.SpaceImportApi.as_view(), name="space-import"),
    path("mirror/space", mirror.MirrorBotApi.as_view(), name="mirror-space"),
    path("mirror/docs", mirror.MirrorDocumentListApi.as_view(), name="mirror-document-list"),
    path("mirror/doc", mirror.MirrorDocumentApi.as_view(), name="mirror-document"),
    path("bots", bots.BotListCreateApi.as_view(), name="bot-list"),
    path("bots/validate", bots.BotSpecValidateApi.as_view(), name="bot-spec-validate"),
    path("bots/<slug:bot_id>", bots.BotDetailApi.as_view(), name="bot-detail"),
    path("bots/<slug:bot_id>/tokens", bots.BotTokenIssueApi.as_view(), name="bot-token-issue"),
    path(
        "bots/<slug:bot_id>/tokens/<int:token_id>",
        bots.BotTokenRevokeApi.as_view(),
        name="bot-token-revoke",
    ),
]
