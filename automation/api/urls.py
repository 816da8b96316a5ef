from django.urls import path

from automation.api import bot_memory, documents, views

urlpatterns = [
    path(
        "agents/assistant/conversations",
        views.ConversationListCreateApi.as_view(),
        name="conversation-list",
    ),
    path(
        "agents/assistant/<uuid:conversation_id>/messages",
        views.MessageSendApi.as_view(),
        name="message-send",
    ),
    path(
        "agents/assistant/<uuid:conversation_id>/memory-receipts",
        views.MemoryReceiptsApi.as_view(),
        name="memory-receipts",
    ),
    path(
        "workspaces/<int:workspace_id>/memory/preview",
        views.MemoryPreviewApi.as_view(),
        name="memory-preview",
    ),
    path(
        "automation/workspaces/<int:workspace_id>/memory",
        views.AutomationMemoryApi.as_view(),
        name="automation-memory",
    ),
    path(
        "automation/workspaces/<int:workspace_id>/documents",
        documents.AutomationDocumentApi.as_view(),
        name="automation-document",
    ),
    path(
        "automation/workspaces/<int:workspace_id>/documents/move",
        documents.AutomationDocumentMoveApi.as_view(),
        name="automation-document-move",
    ),
    path(
        "automation/workspaces/<int:workspace_id>/documents/restore",
        documents.AutomationDocumentRestoreApi.as_view(),
        name="automation-document-restore",
    ),
    path(
        "automation/workspaces/<int:workspace_id>/documents/search",
        documents.AutomationDocumentSearchApi.as_view(),
        name="automation-document-search",
    ),
    path("bots/me/memory/read", bot_memory.BotMemoryReadApi.as_view(), name="bot-memory-read"),
    path("bots/me/memory/list", bot_memory.BotMemoryListApi.as_view(), name="bot-memory-list"),
    path("bots/me/memory/write", bot_memory.BotMemoryWriteApi.as_view(), name="bot-memory-write"),
    path(
        "bots/<slug:bot_id>/memory/context",
        bot_memory.BotMemoryContextApi.as_view(),
        name="bot-memory-context",
    ),
]
