"""The assistant's routes, the automation credentials' document routes and a bot's own memory
tools, grouped by what they hang from; each group's prefix is written once."""

from django.urls import URLPattern, URLResolver, include, path

from automation.api import bot_memory, documents, views
from memory_project.api import converters  # noqa: F401 (registers `<id:...>`)

conversation_routes = [
    path("messages", views.MessageSendApi.as_view(), name="message-send"),
    path("memory-receipts", views.MemoryReceiptsApi.as_view(), name="memory-receipts"),
]

# Below `automation/workspaces/<id>/documents/`: a note's move and restore, and the search
# of them all.
automation_document_routes = [
    path("move", documents.AutomationDocumentMoveApi.as_view(), name="automation-document-move"),
    path(
        "restore",
        documents.AutomationDocumentRestoreApi.as_view(),
        name="automation-document-restore",
    ),
    path(
        "search",
        documents.AutomationDocumentSearchApi.as_view(),
        name="automation-document-search",
    ),
]

# What an automation credential reaches of one workspace, below
# `api/v1/automation/workspaces/<id>/`: memory_project/urls.py resolves them before every
# other API route, since a recall runs before every model call.
automation_workspace_routes: list[URLPattern | URLResolver] = [
    path("memory", views.AutomationMemoryApi.as_view(), name="automation-memory"),
    path("documents", documents.AutomationDocumentApi.as_view(), name="automation-document"),
    path("documents/", include(automation_document_routes)),
]

# The calling bot's own memory tools (the bot is the token's).
bot_memory_routes = [
    path("read", bot_memory.BotMemoryReadApi.as_view(), name="bot-memory-read"),
    path("list", bot_memory.BotMemoryListApi.as_view(), name="bot-memory-list"),
    path("write", bot_memory.BotMemoryWriteApi.as_view(), name="bot-memory-write"),
]

urlpatterns = [
    path(
        "agents/assistant/conversations",
        views.ConversationListCreateApi.as_view(),
        name="conversation-list",
    ),
    path("agents/assistant/<uuid:conversation_id>/", include(conversation_routes)),
    path(
        "workspaces/<id:workspace_id>/memory/preview",
        views.MemoryPreviewApi.as_view(),
        name="memory-preview",
    ),
    path("bots/me/memory/", include(bot_memory_routes)),
    path(
        "bots/<slug:bot_id>/memory/context",
        bot_memory.BotMemoryContextApi.as_view(),
        name="bot-memory-context",
    ),
]
